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

package infrastructure

import (
	"testing"

	"k8s.io/apimachinery/pkg/runtime"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

func TestReadSnapshots(t *testing.T) {
	m := &infrav1.LibvirtMachine{}
	m.Spec.Snapshots = []infrav1.MachineSnapshot{{Name: "banlieue-snap-a", IncludeMemory: true}, {Name: "banlieue-snap-b"}}
	m.Spec.RestoreRequest = &infrav1.RestoreRequest{ID: "r1", Snapshot: "banlieue-snap-a"}
	m.Status.Snapshots = []infrav1.MachineSnapshotStatus{{Name: "banlieue-snap-a", Phase: infrav1.SnapshotReady, Ref: "x"}}
	m.Status.Restore = &infrav1.RestoreStatus{ID: "r1", Snapshot: "banlieue-snap-a", Phase: infrav1.RestoreDone}
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		t.Fatal(err)
	}
	got := ReadSnapshots(u)
	if len(got.Spec) != 2 || !got.Spec[0].IncludeMemory || got.Spec[1].Name != "banlieue-snap-b" {
		t.Errorf("spec.snapshots read as %+v", got.Spec)
	}
	if got.RestoreRequest == nil || got.RestoreRequest.ID != "r1" {
		t.Errorf("spec.restoreRequest read as %+v", got.RestoreRequest)
	}
	if s := got.SnapshotStatusOf("banlieue-snap-a"); s == nil || s.Phase != infrav1.SnapshotReady || s.Ref != "x" {
		t.Errorf("status.snapshots[a] read as %+v", s)
	}
	if got.SnapshotStatusOf("banlieue-snap-b") != nil {
		t.Error("a snapshot the status does not list read as present")
	}
	if got.Restore == nil || got.Restore.Phase != infrav1.RestoreDone {
		t.Errorf("status.restore read as %+v", got.Restore)
	}
	// A field of the wrong shape reads as absent.
	u["spec"].(map[string]interface{})["snapshots"] = "not a list"
	if got := ReadSnapshots(u); got.Spec != nil {
		t.Errorf("a malformed spec.snapshots read as %+v", got.Spec)
	}
}
