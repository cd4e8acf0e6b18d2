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

package vmimage

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

func imported() *banlieue.VMImage {
	return &banlieue.VMImage{Spec: banlieue.VMImageSpec{OSVersion: "22.04", Import: &banlieue.ImageImport{
		URL: "https://mirror.example/u.qcow2", Checksum: "sha256:" + strings.Repeat("a", 64), Format: banlieue.ImageFormatQCOW2}}}
}

// TestRevision: what changes the bytes or how they are built changes the
// revision; the rest of the spec does not.
func TestRevision(t *testing.T) {
	base := Revision(&imported().Spec)
	if len(base) != 10 {
		t.Fatalf("revision %q: want 10 hex digits", base)
	}
	if Revision(&banlieue.VMImageSpec{}) != "" {
		t.Error("an image without an import has a revision")
	}
	for name, change := range map[string]func(*banlieue.VMImage){
		"url":      func(i *banlieue.VMImage) { i.Spec.Import.URL += "?v=2" },
		"checksum": func(i *banlieue.VMImage) { i.Spec.Import.Checksum = "sha256:" + strings.Repeat("b", 64) },
		"format":   func(i *banlieue.VMImage) { i.Spec.Import.Format = banlieue.ImageFormatRaw },
		"firmware": func(i *banlieue.VMImage) { i.Spec.Template = &banlieue.ImageTemplate{Firmware: banlieue.FirmwareEFI} },
	} {
		img := imported()
		change(img)
		if Revision(&img.Spec) == base {
			t.Errorf("changing the %s kept the revision", name)
		}
	}
	img := imported()
	img.Spec.OSVersion = "24.04"
	if Revision(&img.Spec) != base {
		t.Error("changing osVersion changed the revision")
	}
}

// TestReadyCondition: the API server computes Ready from what Providers
// report; a Provider cannot set it, nor the revision.
func TestReadyCondition(t *testing.T) {
	s := NewStrategy(nil, nil)
	img := imported()
	s.PrepareForCreate(context.Background(), img)
	if img.Status.Revision == "" || cond(img).Reason != banlieue.ImageReasonPending {
		t.Fatalf("new image: revision %q, Ready %+v", img.Status.Revision, cond(img))
	}
	fd := func(phase banlieue.ImagePhase, rev string) banlieue.ImageFailureDomainStatus {
		return banlieue.ImageFailureDomainStatus{Name: "fd-a", Phase: phase, Revision: rev, Reason: "X", BytesDone: 40, BytesTotal: 100}
	}
	for _, tc := range []struct {
		name   string
		fds    []banlieue.ImageFailureDomainStatus
		ready  bool
		status metav1.ConditionStatus
		reason string
	}{
		{"importing", []banlieue.ImageFailureDomainStatus{fd(banlieue.ImagePhaseImporting, img.Status.Revision)}, false, metav1.ConditionFalse, banlieue.ImageReasonImporting},
		{"failed", []banlieue.ImageFailureDomainStatus{fd(banlieue.ImagePhaseFailed, img.Status.Revision)}, false, metav1.ConditionFalse, banlieue.ImageReasonImportFailed},
		{"ready at an old revision", []banlieue.ImageFailureDomainStatus{fd(banlieue.ImagePhaseReady, "0000000000")}, false, metav1.ConditionFalse, banlieue.ImageReasonImporting},
		{"ready", []banlieue.ImageFailureDomainStatus{fd(banlieue.ImagePhaseReady, img.Status.Revision)}, true, metav1.ConditionTrue, banlieue.ImageReasonReady},
		{"reported ready at the previous revision", []banlieue.ImageFailureDomainStatus{fd(banlieue.ImagePhaseReady, "0000000000")}, true, metav1.ConditionFalse, banlieue.ImageReasonImporting},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next := img.DeepCopy()
			next.Status.Revision = "forged"
			next.Status.Conditions = []metav1.Condition{{Type: banlieue.ImageReady, Status: metav1.ConditionTrue, Reason: "Forged"}}
			// A Provider that is not Ready is not waited for.
			next.Status.PerProvider = []banlieue.ImageProviderStatus{{Provider: "ns/p", Ready: tc.ready, Reason: "R", FailureDomains: tc.fds},
				{Provider: "ns/down", Reason: banlieue.ImageReasonConnectFailed}}
			StatusStrategy{s}.PrepareForUpdate(context.Background(), next, img)
			if next.Status.Revision != img.Status.Revision {
				t.Errorf("a status write changed the revision to %q", next.Status.Revision)
			}
			if c := cond(next); c.Status != tc.status || c.Reason != tc.reason {
				t.Errorf("Ready %s %s (%s), want %s %s", c.Status, c.Reason, c.Message, tc.status, tc.reason)
			}
		})
	}
	// A provider's Deleting condition is kept beside the server's Ready.
	deleting := img.DeepCopy()
	deleting.Status.Conditions = []metav1.Condition{{Type: banlieue.ImageDeleting, Status: metav1.ConditionTrue, Reason: "InUse", Message: "ns/vm-a"}}
	StatusStrategy{s}.PrepareForUpdate(context.Background(), deleting, img)
	if c := meta.FindStatusCondition(deleting.Status.Conditions, banlieue.ImageDeleting); c == nil || c.Message != "ns/vm-a" {
		t.Errorf("a provider's Deleting condition was dropped: %+v", deleting.Status.Conditions)
	}
	if meta.FindStatusCondition(deleting.Status.Conditions, banlieue.ImageReady) == nil {
		t.Errorf("Ready was dropped: %+v", deleting.Status.Conditions)
	}
	// Only Providers that are not Ready: not Ready.
	down := img.DeepCopy()
	down.Status.PerProvider = []banlieue.ImageProviderStatus{{Provider: "ns/down", Reason: banlieue.ImageReasonConnectFailed}}
	StatusStrategy{s}.PrepareForUpdate(context.Background(), down, img)
	if c := cond(down); c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "ns/down") {
		t.Errorf("only an unreachable Provider: Ready %s (%s)", c.Status, c.Message)
	}
	// A spec change names a new revision.
	next := img.DeepCopy()
	next.Spec.Import.Checksum = "sha256:" + strings.Repeat("c", 64)
	s.PrepareForUpdate(context.Background(), next, img)
	if next.Status.Revision == img.Status.Revision || next.Generation != img.Generation+1 {
		t.Errorf("revision %q generation %d after a checksum change", next.Status.Revision, next.Generation)
	}
}

func cond(img *banlieue.VMImage) metav1.Condition {
	for _, c := range img.Status.Conditions {
		if c.Type == banlieue.ImageReady {
			return c
		}
	}
	return metav1.Condition{}
}

// TestFormatRefusedByClass: a class listed in spec.import.providerClasses
// whose backend does not build the format is refused by name; a class no
// backend serves, or none listed, is left to the Providers.
func TestFormatRefusedByClass(t *testing.T) {
	s := NewStrategy(nil, func(class string) ([]string, bool) {
		switch class {
		case "libvirt":
			return []string{"qcow2", "raw", "iso"}, true
		case "vsphere":
			return []string{"qcow2", "raw", "ova"}, true
		}
		return nil, false
	})
	for _, tc := range []struct {
		classes []string
		format  banlieue.ImageFormat
		refused string
	}{
		{[]string{"libvirt"}, banlieue.ImageFormatQCOW2, ""},
		{[]string{"libvirt", "vsphere"}, banlieue.ImageFormatOVA, "provider class libvirt"},
		{[]string{"vsphere"}, banlieue.ImageFormatOVA, ""},
		{[]string{"someone-elses"}, banlieue.ImageFormatOVA, ""},
		{nil, banlieue.ImageFormatOVA, ""},
	} {
		img := imported()
		img.Spec.Import.ProviderClasses, img.Spec.Import.Format = tc.classes, tc.format
		errs := s.validateFormat(img)
		switch {
		case tc.refused == "" && len(errs) > 0:
			t.Errorf("%v %s: refused: %v", tc.classes, tc.format, errs)
		case tc.refused != "" && (len(errs) != 1 || errs[0].Field != "spec.import.format" || !strings.Contains(errs[0].Error(), tc.refused)):
			t.Errorf("%v %s: %v, want one refusal of spec.import.format naming %s", tc.classes, tc.format, errs, tc.refused)
		}
	}
}
