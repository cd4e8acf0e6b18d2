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
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/providers"
)

// restoreStep is what to do about m's spec.restoreRequest.
type restoreStep int

const (
	// restoreNothing: none asked, or this one settled.
	restoreNothing restoreStep = iota
	// restoreSend: record Restoring, then ask the backend.
	restoreSend
	// restoreResume: Restoring was recorded with a backend task: follow it.
	restoreResume
	// restoreInterrupted: Restoring was recorded without a task (the
	// provider stopped while asking): it may have happened and is not
	// asked again.
	restoreInterrupted
)

// nextRestore decides from the spec's request and the recorded restore.
func nextRestore(req *infrav1.RestoreRequest, rec *infrav1.RestoreStatus) restoreStep {
	switch {
	case req == nil:
		return restoreNothing
	case rec == nil || rec.ID != req.ID:
		return restoreSend
	case rec.Phase == infrav1.RestoreRestoring && rec.TaskRef != "":
		return restoreResume
	case rec.Phase == infrav1.RestoreRestoring:
		return restoreInterrupted
	}
	return restoreNothing
}

// restore acts once on m's restore request.
func (r *MachineReconciler) restore(ctx context.Context, m infrav1.Machine, snapper providers.Snapshots, spec providers.MachineSpec, power infrav1.PowerState) error {
	req := m.CommonSpec().RestoreRequest
	rec := infrav1.RestoreStatus{}
	if req != nil {
		rec = infrav1.RestoreStatus{ID: req.ID, Snapshot: req.Snapshot, Phase: infrav1.RestoreRestoring}
	}
	switch nextRestore(req, m.CommonStatus().Restore) {
	case restoreNothing:
		return nil
	case restoreInterrupted:
		rec.Phase, rec.Message = infrav1.RestoreUnknown, "the provider stopped while asking the backend for this revert and has no task to follow; it is not asked again, as it may have happened"
		return r.setRestore(ctx, m, rec)
	case restoreResume:
		rec.TaskRef = m.CommonStatus().Restore.TaskRef
	case restoreSend:
		if s := statusOf(m, req.Snapshot); s == nil || s.Phase != infrav1.SnapshotReady {
			rec.Phase, rec.Message = infrav1.RestoreFailed, fmt.Sprintf("snapshot %s is not taken on this VM", req.Snapshot)
			return r.setRestore(ctx, m, rec)
		}
		rec.Message = revertNote(snapper.SnapshotLimits(), statusOf(m, req.Snapshot).Memory, power)
		if err := r.setRestore(ctx, m, rec); err != nil {
			return err
		}
	}
	err := snapper.RevertSnapshot(ctx, spec, req.Snapshot, rec.TaskRef, r.restoreRecorder(m))
	switch {
	case errors.Is(err, providers.ErrNoSnapshot):
		rec.Phase, rec.Message = infrav1.RestoreFailed, fmt.Sprintf("snapshot %s is gone from the backend", req.Snapshot)
	case err != nil:
		rec.Phase, rec.Message = infrav1.RestoreFailed, err.Error()
	default:
		rec.Phase, rec.Message = infrav1.RestoreDone, "reverted to snapshot "+req.Snapshot
	}
	rec.TaskRef = ""
	if err != nil {
		r.event(m, corev1.EventTypeWarning, "RestoreFailed", "Restore", fmt.Sprintf("reverting to %s: %s", req.Snapshot, rec.Message))
	} else {
		log.FromContext(ctx).Info("Reverted VM", "vm", spec.Name, "snapshot", req.Snapshot, "restore", req.ID)
		r.event(m, corev1.EventTypeNormal, "Restored", "Restore", fmt.Sprintf("VM %s reverted to snapshot %s", spec.Name, req.Snapshot))
	}
	return r.setRestore(ctx, m, rec)
}

// revertNote says what the revert does to a VM in power with a snapshot
// that has memory or not: the backend's rules, told before it happens.
func revertNote(limits providers.SnapshotLimits, memory bool, power infrav1.PowerState) string {
	switch {
	case memory:
		return "the VM resumes where the snapshot left it"
	case power == infrav1.PowerStatePoweredOn && !limits.RevertRunning:
		return "the backend reverts a stopped VM only: it is powered off first, then started again as its spec says"
	case power == infrav1.PowerStatePoweredOn:
		return "the snapshot holds no memory: the VM is stopped on the snapshot's disks, then started again as its spec says"
	}
	return "the VM's disks return to the snapshot's"
}

// setRestore records rec as m's status.restore, conditional on the
// version read (a stale cache must not be taken for a revert not asked).
func (r *MachineReconciler) setRestore(ctx context.Context, m infrav1.Machine, rec infrav1.RestoreStatus) error {
	base := copyOf(m)
	now := metav1.Now()
	rec.Time = &now
	m.CommonStatus().Restore = &rec
	if err := patch.Status(ctx, r.Client, base, m, true); err != nil {
		return fmt.Errorf("recording restore %s as %s: %w", rec.ID, rec.Phase, err)
	}
	return nil
}

// restoreRecorder stores the revert's backend task before it is awaited.
func (r *MachineReconciler) restoreRecorder(m infrav1.Machine) providers.TaskRecorder {
	return func(ctx context.Context, ref string) error {
		cur := m.CommonStatus().Restore
		if cur == nil || cur.TaskRef == ref {
			return nil
		}
		rec := *cur
		rec.TaskRef = ref
		return r.setRestore(ctx, m, rec)
	}
}
