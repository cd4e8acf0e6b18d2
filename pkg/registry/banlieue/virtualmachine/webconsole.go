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
	"reflect"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/console"
)

// WebConsoleREST is virtualmachines/NAME/webconsole: POST the requester's
// RSA public key, get a one-time web console URL encrypted with it, from
// the process serving the VM's Provider, reached as /console reaches it.
// Nothing is stored; the URL is encrypted by that process, so this
// server never holds it in the clear.
type WebConsoleREST struct {
	vms       rest.Getter
	providers rest.Getter
	tokens    TokenSource
}

var _ rest.NamedCreater = &WebConsoleREST{}

// webConsoleTimeout bounds the whole exchange with the provider (its
// backend's ticket call included, which the provider bounds itself).
const webConsoleTimeout = 45 * time.Second

// New is the request and answer object.
func (*WebConsoleREST) New() runtime.Object { return &banlieue.VirtualMachineWebConsole{} }

// Destroy releases nothing.
func (*WebConsoleREST) Destroy() {}

// Create asks for a web console URL of the VM name.
func (r *WebConsoleREST) Create(ctx context.Context, name string, obj runtime.Object, createValidation rest.ValidateObjectFunc, _ *metav1.CreateOptions) (runtime.Object, error) {
	req, ok := obj.(*banlieue.VirtualMachineWebConsole)
	if !ok {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("not a VirtualMachineWebConsole: %T", obj))
	}
	if req.Name != "" && req.Name != name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("metadata.name %q is not the VirtualMachine's (%q)", req.Name, name))
	}
	// Only spec.publicKey is read: anything else a request carries would
	// be silently dropped, so it is refused.
	// (managedFields are the server's own: the create handler's field
	// manager records the request.)
	meta := req.ObjectMeta
	meta.Name, meta.Namespace, meta.ManagedFields = "", "", nil
	if !reflect.DeepEqual(meta, metav1.ObjectMeta{}) {
		return nil, apierrors.NewBadRequest("a web console request takes no metadata but its name and namespace")
	}
	if req.Status != (banlieue.VirtualMachineWebConsoleStatus{}) {
		return nil, apierrors.NewBadRequest("status is the answer's; a request sets spec.publicKey only")
	}
	// Refused before the backend is asked: a key that cannot take the
	// URL would waste a ticket.
	if _, err := console.ParsePublicKey(req.Spec.PublicKey); err != nil {
		return nil, apierrors.NewBadRequest("spec.publicKey: " + err.Error())
	}
	if createValidation != nil {
		if err := createValidation(ctx, req.DeepCopyObject()); err != nil {
			return nil, err
		}
	}
	at, err := consoleEndpoint(ctx, r.vms, r.providers, r.tokens, name)
	if err != nil {
		return nil, err
	}
	requester := ""
	if u, ok := genericapirequest.UserFrom(ctx); ok {
		requester = u.GetName()
	}
	ctx, cancel := context.WithTimeout(ctx, webConsoleTimeout)
	defer cancel()
	a, err := console.RequestWebConsole(ctx, at.endpoint, at.target, at.token, requester, req.Spec.PublicKey)
	if err != nil {
		return nil, err
	}
	out := &banlieue.VirtualMachineWebConsole{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: genericapirequest.NamespaceValue(ctx)},
		Spec:       req.Spec,
		Status:     banlieue.VirtualMachineWebConsoleStatus{URL: a.URL, ExpiresAt: metav1.NewTime(a.ExpiresAt)},
	}
	return out, nil
}
