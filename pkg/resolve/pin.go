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

package resolve

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
)

// UpdateClassAnnotation on a VirtualMachine asks for its class to be
// pinned again, as it is now; the controller removes it once done.
const UpdateClassAnnotation = "banlieue.io/update-class"

// Reasons of the ClassOutOfDate condition.
const (
	ReasonClassUpToDate = "UpToDate"
	ReasonClassChanged  = "ClassChanged"
	ReasonClassDeleted  = "ClassDeleted"
)

// PinnedClass is the class vm is built from: its status.classRevision once
// it is placed (nil before, or for a VM placed before classes were pinned:
// then the live class, which the controller pins).
func PinnedClass(vm *v1alpha1.VirtualMachine) *v1alpha1.VMClass {
	rev := vm.Status.ClassRevision
	if rev == nil || vm.Status.Scheduled == nil {
		return nil
	}
	return &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: vm.Spec.ClassRef.Name, Generation: rev.Generation}, Spec: *rev.Spec.DeepCopy()}
}

// Pin is the revision of class to record on a VM.
func Pin(class *v1alpha1.VMClass) *v1alpha1.ClassRevision {
	return &v1alpha1.ClassRevision{Generation: class.Generation, Spec: *class.Spec.DeepCopy()}
}

// ClassStatus says whether the class a placed VM is pinned to (pinned) is
// the class as it is now (live, nil when deleted): the ClassOutOfDate
// condition's status, reason and message.
func ClassStatus(vm *v1alpha1.VirtualMachine, pinned, live *v1alpha1.VMClass) (metav1.ConditionStatus, string, string) {
	switch {
	case live == nil:
		return metav1.ConditionTrue, ReasonClassDeleted, fmt.Sprintf("VMClass %s is gone; the VM keeps generation %d of it", vm.Spec.ClassRef.Name, pinned.Generation)
	case live.Generation != pinned.Generation:
		return metav1.ConditionTrue, ReasonClassChanged, fmt.Sprintf(
			"VMClass %s is at generation %d; the VM runs generation %d until asked: kubectl annotate vm %s -n %s %s=true (see /resolved's current)",
			live.Name, live.Generation, pinned.Generation, vm.Name, vm.Namespace, UpdateClassAnnotation)
	}
	return metav1.ConditionFalse, ReasonClassUpToDate, fmt.Sprintf("the VM runs generation %d of VMClass %s, its latest", pinned.Generation, live.Name)
}

// WantsClassUpdate tells whether vm asks for its class to be pinned again.
func WantsClassUpdate(vm *v1alpha1.VirtualMachine) bool {
	return vm.Annotations[UpdateClassAnnotation] == "true"
}

// ImageRevision is the revision of image's import vm is built from: the
// one it pinned in status.imageRevision once placed, else the image's
// current one (status.revision), which the controller pins. Empty when the
// image has no import or no revision yet.
func ImageRevision(vm *v1alpha1.VirtualMachine, image *v1alpha1.VMImage) string {
	if image == nil || image.Spec.Import == nil {
		return ""
	}
	if vm.Status.Scheduled != nil && vm.Status.ImageRevision != "" {
		return vm.Status.ImageRevision
	}
	return image.Status.Revision
}

// MigrationImageRevision is the revision of image's import a migration
// starting now rebuilds vm from: the image's current one, as for a new VM
// (a recreate carries no disk contents, and a Provider builds only the
// current revision in a failure domain it has not used yet). Empty when
// the image has no import or no revision yet.
func MigrationImageRevision(image *v1alpha1.VMImage) string {
	if image == nil || image.Spec.Import == nil {
		return ""
	}
	return image.Status.Revision
}

// AtImageRevision is resolved built from revision of image's import
// instead of the one it names; resolved itself when revision is empty or
// already the one.
func AtImageRevision(resolved *v1alpha1.ResolvedVirtualMachine, image *v1alpha1.VMImage, revision string) *v1alpha1.ResolvedVirtualMachine {
	if revision == "" || image == nil || image.Spec.Import == nil {
		return resolved
	}
	if cur := resolved.Spec.Image.Imported; cur != nil && cur.Revision == revision {
		return resolved
	}
	out := resolved.DeepCopy()
	out.Spec.Image.Imported = images.ResolvedAt(image, revision)
	return out
}
