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

func TestCheckImage(t *testing.T) {
	class := func(fw v1alpha1.Firmware, tpm bool) *v1alpha1.VMClass {
		return &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Spec: v1alpha1.VMClassSpec{Firmware: fw, TPMEnabled: tpm}}
	}
	image := func(t *v1alpha1.ImageTemplate) *v1alpha1.VMImage {
		return &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "i"}, Spec: v1alpha1.VMImageSpec{Template: t}}
	}
	deferred := &v1alpha1.ImageTemplate{Firmware: "efi", InstallMode: v1alpha1.InstallModeDeferred}
	for _, tc := range []struct {
		name  string
		class *v1alpha1.VMClass
		image *v1alpha1.VMImage
		want  string // "" fits, else part of the reason
	}{
		{"plain", class("bios", false), image(nil), ""},
		{"vTPM, deferred image", class("efi", true), image(deferred), ""},
		{"vTPM, no template (immediate by default)", class("efi", true), image(nil), "installMode deferred (this one is immediate)"},
		{"vTPM, immediate image", class("efi", true), image(&v1alpha1.ImageTemplate{InstallMode: v1alpha1.InstallModeImmediate}), "installMode deferred"},
		{"efi template, efi-secure class", class("efi-secure", false), image(&v1alpha1.ImageTemplate{Firmware: "efi"}), ""},
		{"efi template, bios class", class("bios", false), image(&v1alpha1.ImageTemplate{Firmware: "efi"}), "boots with efi firmware, the class asks for bios"},
		{"bios template, efi-secure class", class("efi-secure", false), image(&v1alpha1.ImageTemplate{Firmware: "bios"}), "the class asks for efi-secure"},
		{"no template firmware", class("efi", false), image(&v1alpha1.ImageTemplate{}), ""},
	} {
		err := CheckImage(tc.class, tc.image)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want a mismatch saying %q", tc.name, err, tc.want)
		}
	}
}
