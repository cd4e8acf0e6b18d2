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

package validation

import (
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// MaxSnapshotsPerVMBound is the most snapshots a Provider may allow per
// VM: what a machine's spec.snapshots holds.
const MaxSnapshotsPerVMBound = 64

var restorePhases = sets.New(banlieue.RestorePending, banlieue.RestorePoweringOff, banlieue.RestoreRestoring,
	banlieue.RestoreDone, banlieue.RestoreFailed, banlieue.RestoreUnknown)

// ValidateVirtualMachineSnapshot validates a new VirtualMachineSnapshot.
func ValidateVirtualMachineSnapshot(s *banlieue.VirtualMachineSnapshot) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&s.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validateRefName(s.Spec.VMName, field.NewPath("spec", "vmName"))...)
}

// ValidateVirtualMachineSnapshotUpdate validates an update: the spec is
// immutable (a snapshot is of one VM, taken one way).
func ValidateVirtualMachineSnapshotUpdate(s, old *banlieue.VirtualMachineSnapshot) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&s.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(s.Spec, old.Spec, field.NewPath("spec"))...)
}

// ValidateVirtualMachineSnapshotStatusUpdate validates a status write.
func ValidateVirtualMachineSnapshotStatusUpdate(s, old *banlieue.VirtualMachineSnapshot) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&s.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	p := field.NewPath("status")
	allErrs = append(allErrs, validateConditions(s.Status.Conditions, p.Child("conditions"))...)
	allErrs = append(allErrs, validateFreeText(s.Status.BackendName, false, p.Child("backendName"))...)
	allErrs = append(allErrs, validateFreeText(s.Status.BackendRef, false, p.Child("backendRef"))...)
	if m := s.Status.Machine; m != nil {
		allErrs = append(allErrs, validateRefName(m.Name, p.Child("machine", "name"))...)
	}
	return allErrs
}

// ValidateVirtualMachineRestore validates a new VirtualMachineRestore.
func ValidateVirtualMachineRestore(r *banlieue.VirtualMachineRestore) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&r.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	p := field.NewPath("spec")
	allErrs = append(allErrs, validateRefName(r.Spec.VMName, p.Child("vmName"))...)
	return append(allErrs, validateRefName(r.Spec.SnapshotName, p.Child("snapshotName"))...)
}

// ValidateVirtualMachineRestoreUpdate validates an update: a restore is an
// action, its spec never changes.
func ValidateVirtualMachineRestoreUpdate(r, old *banlieue.VirtualMachineRestore) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(r.Spec, old.Spec, field.NewPath("spec"))...)
}

// ValidateVirtualMachineRestoreStatusUpdate validates a status write.
func ValidateVirtualMachineRestoreStatusUpdate(r, old *banlieue.VirtualMachineRestore) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&r.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	p := field.NewPath("status")
	allErrs = append(allErrs, validateEnum(r.Status.Phase, restorePhases, false, p.Child("phase"))...)
	allErrs = append(allErrs, validateFreeText(r.Status.Message, false, p.Child("message"))...)
	return append(allErrs, validateConditions(r.Status.Conditions, p.Child("conditions"))...)
}

func validateMaxSnapshots(n *int32, p *field.Path) field.ErrorList {
	if n != nil && (*n < 0 || *n > MaxSnapshotsPerVMBound) {
		return field.ErrorList{field.Invalid(p, *n, "must be between 0 and 64 (what a machine's spec.snapshots holds)")}
	}
	return nil
}
