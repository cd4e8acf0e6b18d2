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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/providers"
)

// restartStep is what to do about m's spec.restartRequestID.
type restartStep int

const (
	// restartNothing: none asked, or this one settled.
	restartNothing restartStep = iota
	// restartSend: record Sending, then ask the backend.
	restartSend
	// restartInterrupted: Sending was recorded and never answered (the
	// provider stopped): the reset may have happened; it is not asked
	// again.
	restartInterrupted
	// restartNotRunning: the VM is not running: nothing to reset.
	restartNotRunning
)

// nextRestart decides from the spec's request, the recorded restart and
// the VM's power state.
func nextRestart(want string, rec *infrav1.RestartStatus, power infrav1.PowerState) restartStep {
	switch {
	case want == "":
		return restartNothing
	case rec != nil && rec.ID == want && rec.Phase == infrav1.RestartSending:
		return restartInterrupted
	case rec != nil && rec.ID == want:
		return restartNothing
	case power != infrav1.PowerStatePoweredOn:
		return restartNotRunning
	}
	return restartSend
}

// restart acts once on m's restart request, recording Sending before the
// backend is asked, so that a provider killed in between does not ask
// twice.
func (r *MachineReconciler) restart(ctx context.Context, m infrav1.Machine, backend providers.Backend, spec providers.MachineSpec, power infrav1.PowerState) error {
	want := m.CommonSpec().RestartRequestID
	switch nextRestart(want, m.CommonStatus().Restart, power) {
	case restartNothing:
		return nil
	case restartInterrupted:
		return r.setRestart(ctx, m, want, infrav1.RestartUnknown,
			"the provider stopped while asking the backend for this reset; it is not asked again, as it may have happened")
	case restartNotRunning:
		return r.setRestart(ctx, m, want, infrav1.RestartFailed, fmt.Sprintf("the VM is %s: only a running VM restarts", power))
	}
	restarter, ok := providers.RestarterOf(backend)
	if !ok {
		return r.setRestart(ctx, m, want, infrav1.RestartFailed, fmt.Sprintf("the %s backend cannot reset a VM", r.Class))
	}
	if err := r.setRestart(ctx, m, want, infrav1.RestartSending, ""); err != nil {
		return err
	}
	if err := restarter.RestartMachine(ctx, spec, r.recorder(m)); err != nil {
		r.event(m, corev1.EventTypeWarning, "RestartFailed", "Restart", err.Error())
		return r.setRestart(ctx, m, want, infrav1.RestartFailed, err.Error())
	}
	log.FromContext(ctx).Info("Restarted VM", "vm", spec.Name, "restart", want)
	r.event(m, corev1.EventTypeNormal, "Restarted", "Restart", fmt.Sprintf("VM %s reset (restart %s)", spec.Name, want))
	return r.setRestart(ctx, m, want, infrav1.RestartDone, "")
}

// setRestart records restart id's phase in m's status, conditional on
// the version read: a cache that does not show the last record yet
// (Done) must not be taken for an interrupted send.
func (r *MachineReconciler) setRestart(ctx context.Context, m infrav1.Machine, id string, phase infrav1.RestartPhase, msg string) error {
	base := copyOf(m)
	now := metav1.Now()
	m.CommonStatus().Restart = &infrav1.RestartStatus{ID: id, Phase: phase, Message: msg, Time: &now}
	if err := patch.Status(ctx, r.Client, base, m, true); err != nil {
		return fmt.Errorf("recording restart %s as %s: %w", id, phase, err)
	}
	return nil
}
