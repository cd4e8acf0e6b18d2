/*
Copyright The banlieue Authors.

Licensed under the Apache License, Version 2.0 (the "License");
you may not use this file except in compliance with the License.
You may obtain a copy of the License at

	http://www.apache.org/licenses/LICENSE-2.0

Unless required by applicable law or agreed to in writing, software
distributed under the License is distributed on an "AS IS" BASIS,
WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
See the License for the specific language governing permissions and
limitations under the License.
*/

package virtualmachine

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/registry/status"
)

// RestartREST is virtualmachines/NAME/restart: one restart (a reset) of
// the running VM. The request is recorded in the VM's status.restart
// before the answer, so nothing is lost to a crash; the same requestID
// again answers the same record, so a retry restarts once; the provider
// acts on each ID once (machine spec.restartRequestID).
type RestartREST struct {
	// status writes the VM as virtualmachines/status does.
	status *status.REST
}

var _ rest.NamedCreater = &RestartREST{}

// New is the request.
func (*RestartREST) New() runtime.Object { return &banlieue.VirtualMachineRestart{} }

// Destroy releases nothing.
func (*RestartREST) Destroy() {}

// Create records a restart of VM name.
func (r *RestartREST) Create(ctx context.Context, name string, obj runtime.Object, _ rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*banlieue.VirtualMachineRestart)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a VirtualMachineRestart: %T", obj))
	}
	id := req.RequestID
	if id == "" {
		id = string(uuid.NewUUID())
	}
	// It becomes a machine's spec.restartRequestID (at most 128).
	if msgs := validation.IsDNS1123Subdomain(id); len(msgs) > 0 || len(id) > 128 {
		msgs = append(msgs, "at most 128 characters")
		return nil, apierrors.NewInvalid(banlieue.Kind("VirtualMachineRestart"), name, field.ErrorList{
			field.Invalid(field.NewPath("requestID"), id, strings.Join(msgs, "; "))})
	}
	requester := ""
	if u, ok := genericapirequest.UserFrom(ctx); ok {
		requester = u.GetName()
	}
	var recorded *banlieue.VirtualMachineRestartStatus
	_, _, err := r.status.Update(ctx, name, rest.DefaultUpdatedObjectInfo(nil, func(_ context.Context, _, old runtime.Object) (runtime.Object, error) {
		vm := old.(*banlieue.VirtualMachine).DeepCopy()
		cur := vm.Status.Restart
		switch {
		case cur != nil && cur.ID == id:
			recorded = cur // asked again: the same restart
			return vm, nil
		case cur != nil && (cur.Phase == banlieue.RestartPending || cur.Phase == banlieue.RestartSending):
			return nil, apierrors.NewConflict(banlieue.Resource("virtualmachines"), name,
				fmt.Errorf("restart %s (asked by %s) is still %s", cur.ID, orUnknown(cur.Requester), cur.Phase))
		case vm.Status.InfrastructureRef == nil:
			return nil, apierrors.NewConflict(banlieue.Resource("virtualmachines"), name,
				fmt.Errorf("it has no machine yet: there is nothing to restart"))
		case vm.Spec.DesiredPowerState != "" && vm.Spec.DesiredPowerState != banlieue.PowerStatePoweredOn:
			return nil, apierrors.NewConflict(banlieue.Resource("virtualmachines"), name,
				fmt.Errorf("spec.desiredPowerState is %s: only a running VM restarts", vm.Spec.DesiredPowerState))
		}
		recorded = &banlieue.VirtualMachineRestartStatus{ID: id, RequestedAt: metav1.Now(), Requester: requester, Phase: banlieue.RestartPending}
		vm.Status.Restart = recorded
		return vm, nil
	}), rest.ValidateAllObjectFunc, rest.ValidateAllObjectUpdateFunc, false, &metav1.UpdateOptions{})
	if err != nil {
		return nil, err
	}
	return &banlieue.VirtualMachineRestart{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: genericapirequest.NamespaceValue(ctx)},
		RequestID: id, Status: recorded}, nil
}

func orUnknown(s string) string {
	if s == "" {
		return "someone"
	}
	return s
}
