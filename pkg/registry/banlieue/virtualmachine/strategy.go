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
// Package virtualmachine is the registry of VirtualMachines: strategies that
// default, validate and guard the spec/status split, and etcd storage with
// the status and resolved subresources.
package virtualmachine

import (
	"context"
	"fmt"
	"slices"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/validation"
	statusrest "github.com/firestoned/banlieue/pkg/registry/status"
)

// NewStrategy returns the strategy of the main VirtualMachine endpoint.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{typer, names.SimpleNameGenerator}
}

// Strategy governs writes to the main endpoint: spec and metadata.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

func (Strategy) NamespaceScoped() bool { return true }

// GetResetFields: status is owned by the status subresource, so server-side
// apply through the main endpoint never claims it.
func (Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{
		"banlieue.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status")),
	}
}

// PrepareForCreate clears status (only controllers write it) and starts
// generation at 1.
func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	vm := obj.(*banlieue.VirtualMachine)
	vm.Status = banlieue.VirtualMachineStatus{}
	vm.Generation = 1
}

// PrepareForUpdate keeps the stored status and bumps generation only when
// the spec changes.
func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	vm, oldVM := obj.(*banlieue.VirtualMachine), old.(*banlieue.VirtualMachine)
	vm.Status = oldVM.Status
	if !apiequality.Semantic.DeepEqual(vm.Spec, oldVM.Spec) {
		vm.Generation = oldVM.Generation + 1
	}
}

func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachine(obj.(*banlieue.VirtualMachine))
}

func (Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

func (Strategy) AllowCreateOnUpdate(context.Context) bool { return false }

func (Strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (Strategy) Canonicalize(runtime.Object) {}

func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachineUpdate(obj.(*banlieue.VirtualMachine), old.(*banlieue.VirtualMachine))
}

func (Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// NewStatusStrategy returns the strategy of the status subresource.
func NewStatusStrategy(s Strategy) StatusStrategy { return StatusStrategy{s} }

// StatusStrategy governs writes to /status: only status changes.
type StatusStrategy struct{ Strategy }

// GetResetFields: spec is owned by the main endpoint.
func (StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return statusrest.ResetFields()
}

// PrepareForUpdate keeps the stored spec, so a status writer can never
// change what the user asked for. A status that records a placement adds
// the VM's finalizer (holdPlaced).
func (StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	vm := obj.(*banlieue.VirtualMachine)
	vm.Spec = old.(*banlieue.VirtualMachine).Spec
	metav1.ResetObjectMetaForStatus(vm, old.(*banlieue.VirtualMachine))
	holdPlaced(vm)
}

// holdPlaced adds VirtualMachineFinalizer to a placed VM not being
// deleted: the placement is what may be built, and the VM must outlive
// what is built of it. Added here, with the status write that places
// the VM, it costs no request of its own (docs/provisioning.md).
func holdPlaced(vm *banlieue.VirtualMachine) {
	if vm.Status.Scheduled == nil || vm.DeletionTimestamp != nil || slices.Contains(vm.Finalizers, banlieue.VirtualMachineFinalizer) {
		return
	}
	vm.Finalizers = append(vm.Finalizers, banlieue.VirtualMachineFinalizer)
}

func (StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVirtualMachineStatusUpdate(obj.(*banlieue.VirtualMachine), old.(*banlieue.VirtualMachine))
}

func (StatusStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// SelectableFields are the fields a field selector may name.
func SelectableFields(vm *banlieue.VirtualMachine) fields.Set {
	set := generic.ObjectMetaFieldsSet(&vm.ObjectMeta, true)
	set["spec.classRef.name"] = vm.Spec.ClassRef.Name
	set["spec.imageRef.name"] = vm.Spec.ImageRef.Name
	set["spec.desiredPowerState"] = string(vm.Spec.DesiredPowerState)
	provider := ""
	if vm.Status.Scheduled != nil {
		provider = vm.Status.Scheduled.Provider
	}
	set["status.scheduled.provider"] = provider
	return set
}

// GetAttrs returns labels and fields of a VirtualMachine for filtering.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	vm, ok := obj.(*banlieue.VirtualMachine)
	if !ok {
		return nil, nil, fmt.Errorf("not a VirtualMachine: %T", obj)
	}
	return vm.Labels, SelectableFields(vm), nil
}

// Match is the filter used by list and watch.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}
