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

package snapshots

import (
	"testing"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func TestUnusable(t *testing.T) {
	ready := Usability{ReadyReason: v1alpha1.SnapshotReasonReady, ReadyToUse: true, Machine: "m1", Current: "m1"}
	with := func(f func(*Usability)) Usability { u := ready; f(&u); return u }
	for _, tc := range []struct {
		name string
		u    Usability
		want string
	}{
		{"ready", ready, ""},
		{"ready, the VM's machine unknown", with(func(u *Usability) { u.Current = "" }), ""},
		{"being deleted", with(func(u *Usability) { u.Deleting = true }), "it is being deleted"},
		{"stale by its condition", with(func(u *Usability) {
			u.ReadyReason, u.ReadyMessage, u.ReadyToUse = v1alpha1.SnapshotReasonStale, "taken of machine m0", false
		}), "it is Stale: taken of machine m0"},
		{"stale before the controller says so", with(func(u *Usability) { u.Current = "m2" }),
			"it is Stale: " + StaleMessage("m1", "m2")},
		{"not taken yet", Usability{}, "it is not ready to use (not taken yet)"},
		{"creating", Usability{ReadyReason: v1alpha1.SnapshotReasonCreating}, "it is not ready to use (Creating)"},
		{"failed", Usability{ReadyReason: v1alpha1.SnapshotReasonFailed, ReadyMessage: "disk busy"}, "it is not ready to use (Failed: disk busy)"},
	} {
		if got := tc.u.Unusable(); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// The internal version's reason is the one Unusable compares with.
	if banlieue.SnapshotReasonStale != v1alpha1.SnapshotReasonStale {
		t.Errorf("the Stale reasons differ: %q and %q", banlieue.SnapshotReasonStale, v1alpha1.SnapshotReasonStale)
	}
}
