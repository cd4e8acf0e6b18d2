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
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/providers"
)

// snapshots brings the VM's backend snapshots to m's spec.snapshots and
// acts once on its spec.restoreRequest. Every step is recorded in m's
// status (with its backend task) before it is awaited, each write
// conditional on the version read: a provider that restarts follows the
// recorded task, or finds the snapshot by its name, and never takes a
// second one.
func (r *MachineReconciler) snapshots(ctx context.Context, m infrav1.Machine, backend providers.Backend, spec providers.MachineSpec, power infrav1.PowerState) error {
	cs, st := m.CommonSpec(), m.CommonStatus()
	if len(cs.Snapshots) == 0 && len(st.Snapshots) == 0 && cs.RestoreRequest == nil {
		return nil
	}
	snapper, ok := providers.SnapshotsOf(backend)
	if !ok {
		return r.noSnapshots(ctx, m)
	}
	if err := r.removeSnapshots(ctx, m, snapper, spec); err != nil {
		return err
	}
	if err := r.takeSnapshots(ctx, m, snapper, spec); err != nil {
		return err
	}
	return r.restore(ctx, m, snapper, spec, power)
}

// removeSnapshots removes the snapshots m's status lists that its spec no
// longer does.
func (r *MachineReconciler) removeSnapshots(ctx context.Context, m infrav1.Machine, snapper providers.Snapshots, spec providers.MachineSpec) error {
	for _, s := range slices.Clone(m.CommonStatus().Snapshots) {
		if wanted(m, s.Name) {
			continue
		}
		if s.Phase != infrav1.SnapshotDeleting {
			s.Phase, s.TaskRef = infrav1.SnapshotDeleting, ""
			if err := r.setSnapshot(ctx, m, s); err != nil {
				return err
			}
		}
		if err := snapper.DeleteSnapshot(ctx, spec, s.Name, s.TaskRef, r.snapshotRecorder(m, s.Name)); err != nil {
			r.event(m, corev1.EventTypeWarning, "SnapshotDeleteFailed", "Snapshot", fmt.Sprintf("removing snapshot %s: %v", s.Name, err))
			return fmt.Errorf("removing snapshot %s: %w", s.Name, err)
		}
		log.FromContext(ctx).Info("Removed snapshot", "vm", spec.Name, "snapshot", s.Name)
		if err := r.dropSnapshot(ctx, m, s.Name); err != nil {
			return err
		}
	}
	return nil
}

// takeSnapshots takes the snapshots of m's spec not taken yet, recording
// Creating first.
func (r *MachineReconciler) takeSnapshots(ctx context.Context, m infrav1.Machine, snapper providers.Snapshots, spec providers.MachineSpec) error {
	for _, want := range m.CommonSpec().Snapshots {
		have := statusOf(m, want.Name)
		if have != nil && have.Phase != infrav1.SnapshotCreating {
			continue // Ready or Failed: settled
		}
		resume := ""
		if have == nil {
			if err := r.setSnapshot(ctx, m, infrav1.MachineSnapshotStatus{Name: want.Name, Phase: infrav1.SnapshotCreating}); err != nil {
				return err
			}
		} else {
			resume = have.TaskRef
		}
		info, err := snapper.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: want.Name, Description: want.Description, IncludeMemory: want.IncludeMemory},
			resume, r.snapshotRecorder(m, want.Name))
		if err != nil {
			r.event(m, corev1.EventTypeWarning, "SnapshotFailed", "Snapshot", fmt.Sprintf("taking snapshot %s: %v", want.Name, err))
			if err := r.setSnapshot(ctx, m, infrav1.MachineSnapshotStatus{Name: want.Name, Phase: infrav1.SnapshotFailed, Message: err.Error()}); err != nil {
				return err
			}
			continue
		}
		log.FromContext(ctx).Info("Took snapshot", "vm", spec.Name, "snapshot", want.Name, "ref", info.Ref, "memory", info.Memory)
		r.event(m, corev1.EventTypeNormal, "SnapshotTaken", "Snapshot", fmt.Sprintf("snapshot %s of VM %s taken", want.Name, spec.Name))
		created := metav1.NewTime(info.CreationTime)
		if info.CreationTime.IsZero() {
			created = metav1.Now()
		}
		if err := r.setSnapshot(ctx, m, infrav1.MachineSnapshotStatus{Name: want.Name, Phase: infrav1.SnapshotReady,
			Ref: info.Ref, CreationTime: &created, Memory: info.Memory}); err != nil {
			return err
		}
	}
	return nil
}

// noSnapshots fails every snapshot and restore asked of a backend that
// takes none (the API server refuses them first; this is what a machine
// written by hand gets).
func (r *MachineReconciler) noSnapshots(ctx context.Context, m infrav1.Machine) error {
	why := fmt.Sprintf("the %s backend takes no snapshots", r.Class)
	for _, want := range m.CommonSpec().Snapshots {
		if s := statusOf(m, want.Name); s == nil || s.Phase != infrav1.SnapshotFailed {
			if err := r.setSnapshot(ctx, m, infrav1.MachineSnapshotStatus{Name: want.Name, Phase: infrav1.SnapshotFailed, Message: why}); err != nil {
				return err
			}
		}
	}
	if req := m.CommonSpec().RestoreRequest; req != nil && (m.CommonStatus().Restore == nil || m.CommonStatus().Restore.ID != req.ID) {
		return r.setRestore(ctx, m, infrav1.RestoreStatus{ID: req.ID, Snapshot: req.Snapshot, Phase: infrav1.RestoreFailed, Message: why})
	}
	return nil
}

func wanted(m infrav1.Machine, name string) bool {
	return slices.ContainsFunc(m.CommonSpec().Snapshots, func(s infrav1.MachineSnapshot) bool { return s.Name == name })
}

func statusOf(m infrav1.Machine, name string) *infrav1.MachineSnapshotStatus {
	return infrav1.SnapshotNamed(m.CommonStatus().Snapshots, name)
}

// setSnapshot records s in m's status (replacing the entry of its name),
// conditional on the version read: a cache that does not show the last
// record yet must not be taken for a step not taken.
func (r *MachineReconciler) setSnapshot(ctx context.Context, m infrav1.Machine, s infrav1.MachineSnapshotStatus) error {
	base := copyOf(m)
	st := m.CommonStatus()
	if i := slices.IndexFunc(st.Snapshots, func(e infrav1.MachineSnapshotStatus) bool { return e.Name == s.Name }); i >= 0 {
		st.Snapshots[i] = s
	} else {
		st.Snapshots = append(st.Snapshots, s)
	}
	if err := patch.Status(ctx, r.Client, base, m, true); err != nil {
		return fmt.Errorf("recording snapshot %s as %s: %w", s.Name, s.Phase, err)
	}
	return nil
}

// dropSnapshot removes the entry of name from m's status.
func (r *MachineReconciler) dropSnapshot(ctx context.Context, m infrav1.Machine, name string) error {
	base := copyOf(m)
	st := m.CommonStatus()
	st.Snapshots = slices.DeleteFunc(st.Snapshots, func(e infrav1.MachineSnapshotStatus) bool { return e.Name == name })
	if err := patch.Status(ctx, r.Client, base, m, true); err != nil {
		return fmt.Errorf("forgetting removed snapshot %s: %w", name, err)
	}
	return nil
}

// snapshotRecorder stores the backend task of snapshot name's step in its
// status entry before it is awaited.
func (r *MachineReconciler) snapshotRecorder(m infrav1.Machine, name string) providers.TaskRecorder {
	return func(ctx context.Context, ref string) error {
		s := statusOf(m, name)
		if s == nil || s.TaskRef == ref {
			return nil
		}
		rec := *s
		rec.TaskRef = ref
		return r.setSnapshot(ctx, m, rec)
	}
}
