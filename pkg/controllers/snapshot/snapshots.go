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
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/snapshots"
)

// reconcileSnapshots steps each snapshot of the VM and returns the
// machine's spec.snapshots (the admitted snapshots, oldest first) and the
// writes of the snapshots' statuses and finalizers, which the caller makes
// after the machine's: the backend is asked first, its answer told after.
func (r *Reconciler) reconcileSnapshots(snaps []*v1alpha1.VirtualMachineSnapshot, m *machine, bound snapshots.Bound, noSnapshots string) ([]infrav1.MachineSnapshot, []write) {
	var desired []infrav1.MachineSnapshot
	var writes []write
	for _, s := range snaps {
		base := s.DeepCopy()
		entry, release := stepSnapshot(s, m, bound, noSnapshots, len(desired))
		if entry != nil {
			desired = append(desired, *entry)
		}
		if release {
			writes = append(writes, func(ctx context.Context) error {
				if err := patch.RemoveFinalizer(ctx, patch.Object(r.Client), s, v1alpha1.SnapshotFinalizer); err != nil {
					return fmt.Errorf("releasing snapshot %s: %w", s.Name, err)
				}
				return nil
			})
			continue
		}
		writes = append(writes, func(ctx context.Context) error {
			r.snapshotEvent(base, s)
			if err := r.writeStatus(ctx, base, s); err != nil {
				return fmt.Errorf("recording snapshot %s: %w", s.Name, err)
			}
			return nil
		})
	}
	return desired, writes
}

// stepSnapshot decides one snapshot from the VM's machine: the entry the
// machine's spec.snapshots is to hold for it (nil: none), whether its
// finalizer may go (deleted, and no backend snapshot left to remove), and
// its status. admitted is how many snapshots of the VM were admitted
// before it.
func stepSnapshot(s *v1alpha1.VirtualMachineSnapshot, m *machine, bound snapshots.Bound, noSnapshots string, admitted int) (*infrav1.MachineSnapshot, bool) {
	name := providers.SnapshotName(string(s.UID))
	onMachine := m != nil && s.Status.SourceUID != "" && m.obj.GetUID() == s.Status.SourceUID
	if s.DeletionTimestamp != nil {
		if onMachine && m.snaps.SnapshotStatusOf(name) != nil {
			setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonDeleting, "the provider is removing the backend snapshot")
			return nil, false
		}
		return nil, true
	}
	switch {
	case s.Status.SourceUID != "" && !onMachine:
		current := ""
		if m != nil {
			current = m.ref.Name
		}
		taken := ""
		if s.Status.Machine != nil {
			taken = s.Status.Machine.Name
		}
		s.Status.ReadyToUse = false
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonStale, snapshots.StaleMessage(taken, current))
		return nil, false
	case m == nil:
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonPending, "the VM has no machine yet: it is taken once the VM is built")
		return nil, false
	case noSnapshots != "":
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonUnsupported, noSnapshots)
		return nil, false
	case s.Status.SourceUID == "" && !bound.Allows(admitted):
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonLimitReached, bound.Refusal(s.Spec.VMName, admitted))
		return nil, false
	}
	ref := m.ref
	s.Status.SourceUID, s.Status.Machine, s.Status.BackendName = m.obj.GetUID(), &ref, name
	s.Status.Provider = m.obj.GetAnnotations()[infrastructure.ProviderAnnotation]
	mirrorSnapshot(s, m.snaps.SnapshotStatusOf(name))
	return &infrav1.MachineSnapshot{Name: name, Description: s.Namespace + "/" + s.Name, IncludeMemory: s.Spec.IncludeMemory}, false
}

// mirrorSnapshot copies the provider's report of the snapshot (nil: none
// yet) onto s.
func mirrorSnapshot(s *v1alpha1.VirtualMachineSnapshot, st *infrav1.MachineSnapshotStatus) {
	switch {
	case st == nil:
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonCreating, "asked of the provider")
	case st.Phase == infrav1.SnapshotReady:
		s.Status.ReadyToUse = true
		s.Status.CreationTime, s.Status.BackendRef, s.Status.Memory = st.CreationTime, st.Ref, st.Memory
		setReady(s, metav1.ConditionTrue, v1alpha1.SnapshotReasonReady, "the backend holds snapshot "+st.Name)
	case st.Phase == infrav1.SnapshotFailed:
		s.Status.ReadyToUse = false
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonFailed, st.Message)
	default:
		setReady(s, metav1.ConditionFalse, v1alpha1.SnapshotReasonCreating, "the backend is taking it")
	}
}

func setReady(s *v1alpha1.VirtualMachineSnapshot, status metav1.ConditionStatus, reason, message string) {
	if message == "" {
		message = reason
	}
	meta.SetStatusCondition(&s.Status.Conditions, metav1.Condition{
		Type: v1alpha1.SnapshotReady, Status: status, Reason: reason, Message: message, ObservedGeneration: s.Generation,
	})
}

// snapshotEvent records a change of s's Ready reason worth telling.
func (r *Reconciler) snapshotEvent(before, after *v1alpha1.VirtualMachineSnapshot) {
	was := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.SnapshotReady)
	now := meta.FindStatusCondition(after.Status.Conditions, v1alpha1.SnapshotReady)
	if now == nil || (was != nil && was.Reason == now.Reason) {
		return
	}
	switch now.Reason {
	case v1alpha1.SnapshotReasonReady:
		r.event(after, corev1.EventTypeNormal, "SnapshotReady", "Snapshot", fmt.Sprintf("snapshot of %s taken (%s)", after.Spec.VMName, after.Status.BackendRef))
	case v1alpha1.SnapshotReasonFailed, v1alpha1.SnapshotReasonStale, v1alpha1.SnapshotReasonLimitReached, v1alpha1.SnapshotReasonUnsupported:
		r.event(after, corev1.EventTypeWarning, "Snapshot"+now.Reason, "Snapshot", now.Message)
	}
}
