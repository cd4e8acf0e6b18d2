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
	"strings"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// MismatchError says a VMImage cannot serve a VMClass (ImageClassMismatch).
type MismatchError struct {
	Class, Image, Why string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("VMImage %s cannot serve VMClass %s: %s", e.Image, e.Class, e.Why)
}

// CheckImage applies the rules that tie an image to a class:
//   - a class with tpmEnabled needs an image whose template.installMode is
//     deferred: an image installed once into its template (immediate, the
//     default) was sealed to no TPM, and a vTPM attached to each clone has
//     nothing to seal against;
//   - an image whose template declares a firmware boots only with that
//     firmware's family: bios, or efi (efi and efi-secure).
//
// nil means they fit. The scheduler and /placement both apply it.
func CheckImage(class *v1alpha1.VMClass, image *v1alpha1.VMImage) *MismatchError {
	mode := v1alpha1.InstallModeImmediate
	var firmware v1alpha1.Firmware
	if t := image.Spec.Template; t != nil {
		if t.InstallMode != "" {
			mode = t.InstallMode
		}
		firmware = t.Firmware
	}
	if class.Spec.TPMEnabled && mode != v1alpha1.InstallModeDeferred {
		return &MismatchError{Class: class.Name, Image: image.Name,
			Why: fmt.Sprintf("the class has tpmEnabled, which needs an image with template.installMode deferred (this one is %s)", mode)}
	}
	want := class.Spec.Firmware
	if firmware != "" && want != "" && family(firmware) != family(want) {
		return &MismatchError{Class: class.Name, Image: image.Name,
			Why: fmt.Sprintf("the image's template boots with %s firmware, the class asks for %s", firmware, want)}
	}
	return nil
}

func family(f v1alpha1.Firmware) string {
	if strings.HasPrefix(string(f), "efi") {
		return "efi"
	}
	return string(f)
}
