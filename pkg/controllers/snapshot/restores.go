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
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/snapshots"
)

// reconcileRestores steps the VM's unsettled restores, oldest first, one
// at a time, and returns the machine's spec.restoreRequest (nil once the
// oldest is settled and no other waits) and the writes of their statuses,
// which the caller makes after the machine's.
func (r *Reconciler) reconcileRestores(vm *v1alpha1.VirtualMachine, restores []*v1alpha1.VirtualMachineRestore, snaps []*v1alpha1.VirtualMachineSnapshot, m *machine) (*infrav1.RestoreRequest, []write) {
	byName := map[string]*v1alpha1.VirtualMachineSnapshot{}
	for _, s := range snaps {
		byName[s.Name] = s
	}
	var request *infrav1.RestoreRequest
	var writes []write
	active := ""
	for _, rs := range restores {
		if settled(rs.Status.Phase) {
			continue
		}
		base := rs.DeepCopy()
		if active != "" {
			setRestore(rs, v1alpha1.RestorePending, fmt.Sprintf("waiting for restore %s of the same VM", active))
		} else {
			active = rs.Name
			request = stepRestore(rs, byName[rs.Spec.SnapshotName], m, metav1.Now())
		}
		writes = append(writes, func(ctx context.Context) error {
			r.restoreEvent(vm, base, rs)
			if err := r.writeStatus(ctx, base, rs); err != nil {
				return fmt.Errorf("recording restore %s: %w", rs.Name, err)
			}
			return nil
		})
		if settled(rs.Status.Phase) {
			// The next one may go now, in this same pass.
			active, request = "", nil
		}
	}
	return request, writes
}

func settled(p v1alpha1.RestorePhase) bool {
	return p == v1alpha1.RestoreDone || p == v1alpha1.RestoreFailed || p == v1alpha1.RestoreUnknown
}

// stepRestore decides the VM's active restore from its snapshot (nil:
// gone) and the VM's machine: the restoreRequest the machine is to hold
// for it (nil once settled or while it cannot be asked), and its status.
func stepRestore(rs *v1alpha1.VirtualMachineRestore, snap *v1alpha1.VirtualMachineSnapshot, m *machine, now metav1.Time) *infrav1.RestoreRequest {
	if why := unusable(snap, rs.Spec.SnapshotName); why != "" {
		setRestore(rs, v1alpha1.RestoreFailed, why)
		return nil
	}
	if m == nil {
		setRestore(rs, v1alpha1.RestorePending, "the VM has no machine to restore")
		return nil
	}
	id := string(rs.UID)
	if rs.Status.StartTime == nil {
		rs.Status.StartTime = &now
	}
	st := m.snaps.Restore
	if st == nil || st.ID != id {
		setRestore(rs, v1alpha1.RestorePending, "asked of the provider")
		return &infrav1.RestoreRequest{ID: id, Snapshot: snap.Status.BackendName}
	}
	phase := v1alpha1.RestorePhase(st.Phase)
	setRestore(rs, phase, st.Message)
	if phase == v1alpha1.RestoreDone && rs.Status.RestoreTime == nil {
		rs.Status.RestoreTime = &now
		if st.Time != nil {
			rs.Status.RestoreTime = st.Time
		}
	}
	if settled(phase) {
		return nil
	}
	return &infrav1.RestoreRequest{ID: id, Snapshot: snap.Status.BackendName}
}

// unusable says why snap cannot be restored ("" when it can).
func unusable(snap *v1alpha1.VirtualMachineSnapshot, name string) string {
	if snap == nil {
		return fmt.Sprintf("VirtualMachineSnapshot %s does not exist (deleted?)", name)
	}
	u := snapshots.Usability{Deleting: snap.DeletionTimestamp != nil, ReadyToUse: snap.Status.ReadyToUse && snap.Status.BackendName != ""}
	if c := meta.FindStatusCondition(snap.Status.Conditions, v1alpha1.SnapshotReady); c != nil {
		u.ReadyReason, u.ReadyMessage = c.Reason, c.Message
	}
	if why := u.Unusable(); why != "" {
		return fmt.Sprintf("VirtualMachineSnapshot %s: %s", name, why)
	}
	return ""
}

func setRestore(rs *v1alpha1.VirtualMachineRestore, phase v1alpha1.RestorePhase, message string) {
	rs.Status.Phase, rs.Status.Message = phase, message
	status := metav1.ConditionFalse
	if phase == v1alpha1.RestoreDone {
		status = metav1.ConditionTrue
	}
	if message == "" {
		message = string(phase)
	}
	meta.SetStatusCondition(&rs.Status.Conditions, metav1.Condition{
		Type: v1alpha1.RestoreComplete, Status: status, Reason: string(phase), Message: message, ObservedGeneration: rs.Generation,
	})
}

// restoreEvent tells a restore's phase change, on the restore and, once
// settled, on its VM.
func (r *Reconciler) restoreEvent(vm *v1alpha1.VirtualMachine, before, after *v1alpha1.VirtualMachineRestore) {
	if before.Status.Phase == after.Status.Phase {
		return
	}
	msg := fmt.Sprintf("restore %s of %s to snapshot %s: %s", after.Name, after.Spec.VMName, after.Spec.SnapshotName, after.Status.Phase)
	if after.Status.Message != "" {
		msg += ": " + after.Status.Message
	}
	switch after.Status.Phase {
	case v1alpha1.RestoreDone:
		r.event(after, corev1.EventTypeNormal, "Restored", "Restore", msg)
		if vm.UID != "" {
			r.event(vm, corev1.EventTypeNormal, "Restored", "Restore", msg)
		}
	case v1alpha1.RestoreFailed, v1alpha1.RestoreUnknown:
		r.event(after, corev1.EventTypeWarning, "Restore"+string(after.Status.Phase), "Restore", msg)
		if vm.UID != "" {
			r.event(vm, corev1.EventTypeWarning, "Restore"+string(after.Status.Phase), "Restore", msg)
		}
	case v1alpha1.RestorePoweringOff, v1alpha1.RestoreRestoring:
		r.event(after, corev1.EventTypeNormal, string(after.Status.Phase), "Restore", msg)
	}
}
