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

package libvirt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	eventsv1 "k8s.io/api/events/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// TestRestartThroughTheAPI (issue 34): POST virtualmachines/NAME/restart
// resets the real guest once: it boots again (its serial log shows a
// second BANLIEUE-READY), the VM's status.restart goes Pending → Done with
// an Event; the same requestID again answers the same record and resets
// nothing; another restart while one is pending is refused; a VM asked to
// be off is refused by name.
func TestRestartThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	vm, _ := bootedGuest(t, "restart")
	domain := providers.BackendName(ns, vm.Name)
	boots := func() int { return strings.Count(daemon.SerialLog(domain), "BANLIEUE-READY") }
	if n := boots(); n != 1 {
		t.Fatalf("%d boots before the restart, want 1", n)
	}

	answer := restart(t, vm, "first-restart")
	if answer.Status == nil || answer.Status.ID != "first-restart" || answer.Status.Phase != v1alpha1.RestartPending || answer.Status.Requester == "" {
		t.Fatalf("restart answer %+v, want first-restart Pending with its requester", answer.Status)
	}
	// Another restart while this one is pending is refused.
	if _, err := restartErr(vm, "second-restart"); err == nil {
		// It may have settled already: then it is a new restart, which
		// this test does not want; the record says which.
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		if vm.Status.Restart.ID != "first-restart" {
			t.Fatalf("second-restart was recorded over first-restart (%+v)", vm.Status.Restart)
		}
	} else if !strings.Contains(err.Error(), "still") {
		t.Errorf("a second restart while the first is pending: %v; want refused as still pending", err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if r := vm.Status.Restart; r == nil || r.ID != "first-restart" || r.Phase != v1alpha1.RestartDone {
			return fmt.Errorf("status.restart %+v, want first-restart Done", r)
		}
		return nil
	})
	eventually(t, 2*time.Minute, func() error {
		if n := boots(); n != 2 {
			return fmt.Errorf("%d boots after the restart, want 2", n)
		}
		return nil
	})
	lm := &infrav1.LibvirtMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), lm); err != nil {
		t.Fatal(err)
	}
	if r := lm.Status.Restart; r == nil || r.ID != "first-restart" || r.Phase != infrav1.RestartDone {
		t.Errorf("machine status.restart %+v, want first-restart Done", r)
	}
	if lm.Spec.RestartRequestID != "" {
		t.Errorf("machine spec.restartRequestID %q after the restart settled, want none (a later machine must not restart)", lm.Spec.RestartRequestID)
	}
	eventually(t, 30*time.Second, func() error {
		if n := restartEvents(t, vm.Name); n != 1 {
			return fmt.Errorf("%d Restarted events about the VM, want 1", n)
		}
		return nil
	})

	// The same requestID again: the same record, no second reset.
	before := vm.Status.Restart.DeepCopy()
	again := restart(t, vm, "first-restart")
	if again.Status == nil || again.Status.Phase != v1alpha1.RestartDone || !again.Status.RequestedAt.Equal(&before.RequestedAt) {
		t.Errorf("the same request again answered %+v, want the recorded %+v", again.Status, before)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
		t.Fatal(err)
	}
	if lm.Spec.RestartRequestID != "" {
		t.Errorf("a repeated request reached the machine again: spec.restartRequestID %q", lm.Spec.RestartRequestID)
	}

	// A VM asked to be off does not restart.
	setPower(t, vm, "PoweredOff")
	if _, err := restartErr(vm, "while-off"); err == nil || !strings.Contains(err.Error(), "desiredPowerState") {
		t.Errorf("restart of a VM asked to be off: %v; want refused naming spec.desiredPowerState", err)
	}
	if n := boots(); n != 2 {
		t.Errorf("%d boots at the end, want 2 (one reset)", n)
	}
}

func restart(t *testing.T, vm *v1alpha1.VirtualMachine, id string) *v1alpha1.VirtualMachineRestart {
	t.Helper()
	r, err := restartErr(vm, id)
	if err != nil {
		t.Fatalf("POST virtualmachines/%s/restart: %v", vm.Name, err)
	}
	return r
}

func restartErr(vm *v1alpha1.VirtualMachine, id string) (*v1alpha1.VirtualMachineRestart, error) {
	r := &v1alpha1.VirtualMachineRestart{RequestID: id}
	err := c.SubResource("restart").Create(context.Background(), vm, r)
	return r, err
}

// restartEvents counts the Restarted Events about VM name.
func restartEvents(t *testing.T, name string) int {
	t.Helper()
	var events eventsv1.EventList
	if err := c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Regarding.Kind == "VirtualMachine" && e.Regarding.Name == name && e.Reason == "Restarted" {
			n++
		}
	}
	return n
}
