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
	"testing"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestNextRestore(t *testing.T) {
	req := &infrav1.RestoreRequest{ID: "r2", Snapshot: "s"}
	for _, tc := range []struct {
		name string
		req  *infrav1.RestoreRequest
		rec  *infrav1.RestoreStatus
		want restoreStep
	}{
		{"none asked", nil, nil, restoreNothing},
		{"new", req, nil, restoreSend},
		{"new after an older one", req, &infrav1.RestoreStatus{ID: "r1", Phase: infrav1.RestoreDone}, restoreSend},
		{"recorded with its task: follow it", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreRestoring, TaskRef: "UPID:1"}, restoreResume},
		{"recorded without a task: never asked twice", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreRestoring}, restoreInterrupted},
		{"done", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreDone}, restoreNothing},
		{"failed", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreFailed}, restoreNothing},
		{"unknown", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreUnknown}, restoreNothing},
	} {
		if got := nextRestore(tc.req, tc.rec); got != tc.want {
			t.Errorf("%s: nextRestore = %d, want %d", tc.name, got, tc.want)
		}
	}
}

func TestSnapshotStatus(t *testing.T) {
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p"}}
	if got := snapshotStatus(p, nil); got != nil {
		t.Errorf("a backend without snapshots publishes %+v", got)
	}
	vsphere := &providers.SnapshotLimits{MaxPerVM: 32, Memory: true}
	got := snapshotStatus(p, vsphere)
	if got == nil || ptr.Deref(got.MaxPerVM, 0) != 32 || ptr.Deref(got.BackendMaxPerVM, 0) != 32 || !got.Memory {
		t.Errorf("vSphere, no Provider bound: %+v", got)
	}
	p.Spec.Capabilities.MaxSnapshotsPerVM = ptr.To[int32](3)
	if got := snapshotStatus(p, vsphere); ptr.Deref(got.MaxPerVM, 0) != 3 || ptr.Deref(got.BackendMaxPerVM, 0) != 32 {
		t.Errorf("vSphere, Provider bound 3: %+v", got)
	}
	p.Spec.Capabilities.MaxSnapshotsPerVM = nil
	if got := snapshotStatus(p, &providers.SnapshotLimits{Memory: true}); got.MaxPerVM != nil || got.BackendMaxPerVM != nil {
		t.Errorf("no bound anywhere: %+v", got)
	}
}
