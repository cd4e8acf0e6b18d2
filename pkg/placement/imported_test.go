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

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// importedImage is an image served by spec.import, at revision "r2", with
// the given phase (at revision rev) in each failure domain of prod-vsphere.
func importedImage(rev string, phases map[string]v1alpha1.ImagePhase) *v1alpha1.VMImage {
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit", UID: "0b5c1e0e-59b3-4f0e-9d4a-8c1f2a3b4c5d"},
		Spec: v1alpha1.VMImageSpec{Import: &v1alpha1.ImageImport{URL: "https://mirror.example/u.qcow2", Checksum: "sha256:" + strings.Repeat("a", 64), Format: "qcow2"}},
	}
	img.Status.Revision = "r2"
	st := v1alpha1.ImageProviderStatus{Provider: ns + "/prod-vsphere", Reason: "Importing"}
	for _, name := range []string{"fd-a", "fd-b", "fd-c"} {
		if p, ok := phases[name]; ok {
			st.FailureDomains = append(st.FailureDomains, v1alpha1.ImageFailureDomainStatus{Name: name, Phase: p, Revision: rev, Reason: string(p)})
		}
	}
	img.Status.PerProvider = []v1alpha1.ImageProviderStatus{st}
	return img
}

// TestImportedImagePlacesPerFailureDomain: an imported image is ready
// failure domain by failure domain, at the image's current revision, and
// the scheduler places VMs only where it is.
func TestImportedImagePlacesPerFailureDomain(t *testing.T) {
	p := provider("prod-vsphere", "fd-a", "fd-b", "fd-c")
	for _, tc := range []struct {
		name       string
		img        *v1alpha1.VMImage
		wantReason string
		wantFD     string
		wantMsg    string
	}{
		{"only where ready", importedImage("r2", map[string]v1alpha1.ImagePhase{"fd-a": "Importing", "fd-b": "Ready", "fd-c": "Failed"}),
			ReasonScheduled, "fd-b", ""},
		{"ready nowhere", importedImage("r2", map[string]v1alpha1.ImagePhase{"fd-a": "Importing", "fd-b": "Pending"}),
			ReasonImageNotReady, "", "ready in none of its failure domains"},
		{"ready at an older revision only", importedImage("r1", map[string]v1alpha1.ImagePhase{"fd-a": "Ready", "fd-b": "Ready", "fd-c": "Ready"}),
			ReasonImageNotReady, "", "ready in none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := Decide(input(t, seedVM(), seedClass(), tc.img, p))
			if d.Reason != tc.wantReason || !strings.Contains(d.Message, tc.wantMsg) {
				t.Fatalf("decision %s (%s), want %s with %q", d.Reason, d.Message, tc.wantReason, tc.wantMsg)
			}
			if tc.wantFD != "" && d.Scheduled.FailureDomain != tc.wantFD {
				t.Errorf("placed in %s, want %s", d.Scheduled.FailureDomain, tc.wantFD)
			}
		})
	}
	// The failure domains where the image is not ready say why.
	in := input(t, seedVM(), seedClass(), importedImage("r2", map[string]v1alpha1.ImagePhase{"fd-a": "Importing", "fd-b": "Ready"}), p)
	d := Decide(in)
	var msgs []string
	for _, fd := range d.Providers[0].FailureDomains {
		if !fd.Fits {
			msgs = append(msgs, fd.Name+": "+fd.Message)
		}
	}
	if len(msgs) != 2 || !strings.Contains(msgs[0], "Importing") || !strings.Contains(msgs[1], "not imported here yet") {
		t.Errorf("failure domains' reasons %q", msgs)
	}
}
