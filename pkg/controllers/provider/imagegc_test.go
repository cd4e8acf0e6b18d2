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

package provider

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestUnusedRevisions: a revision a place may still hold is removed once
// no machine names it; the current one never is.
func TestUnusedRevisions(t *testing.T) {
	inUse := map[string][]string{"aaaa": {"ns/vm-a"}, "cccc": {"ns/vm-c"}}
	for _, tc := range []struct {
		name         string
		previous     []string
		current      string
		remove, keep []string
	}{
		{"nothing before", nil, "dddd", nil, nil},
		{"moved from an unused revision", []string{"bbbb"}, "dddd", []string{"bbbb"}, nil},
		{"moved from a used revision", []string{"aaaa"}, "dddd", nil, []string{"aaaa"}},
		{"used, unused and repeated", []string{"cccc", "bbbb", "aaaa", "bbbb", ""}, "dddd", []string{"bbbb"}, []string{"aaaa", "cccc"}},
		{"back to a previous revision", []string{"bbbb", "dddd"}, "dddd", []string{"bbbb"}, nil},
		{"the current one in use", []string{"aaaa"}, "aaaa", nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remove, keep := unusedRevisions(tc.previous, tc.current, inUse)
			if !slices.Equal(remove, tc.remove) || !slices.Equal(keep, tc.keep) {
				t.Errorf("remove %v keep %v, want %v %v", remove, keep, tc.remove, tc.keep)
			}
		})
	}
}

// TestArtifactsFinalizer: one valid finalizer per Provider, naming it back.
func TestArtifactsFinalizer(t *testing.T) {
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "libvirt-1"}}
	f := ArtifactsFinalizer(p)
	if errs := validation.IsQualifiedName(f); len(errs) > 0 {
		t.Fatalf("%q: %v", f, errs)
	}
	long := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: string(make63('n')), Name: string(make63('p'))}}
	if errs := validation.IsQualifiedName(ArtifactsFinalizer(long)); len(errs) > 0 {
		t.Errorf("longest names: %v", errs)
	}
	for _, tc := range []struct {
		f        string
		ns, name string
		ok       bool
	}{
		{f, "tenant-a", "libvirt-1", true},
		{"banlieue.io/provider-protection", "", "", false},
		{"x.y.z." + artifactsFinalizerSuffix, "", "", false},
		{"." + artifactsFinalizerSuffix, "", "", false},
	} {
		ns, name, ok := providerOfFinalizer(tc.f)
		if ns != tc.ns || name != tc.name || ok != tc.ok {
			t.Errorf("providerOfFinalizer(%q) = %q %q %v", tc.f, ns, name, ok)
		}
	}
}

func make63(c byte) []byte {
	b := make([]byte, 63)
	for i := range b {
		b[i] = c
	}
	return b
}

// TestImageUseIn: a revision is held in a place by the machines there
// and by those whose place is unknown, not by machines elsewhere.
func TestImageUseIn(t *testing.T) {
	use := imageUse{
		"aaaa": {{machine: "ns/vm-1", place: "pve1"}},
		"bbbb": {{machine: "ns/vm-2", place: "pve2"}, {machine: "ns/vm-3", place: ""}},
		"cccc": {{machine: "ns/vm-4", place: "pve2"}, {machine: "ns/vm-1", place: "pve1"}},
	}
	for _, tc := range []struct {
		place string
		want  map[string][]string
	}{
		{"pve1", map[string][]string{"aaaa": {"ns/vm-1"}, "bbbb": {"ns/vm-3"}, "cccc": {"ns/vm-1"}}},
		{"pve2", map[string][]string{"bbbb": {"ns/vm-2", "ns/vm-3"}, "cccc": {"ns/vm-4"}}},
		{"pve3", map[string][]string{"bbbb": {"ns/vm-3"}}},
	} {
		got := use.in(tc.place)
		if len(got) != len(tc.want) {
			t.Errorf("in(%s) = %v, want %v", tc.place, got, tc.want)
			continue
		}
		for rev, ms := range tc.want {
			if !slices.Equal(got[rev], ms) {
				t.Errorf("in(%s)[%s] = %v, want %v", tc.place, rev, got[rev], ms)
			}
		}
		// The old revision of the machine in pve1 is removed from pve3.
		remove, _ := unusedRevisions([]string{"aaaa"}, "dddd", got)
		if wantRemoved := tc.place != "pve1"; wantRemoved != slices.Equal(remove, []string{"aaaa"}) {
			t.Errorf("in %s: remove %v of [aaaa] used in pve1 only", tc.place, remove)
		}
	}
	if got, want := use.machines(), []string{"ns/vm-1", "ns/vm-2", "ns/vm-3", "ns/vm-4"}; !slices.Equal(got, want) {
		t.Errorf("machines() = %v, want %v", got, want)
	}
}

// TestBuiltAnything: a Provider whose failure domains show nothing built,
// nothing in flight and no revision kept holds nothing on delete.
func TestBuiltAnything(t *testing.T) {
	img := func(fds ...v1alpha1.ImageFailureDomainStatus) *v1alpha1.VMImage {
		return &v1alpha1.VMImage{Status: v1alpha1.VMImageStatus{PerProvider: []v1alpha1.ImageProviderStatus{
			{Provider: "ns/other", FailureDomains: []v1alpha1.ImageFailureDomainStatus{{Name: "x", Phase: v1alpha1.ImagePhaseReady, Ref: "r"}}},
			{Provider: "ns/p", FailureDomains: fds}}}}
	}
	for _, tc := range []struct {
		name string
		img  *v1alpha1.VMImage
		want bool
	}{
		{"never reported", &v1alpha1.VMImage{}, false},
		{"no failure domains (not Ready)", img(), false},
		{"pending", img(v1alpha1.ImageFailureDomainStatus{Name: "a", Phase: v1alpha1.ImagePhasePending}), false},
		{"failed, nothing left", img(v1alpha1.ImageFailureDomainStatus{Name: "a", Phase: v1alpha1.ImagePhaseFailed, Reason: v1alpha1.ImageReasonChecksumMismatch}), false},
		{"importing", img(v1alpha1.ImageFailureDomainStatus{Name: "a", Phase: v1alpha1.ImagePhaseImporting}), true},
		{"installing", img(v1alpha1.ImageFailureDomainStatus{Name: "a", Phase: v1alpha1.ImagePhaseInstalling}), true},
		{"ready", img(v1alpha1.ImageFailureDomainStatus{Name: "a", Phase: v1alpha1.ImagePhaseReady, Ref: "tmpl"}), true},
		{"failed over a kept revision", img(v1alpha1.ImageFailureDomainStatus{Name: "a", Phase: v1alpha1.ImagePhaseFailed, PreviousRevisions: []string{"r1"}}), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := builtAnything(tc.img, "ns/p"); got != tc.want {
				t.Errorf("builtAnything = %v, want %v", got, tc.want)
			}
		})
	}
}
