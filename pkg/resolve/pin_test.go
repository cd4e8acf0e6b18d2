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

// TestImageRevision: a VM follows its image's revision until placed, then
// keeps the one it pinned; the resolved spec names what was built of it.
func TestImageRevision(t *testing.T) {
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian", UID: "0f3c2a9e-51d4-4b7a-9c1e-2d8f6a0b1c3d"},
		Spec:   v1alpha1.VMImageSpec{Import: &v1alpha1.ImageImport{URL: "http://m/d.qcow2", Format: v1alpha1.ImageFormatQCOW2}},
		Status: v1alpha1.VMImageStatus{Revision: "bbbbbbbbbb"}}
	sourced := img.DeepCopy()
	sourced.Spec.Import = nil
	unnamed := img.DeepCopy()
	unnamed.Status.Revision = ""
	placed := &v1alpha1.ScheduledPlacement{Provider: "p"}
	for _, tc := range []struct {
		name      string
		scheduled *v1alpha1.ScheduledPlacement
		pinned    string
		image     *v1alpha1.VMImage
		want      string
	}{
		{"unplaced follows the image", nil, "", img, "bbbbbbbbbb"},
		{"unplaced with an old pin follows the image", nil, "aaaaaaaaaa", img, "bbbbbbbbbb"},
		{"placed keeps its pin", placed, "aaaaaaaaaa", img, "aaaaaaaaaa"},
		{"placed at the current revision", placed, "bbbbbbbbbb", img, "bbbbbbbbbb"},
		{"placed before pinning: the current one, to pin", placed, "", img, "bbbbbbbbbb"},
		{"no import", placed, "aaaaaaaaaa", sourced, ""},
		{"no revision named yet", nil, "", unnamed, ""},
		{"no image", nil, "", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			vm := &v1alpha1.VirtualMachine{Status: v1alpha1.VirtualMachineStatus{Scheduled: tc.scheduled, ImageRevision: tc.pinned}}
			if got := ImageRevision(vm, tc.image); got != tc.want {
				t.Errorf("ImageRevision = %q, want %q", got, tc.want)
			}
		})
	}
	vm := &v1alpha1.VirtualMachine{Status: v1alpha1.VirtualMachineStatus{Scheduled: placed, ImageRevision: "aaaaaaaaaa"}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512}}}
	r, err := Resolve(vm, class, img)
	if err != nil {
		t.Fatal(err)
	}
	if im := r.Spec.Image.Imported; im == nil || im.Revision != "aaaaaaaaaa" || im.Name != "banlieue-img-0f3c2a9e51d4-aaaaaaaaaa" {
		t.Errorf("resolved import %+v, want the pinned revision's", im)
	}
}

func TestMigrationImageRevision(t *testing.T) {
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian", UID: "0f3c2a9e-51d4-4b7a-9c1e-2d8f6a0b1c3d"},
		Spec:   v1alpha1.VMImageSpec{Import: &v1alpha1.ImageImport{URL: "http://m/d.qcow2", Format: v1alpha1.ImageFormatQCOW2}},
		Status: v1alpha1.VMImageStatus{Revision: "bbbbbbbbbb"}}
	sourced := img.DeepCopy()
	sourced.Spec.Import = nil
	if got := MigrationImageRevision(img); got != "bbbbbbbbbb" {
		t.Errorf("MigrationImageRevision = %q, want the image's current revision", got)
	}
	if got := MigrationImageRevision(sourced); got != "" {
		t.Errorf("MigrationImageRevision of an image without import = %q, want none", got)
	}

	// A VM pinned to an older revision is rebuilt at the migration's.
	vm := &v1alpha1.VirtualMachine{Status: v1alpha1.VirtualMachineStatus{Scheduled: &v1alpha1.ScheduledPlacement{Provider: "p"}, ImageRevision: "aaaaaaaaaa"}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "small"}, Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512}}}
	pinned, err := Resolve(vm, class, img)
	if err != nil {
		t.Fatal(err)
	}
	moved := AtImageRevision(pinned, img, MigrationImageRevision(img))
	if im := moved.Spec.Image.Imported; im == nil || im.Revision != "bbbbbbbbbb" || im.Name != "banlieue-img-0f3c2a9e51d4-bbbbbbbbbb" {
		t.Errorf("migrated import %+v, want the current revision's", im)
	}
	if im := pinned.Spec.Image.Imported; im.Revision != "aaaaaaaaaa" {
		t.Errorf("AtImageRevision changed its input: %+v", im)
	}
	if got := AtImageRevision(pinned, img, ""); got != pinned {
		t.Error("AtImageRevision with no revision (a migration started before it was recorded) is not the pinned resolve")
	}
	if got := AtImageRevision(pinned, img, "aaaaaaaaaa"); got != pinned {
		t.Error("AtImageRevision at the pinned revision copied it")
	}
}
