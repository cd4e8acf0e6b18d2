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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func TestPinnedClass(t *testing.T) {
	live := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "small", Generation: 3},
		Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 4, MemoryMiB: 4096}}}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm", Namespace: "ns"},
		Spec: v1alpha1.VirtualMachineSpec{ClassRef: v1alpha1.LocalObjectReference{Name: "small"}}}
	if PinnedClass(vm) != nil {
		t.Error("an unplaced VM without a revision has a pinned class")
	}
	old := live.DeepCopy()
	old.Generation, old.Spec.Hardware.CPUs = 2, 2
	vm.Status.ClassRevision = Pin(old)
	if PinnedClass(vm) != nil {
		t.Error("an unplaced VM is pinned: it must follow its class until placed")
	}
	vm.Status.Scheduled = &v1alpha1.ScheduledPlacement{Provider: "p"}
	pinned := PinnedClass(vm)
	if pinned == nil || pinned.Generation != 2 || pinned.Spec.Hardware.CPUs != 2 || pinned.Name != "small" {
		t.Fatalf("pinned %+v", pinned)
	}
	pinned.Spec.Hardware.CPUs = 9
	if vm.Status.ClassRevision.Spec.Hardware.CPUs != 2 {
		t.Error("the pinned class shares memory with the VM's status")
	}
	for _, tc := range []struct {
		name   string
		pinned *v1alpha1.VMClass
		live   *v1alpha1.VMClass
		status metav1.ConditionStatus
		reason string
		msg    string
	}{
		{"same generation", live, live, metav1.ConditionFalse, ReasonClassUpToDate, "generation 3"},
		{"class edited", old, live, metav1.ConditionTrue, ReasonClassChanged, "kubectl annotate vm vm -n ns banlieue.io/update-class=true"},
		{"class deleted", old, nil, metav1.ConditionTrue, ReasonClassDeleted, "keeps generation 2"},
	} {
		status, reason, msg := ClassStatus(vm, tc.pinned, tc.live)
		if status != tc.status || reason != tc.reason || !strings.Contains(msg, tc.msg) {
			t.Errorf("%s: %s %s %q", tc.name, status, reason, msg)
		}
	}
	vm.Annotations = map[string]string{UpdateClassAnnotation: "yes"}
	if WantsClassUpdate(vm) {
		t.Error(`"yes" asked for an update; only "true" does`)
	}
	vm.Annotations[UpdateClassAnnotation] = "true"
	if !WantsClassUpdate(vm) {
		t.Error("the annotation was not seen")
	}
}
