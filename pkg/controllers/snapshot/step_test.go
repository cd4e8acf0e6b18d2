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

package snapshot

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/snapshots"
)

const snapUID = "0f8e7c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b"

func aMachine(uid string, status ...infrav1.MachineSnapshotStatus) *machine {
	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "vm-a", UID: types.UID(uid)}}
	return &machine{obj: m, ref: v1alpha1.InfrastructureReference{Kind: "LibvirtMachine", Name: "vm-a"},
		snaps: infrastructure.MachineSnapshots{Status: status}}
}

func TestStepSnapshot(t *testing.T) {
	name := providers.SnapshotName(snapUID)
	now := metav1.Now()
	taken := func(s *v1alpha1.VirtualMachineSnapshot) *v1alpha1.VirtualMachineSnapshot {
		s.Status.SourceUID = "m1"
		s.Status.Machine = &v1alpha1.InfrastructureReference{Name: "vm-old"}
		return s
	}
	deleting := func(s *v1alpha1.VirtualMachineSnapshot) *v1alpha1.VirtualMachineSnapshot {
		s.DeletionTimestamp = &now
		return s
	}
	bounded := snapshots.Bound{Bounded: true, Max: 1, Why: "Provider p's spec.capabilities.maxSnapshotsPerVM"}
	for _, tc := range []struct {
		name        string
		snap        *v1alpha1.VirtualMachineSnapshot
		m           *machine
		bound       snapshots.Bound
		noSnapshots string
		admitted    int
		inSpec      bool
		release     bool
		reason      string
		ready       bool
	}{
		{name: "no machine yet", snap: snap(), reason: v1alpha1.SnapshotReasonPending},
		{name: "asked", snap: snap(), m: aMachine("m1"), inSpec: true, reason: v1alpha1.SnapshotReasonCreating},
		{name: "taken", snap: snap(), m: aMachine("m1", infrav1.MachineSnapshotStatus{Name: name, Phase: infrav1.SnapshotReady, Ref: "r"}), inSpec: true, reason: v1alpha1.SnapshotReasonReady, ready: true},
		{name: "failed", snap: snap(), m: aMachine("m1", infrav1.MachineSnapshotStatus{Name: name, Phase: infrav1.SnapshotFailed, Message: "no"}), inSpec: true, reason: v1alpha1.SnapshotReasonFailed},
		{name: "beyond the bound", snap: snap(), m: aMachine("m1"), bound: bounded, admitted: 1, reason: v1alpha1.SnapshotReasonLimitReached},
		{name: "admitted before the bound counts on", snap: taken(snap()), m: aMachine("m1"), bound: bounded, admitted: 1, inSpec: true, reason: v1alpha1.SnapshotReasonCreating},
		{name: "backend takes none", snap: snap(), m: aMachine("m1"), noSnapshots: "none here", reason: v1alpha1.SnapshotReasonUnsupported},
		{name: "VM recreated: stale", snap: taken(snap()), m: aMachine("m2"), reason: v1alpha1.SnapshotReasonStale},
		{name: "VM gone: stale", snap: taken(snap()), reason: v1alpha1.SnapshotReasonStale},
		{name: "deleted, backend still has it", snap: deleting(taken(snap())), m: aMachine("m1", infrav1.MachineSnapshotStatus{Name: name, Phase: infrav1.SnapshotReady}), reason: v1alpha1.SnapshotReasonDeleting},
		{name: "deleted, backend removed it", snap: deleting(taken(snap())), m: aMachine("m1"), release: true},
		{name: "deleted, machine recreated", snap: deleting(taken(snap())), m: aMachine("m2", infrav1.MachineSnapshotStatus{Name: name, Phase: infrav1.SnapshotReady}), release: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			entry, release := stepSnapshot(tc.snap, tc.m, tc.bound, tc.noSnapshots, tc.admitted)
			if (entry != nil) != tc.inSpec || release != tc.release {
				t.Fatalf("entry %+v release %v, want in spec %v release %v", entry, release, tc.inSpec, tc.release)
			}
			if entry != nil && entry.Name != name {
				t.Errorf("spec entry named %q, want %q", entry.Name, name)
			}
			if tc.release {
				return
			}
			c := meta.FindStatusCondition(tc.snap.Status.Conditions, v1alpha1.SnapshotReady)
			if c == nil || c.Reason != tc.reason || tc.snap.Status.ReadyToUse != tc.ready {
				t.Errorf("Ready %+v readyToUse %v, want reason %s, readyToUse %v", c, tc.snap.Status.ReadyToUse, tc.reason, tc.ready)
			}
		})
	}
}

func snap() *v1alpha1.VirtualMachineSnapshot {
	return &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "s", Namespace: "ns", UID: snapUID},
		Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: "vm"}}
}

func TestStepRestore(t *testing.T) {
	readySnap := snap()
	readySnap.Status = v1alpha1.VirtualMachineSnapshotStatus{ReadyToUse: true, BackendName: "banlieue-snap-x"}
	stale := snap()
	meta.SetStatusCondition(&stale.Status.Conditions, metav1.Condition{Type: v1alpha1.SnapshotReady, Status: metav1.ConditionFalse, Reason: v1alpha1.SnapshotReasonStale, Message: "recreated"})
	withRestore := func(phase infrav1.RestorePhase) *machine {
		m := aMachine("m1")
		m.snaps.Restore = &infrav1.RestoreStatus{ID: "r1", Snapshot: "banlieue-snap-x", Phase: phase}
		return m
	}
	for _, tc := range []struct {
		name    string
		snap    *v1alpha1.VirtualMachineSnapshot
		m       *machine
		request bool
		phase   v1alpha1.RestorePhase
	}{
		{name: "snapshot gone", m: aMachine("m1"), phase: v1alpha1.RestoreFailed},
		{name: "snapshot stale", snap: stale, m: aMachine("m1"), phase: v1alpha1.RestoreFailed},
		{name: "snapshot not ready", snap: snap(), m: aMachine("m1"), phase: v1alpha1.RestoreFailed},
		{name: "no machine", snap: readySnap, phase: v1alpha1.RestorePending},
		{name: "asked", snap: readySnap, m: aMachine("m1"), request: true, phase: v1alpha1.RestorePending},
		{name: "restoring", snap: readySnap, m: withRestore(infrav1.RestoreRestoring), request: true, phase: v1alpha1.RestoreRestoring},
		{name: "done: request cleared", snap: readySnap, m: withRestore(infrav1.RestoreDone), phase: v1alpha1.RestoreDone},
		{name: "unknown: request cleared", snap: readySnap, m: withRestore(infrav1.RestoreUnknown), phase: v1alpha1.RestoreUnknown},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rs := &v1alpha1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "r1"}, Spec: v1alpha1.VirtualMachineRestoreSpec{VMName: "vm", SnapshotName: "s"}}
			req := stepRestore(rs, tc.snap, tc.m, metav1.Now())
			if (req != nil) != tc.request || rs.Status.Phase != tc.phase {
				t.Fatalf("request %+v phase %s (%s), want request %v phase %s", req, rs.Status.Phase, rs.Status.Message, tc.request, tc.phase)
			}
			if req != nil && (req.ID != "r1" || req.Snapshot != "banlieue-snap-x") {
				t.Errorf("request %+v, want r1 to banlieue-snap-x", req)
			}
			c := meta.FindStatusCondition(rs.Status.Conditions, v1alpha1.RestoreComplete)
			if c == nil || (c.Status == metav1.ConditionTrue) != (tc.phase == v1alpha1.RestoreDone) {
				t.Errorf("Complete %+v for phase %s", c, tc.phase)
			}
		})
	}
}
