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

// Package snapshot is the core controller of VirtualMachineSnapshots and
// VirtualMachineRestores. It never talks to a backend: per VM, it writes
// the snapshots and the restore the VM's machine is to have
// (spec.snapshots, spec.restoreRequest, in infrastructure.banlieue.io's
// common machine fields), and mirrors what the machine's provider
// reports back onto the objects, with Events.
package snapshot

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/snapshots"

	controllerruntime "sigs.k8s.io/controller-runtime"
)

// vmNameField indexes both kinds by spec.vmName.
const vmNameField = "spec.vmName"

// Reconciler reconciles one VirtualMachine's snapshots and restores.
type Reconciler struct {
	Client         ctrl.Client
	Recorder       events.EventRecorder
	Infrastructure *infrastructure.Registry
}

// SetupWithManager registers the controller: keyed by VM, woken by the
// VM, its snapshots and restores, and its machines.
func (r *Reconciler) SetupWithManager(mgr controllerruntime.Manager) error {
	ctx := context.Background()
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &v1alpha1.VirtualMachineSnapshot{}, vmNameField, func(o ctrl.Object) []string {
		return []string{o.(*v1alpha1.VirtualMachineSnapshot).Spec.VMName}
	}); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &v1alpha1.VirtualMachineRestore{}, vmNameField, func(o ctrl.Object) []string {
		return []string{o.(*v1alpha1.VirtualMachineRestore).Spec.VMName}
	}); err != nil {
		return err
	}
	byVM := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o ctrl.Object) []reconcile.Request {
		var vm string
		switch o := o.(type) {
		case *v1alpha1.VirtualMachineSnapshot:
			vm = o.Spec.VMName
		case *v1alpha1.VirtualMachineRestore:
			vm = o.Spec.VMName
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: vm}}}
	})
	b := controllerruntime.NewControllerManagedBy(mgr).
		Named("snapshot").
		For(&v1alpha1.VirtualMachine{}).
		Watches(&v1alpha1.VirtualMachineSnapshot{}, byVM).
		Watches(&v1alpha1.VirtualMachineRestore{}, byVM)
	for _, kind := range r.Infrastructure.Kinds() {
		owned, err := infrastructure.NewObject(mgr.GetScheme(), kind, "", "")
		if err != nil {
			return err
		}
		b = b.Watches(owned, handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &v1alpha1.VirtualMachine{}, handler.OnlyControllerOwner()))
	}
	return b.Complete(conflict.Requeue(r))
}

// machine is the VM's current machine as the snapshot controller sees it.
type machine struct {
	obj   ctrl.Object
	ref   v1alpha1.InfrastructureReference
	snaps infrastructure.MachineSnapshots
}

// Reconcile brings the VM's machine's snapshot fields to its snapshot and
// restore objects, and those objects' statuses to the machine's.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	var vm v1alpha1.VirtualMachine
	vmFound := true
	if err := r.Client.Get(ctx, req.NamespacedName, &vm); apierrors.IsNotFound(err) {
		vmFound = false
	} else if err != nil {
		return reconcile.Result{}, err
	}
	snaps, restores, err := r.objectsOf(ctx, req.NamespacedName)
	if err != nil {
		return reconcile.Result{}, err
	}
	var m *machine
	var bound snapshots.Bound
	var limitsErr string
	if vmFound {
		if m, err = r.machineOf(ctx, &vm); err != nil {
			return reconcile.Result{}, err
		}
		if bound, limitsErr, err = r.boundOf(ctx, &vm); err != nil {
			return reconcile.Result{}, err
		}
	}
	desired, snapWrites := r.reconcileSnapshots(snaps, m, bound, limitsErr)
	request, restoreWrites := r.reconcileRestores(&vm, restores, snaps, m)
	if m != nil {
		if err := r.writeMachine(ctx, m, desired, request); err != nil {
			return reconcile.Result{}, err
		}
	}
	for _, w := range slices.Concat(snapWrites, restoreWrites) {
		if err := w(ctx); err != nil {
			return reconcile.Result{}, err
		}
	}
	return reconcile.Result{}, nil
}

// write is one status or finalizer write of a reconcile, made once the
// machine's spec is written.
type write func(context.Context) error

// objectsOf lists the snapshots and restores of the VM key names, oldest
// first (the order the per-VM bound admits them in).
func (r *Reconciler) objectsOf(ctx context.Context, key types.NamespacedName) ([]*v1alpha1.VirtualMachineSnapshot, []*v1alpha1.VirtualMachineRestore, error) {
	var sl v1alpha1.VirtualMachineSnapshotList
	if err := r.Client.List(ctx, &sl, ctrl.InNamespace(key.Namespace), ctrl.MatchingFields{vmNameField: key.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the snapshots of %s: %w", key, err)
	}
	var rl v1alpha1.VirtualMachineRestoreList
	if err := r.Client.List(ctx, &rl, ctrl.InNamespace(key.Namespace), ctrl.MatchingFields{vmNameField: key.Name}); err != nil {
		return nil, nil, fmt.Errorf("listing the restores of %s: %w", key, err)
	}
	snaps := make([]*v1alpha1.VirtualMachineSnapshot, len(sl.Items))
	for i := range sl.Items {
		snaps[i] = &sl.Items[i]
	}
	restores := make([]*v1alpha1.VirtualMachineRestore, len(rl.Items))
	for i := range rl.Items {
		restores[i] = &rl.Items[i]
	}
	slices.SortStableFunc(snaps, func(a, b *v1alpha1.VirtualMachineSnapshot) int { return olderFirst(a, b) })
	slices.SortStableFunc(restores, func(a, b *v1alpha1.VirtualMachineRestore) int { return olderFirst(a, b) })
	return snaps, restores, nil
}

func olderFirst(a, b ctrl.Object) int {
	if c := a.GetCreationTimestamp().Compare(b.GetCreationTimestamp().Time); c != 0 {
		return c
	}
	return strings.Compare(a.GetName(), b.GetName())
}

// machineOf is the VM's current machine (status.infrastructureRef); nil
// when it has none (not built, or gone).
func (r *Reconciler) machineOf(ctx context.Context, vm *v1alpha1.VirtualMachine) (*machine, error) {
	ref := vm.Status.InfrastructureRef
	if ref == nil || ref.Name == "" {
		return nil, nil
	}
	kind, ok := r.Infrastructure.KindOf(ref.APIGroup, ref.Kind)
	if !ok {
		return nil, nil
	}
	obj, err := infrastructure.NewObject(r.Client.Scheme(), kind, vm.Namespace, ref.Name)
	if err != nil {
		return nil, err
	}
	if err := r.Client.Get(ctx, ctrl.ObjectKeyFromObject(obj), obj); apierrors.IsNotFound(err) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	if obj.GetDeletionTimestamp() != nil {
		return nil, nil // going, with its backend snapshots
	}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	return &machine{obj: obj, ref: *ref, snaps: infrastructure.ReadSnapshots(u)}, nil
}

// boundOf is how many snapshots the VM's Provider allows it, or why it
// allows none (its backend takes no snapshots).
func (r *Reconciler) boundOf(ctx context.Context, vm *v1alpha1.VirtualMachine) (snapshots.Bound, string, error) {
	if vm.Status.Scheduled == nil {
		return snapshots.Bound{}, "", nil
	}
	key := placement.QualifiedProvider(vm.Namespace, vm.Status.Scheduled.Provider)
	ns, name, _ := strings.Cut(key, "/")
	var p v1alpha1.Provider
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, &p); apierrors.IsNotFound(err) {
		return snapshots.Bound{}, fmt.Sprintf("the VM's Provider %s is gone", key), nil
	} else if err != nil {
		return snapshots.Bound{}, "", err
	}
	limits, ok := r.Infrastructure.SnapshotLimits(p.Spec.ProviderClassRef.Name)
	if !ok {
		return snapshots.Bound{}, fmt.Sprintf("the VM runs on Provider %s, whose backend (%s) takes no snapshots", key, p.Spec.ProviderClassRef.Name), nil
	}
	return snapshots.BoundOf(key, p.Spec.Capabilities.MaxSnapshotsPerVM, limits), "", nil
}

// writeMachine sets the machine's snapshot fields to desired and request
// when they differ: a merge patch of those two fields only.
func (r *Reconciler) writeMachine(ctx context.Context, m *machine, desired []infrav1.MachineSnapshot, request *infrav1.RestoreRequest) error {
	if sameSnapshots(m.snaps.Spec, desired) && apiequality.Semantic.DeepEqual(m.snaps.RestoreRequest, request) {
		return nil
	}
	spec := map[string]interface{}{"snapshots": nil, "restoreRequest": nil}
	if len(desired) > 0 {
		spec["snapshots"] = desired
	}
	if request != nil {
		spec["restoreRequest"] = request
	}
	data, err := json.Marshal(map[string]interface{}{"spec": spec})
	if err != nil {
		return err
	}
	if err := r.Client.Patch(ctx, m.obj, ctrl.RawPatch(types.MergePatchType, data)); err != nil {
		return fmt.Errorf("writing the snapshots of machine %s: %w", m.ref.Name, err)
	}
	return nil
}

func sameSnapshots(a, b []infrav1.MachineSnapshot) bool {
	return len(a) == len(b) && (len(a) == 0 || apiequality.Semantic.DeepEqual(a, b))
}

// writeStatus patches obj's status from base when it changed.
func (r *Reconciler) writeStatus(ctx context.Context, base, obj ctrl.Object) error {
	return patch.Status(ctx, r.Client, base, obj, false)
}

func (r *Reconciler) event(obj runtime.Object, eventType, reason, action, message string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(obj, nil, eventType, reason, action, "%s", message)
	}
}
