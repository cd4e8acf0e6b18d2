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

// Package snapshot is the registry of VirtualMachineSnapshots and
// VirtualMachineRestores (namespaced, with status). A create is checked
// against the VM, its Provider and the backend's answers before it is
// stored, so a snapshot that cannot be taken, or a restore that cannot
// run, is refused by field path rather than failing later.
package snapshot

import (
	"context"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/validation"
	statusrest "github.com/firestoned/banlieue/pkg/registry/status"
	"github.com/firestoned/banlieue/pkg/registry/table"
)

// SnapshotStrategy governs writes to the main virtualmachinesnapshots
// endpoint.
type SnapshotStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	checks *Checks
}

func (SnapshotStrategy) NamespaceScoped() bool { return true }

func (SnapshotStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

// PrepareForCreate clears the status, holds the object until its backend
// snapshot is removed (the finalizer, there from the start so a delete
// never outruns the controller) and makes the VM its owner, so deleting
// the VM deletes its snapshots.
func (s SnapshotStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	snap := obj.(*banlieue.VirtualMachineSnapshot)
	snap.Status = banlieue.VirtualMachineSnapshotStatus{}
	snap.Generation = 1
	addFinalizer(&snap.ObjectMeta, banlieue.SnapshotFinalizer)
	s.checks.own(ctx, &snap.ObjectMeta, snap.Spec.VMName)
}

func (SnapshotStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*banlieue.VirtualMachineSnapshot).Status = old.(*banlieue.VirtualMachineSnapshot).Status
}

func (s SnapshotStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	snap := obj.(*banlieue.VirtualMachineSnapshot)
	if errs := validation.ValidateVirtualMachineSnapshot(snap); len(errs) > 0 {
		return errs
	}
	return s.checks.snapshot(ctx, snap)
}

func (SnapshotStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachineSnapshotUpdate(obj.(*banlieue.VirtualMachineSnapshot), old.(*banlieue.VirtualMachineSnapshot))
}

func (SnapshotStrategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (SnapshotStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (SnapshotStrategy) AllowCreateOnUpdate(context.Context) bool      { return false }
func (SnapshotStrategy) AllowUnconditionalUpdate(context.Context) bool { return true }
func (SnapshotStrategy) Canonicalize(runtime.Object)                   {}

// SnapshotStatusStrategy governs writes to virtualmachinesnapshots/status.
type SnapshotStatusStrategy struct{ SnapshotStrategy }

func (SnapshotStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return statusrest.ResetFields()
}

func (SnapshotStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	snap, oldSnap := obj.(*banlieue.VirtualMachineSnapshot), old.(*banlieue.VirtualMachineSnapshot)
	snap.Spec = oldSnap.Spec
	metav1.ResetObjectMetaForStatus(snap, oldSnap)
}

func (SnapshotStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachineSnapshotStatusUpdate(obj.(*banlieue.VirtualMachineSnapshot), old.(*banlieue.VirtualMachineSnapshot))
}

// RestoreStrategy governs writes to the main virtualmachinerestores
// endpoint.
type RestoreStrategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	checks *Checks
}

func (RestoreStrategy) NamespaceScoped() bool { return true }

func (RestoreStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

// PrepareForCreate starts the restore Pending, owned by its VM.
func (s RestoreStrategy) PrepareForCreate(ctx context.Context, obj runtime.Object) {
	r := obj.(*banlieue.VirtualMachineRestore)
	r.Status = banlieue.VirtualMachineRestoreStatus{Phase: banlieue.RestorePending}
	r.Generation = 1
	s.checks.own(ctx, &r.ObjectMeta, r.Spec.VMName)
}

func (RestoreStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*banlieue.VirtualMachineRestore).Status = old.(*banlieue.VirtualMachineRestore).Status
}

func (s RestoreStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	r := obj.(*banlieue.VirtualMachineRestore)
	if errs := validation.ValidateVirtualMachineRestore(r); len(errs) > 0 {
		return errs
	}
	return s.checks.restore(ctx, r)
}

func (RestoreStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachineRestoreUpdate(obj.(*banlieue.VirtualMachineRestore), old.(*banlieue.VirtualMachineRestore))
}

func (RestoreStrategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }
func (RestoreStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}
func (RestoreStrategy) AllowCreateOnUpdate(context.Context) bool      { return false }
func (RestoreStrategy) AllowUnconditionalUpdate(context.Context) bool { return true }
func (RestoreStrategy) Canonicalize(runtime.Object)                   {}

// RestoreStatusStrategy governs writes to virtualmachinerestores/status.
type RestoreStatusStrategy struct{ RestoreStrategy }

func (RestoreStatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return statusrest.ResetFields()
}

func (RestoreStatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	r, oldR := obj.(*banlieue.VirtualMachineRestore), old.(*banlieue.VirtualMachineRestore)
	r.Spec = oldR.Spec
	metav1.ResetObjectMetaForStatus(r, oldR)
}

func (RestoreStatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachineRestoreStatusUpdate(obj.(*banlieue.VirtualMachineRestore), old.(*banlieue.VirtualMachineRestore))
}

func addFinalizer(m *metav1.ObjectMeta, f string) {
	for _, have := range m.Finalizers {
		if have == f {
			return
		}
	}
	m.Finalizers = append(m.Finalizers, f)
}

// getAttrs returns the labels and fields of either kind for filtering.
func getAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	switch o := obj.(type) {
	case *banlieue.VirtualMachineSnapshot:
		return o.Labels, generic.AddObjectMetaFieldsSet(fields.Set{"spec.vmName": o.Spec.VMName}, &o.ObjectMeta, true), nil
	case *banlieue.VirtualMachineRestore:
		return o.Labels, generic.AddObjectMetaFieldsSet(fields.Set{"spec.vmName": o.Spec.VMName}, &o.ObjectMeta, true), nil
	}
	return nil, nil, fmt.Errorf("not a VirtualMachineSnapshot or VirtualMachineRestore: %T", obj)
}

func match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: getAttrs}
}

// REST is a main endpoint; its kinds are in the "banlieue" category.
type REST struct {
	*genericregistry.Store
	shortNames []string
}

var (
	_ rest.CategoriesProvider = &REST{}
	_ rest.ShortNamesProvider = &REST{}
)

// Categories puts both kinds in "kubectl get banlieue".
func (*REST) Categories() []string { return []string{"banlieue"} }

// ShortNames: vmsnapshot and vmrestore, as KubeVirt's users type them.
func (r *REST) ShortNames() []string { return r.shortNames }

// NewStorage builds the etcd-backed storage of both kinds; checks reads
// the VMs, Providers and backends they are checked against.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, checks *Checks) (snapshots, snapshotStatus, restores, restoreStatus rest.Storage, err error) {
	ss := SnapshotStrategy{scheme, names.SimpleNameGenerator, checks}
	snapStore := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.VirtualMachineSnapshot{} },
		NewListFunc:               func() runtime.Object { return &banlieue.VirtualMachineSnapshotList{} },
		PredicateFunc:             match,
		DefaultQualifiedResource:  banlieue.Resource("virtualmachinesnapshots"),
		SingularQualifiedResource: banlieue.Resource("virtualmachinesnapshot"),
		CreateStrategy:            ss,
		UpdateStrategy:            ss,
		DeleteStrategy:            ss,
		ResetFieldsStrategy:       ss,
		TableConvertor:            snapshotTable,
	}
	if err := snapStore.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: getAttrs}); err != nil {
		return nil, nil, nil, nil, err
	}
	checks.snapshots = snapStore
	rs := RestoreStrategy{scheme, names.SimpleNameGenerator, checks}
	restoreStore := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.VirtualMachineRestore{} },
		NewListFunc:               func() runtime.Object { return &banlieue.VirtualMachineRestoreList{} },
		PredicateFunc:             match,
		DefaultQualifiedResource:  banlieue.Resource("virtualmachinerestores"),
		SingularQualifiedResource: banlieue.Resource("virtualmachinerestore"),
		CreateStrategy:            rs,
		UpdateStrategy:            rs,
		DeleteStrategy:            rs,
		ResetFieldsStrategy:       rs,
		TableConvertor:            restoreTable,
	}
	if err := restoreStore.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: getAttrs}); err != nil {
		return nil, nil, nil, nil, err
	}
	checks.restores = restoreStore
	return &REST{snapStore, []string{"vmsnapshot", "vmsnap"}}, statusrest.NewREST(snapStore, SnapshotStatusStrategy{ss}),
		&REST{restoreStore, []string{"vmrestore"}}, statusrest.NewREST(restoreStore, RestoreStatusStrategy{rs}), nil
}

var snapshotTable = table.New(func(obj runtime.Object) ([]interface{}, error) {
	s, ok := obj.(*banlieue.VirtualMachineSnapshot)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	created := "<none>"
	if t := s.Status.CreationTime; t != nil {
		created = t.UTC().Format("2006-01-02T15:04:05Z")
	}
	return []interface{}{s.Spec.VMName, s.Status.ReadyToUse, table.ConditionReason(s.Status.Conditions, banlieue.SnapshotReady), created, s.Status.Memory, s.Status.BackendRef}, nil
},
	table.Column{Name: "VM", Type: "string", Description: "The VirtualMachine snapshotted."},
	table.Column{Name: "Ready", Type: "boolean", Description: "status.readyToUse: a restore may use it."},
	table.Column{Name: "Reason", Type: "string", Description: "The Ready condition's reason."},
	table.Column{Name: "Created", Type: "string", Description: "When the backend took it."},
	table.Column{Name: "Memory", Type: "boolean", Priority: 1, Description: "It holds the VM's running memory."},
	table.Column{Name: "Backend-Ref", Type: "string", Priority: 1, Description: "The backend's reference to it."},
)

var restoreTable = table.New(func(obj runtime.Object) ([]interface{}, error) {
	r, ok := obj.(*banlieue.VirtualMachineRestore)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	return []interface{}{r.Spec.VMName, r.Spec.SnapshotName, string(r.Status.Phase), r.Status.Message}, nil
},
	table.Column{Name: "VM", Type: "string", Description: "The VirtualMachine restored."},
	table.Column{Name: "Snapshot", Type: "string", Description: "The VirtualMachineSnapshot it returns to."},
	table.Column{Name: "Phase", Type: "string", Description: "Pending, PoweringOff, Restoring, Done, Failed or Unknown."},
	table.Column{Name: "Message", Type: "string", Priority: 1, Description: "What happens, or why it failed."},
)
