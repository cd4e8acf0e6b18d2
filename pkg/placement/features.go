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

package placement

import "github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"

// EFISecureBootFeature is the Provider feature firmware efi-secure needs.
const EFISecureBootFeature = "efiSecureBoot"

// FirmwareFeature is the Provider feature a firmware needs ("" for none):
// secure boot is a backend's (and its hosts') to offer, so a Provider that
// does not advertise it gets no efi-secure VM, neither from the scheduler
// (checkProvider) nor written by hand (the provider's admission). This is
// the one rule both use.
func FirmwareFeature(firmware string) string {
	if firmware == string(v1alpha1.FirmwareEFISecure) {
		return EFISecureBootFeature
	}
	return ""
}
