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

package vsphere

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// The power-off modes on vcsim, counted in the SOAP calls the provider
// made: Hard is PowerOffVM_Task; Soft and TrySoft are ShutdownGuest
// (Tools' guest shutdown) when Tools run; TrySoft without Tools goes
// hard at once, as vCenter refuses a guest shutdown then. vcsim runs no
// guest: guestBoots plays one whose Tools run, and vcsim itself plays a
// guest that answers ShutdownGuest at once. A guest that does not answer
// is played by the record of a request it left unanswered: within the
// grace nothing is called, past it TrySoft powers off.
func TestPowerOffModes(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	calls := func(method string) float64 {
		return testutil.ToFloat64(providers.BackendRequests.WithLabelValues("vsphere", method))
	}
	cases := []struct {
		name          string
		mode          infrav1.PowerOffMode
		tools         bool
		softRequested time.Duration // ago; 0 for none
		shutdowns     float64
		powerOffs     float64
		off, recorded bool
	}{
		{"hard", infrav1.PowerOffModeHard, true, 0, 0, 1, true, false},
		{"soft", infrav1.PowerOffModeSoft, true, 0, 1, 0, true, true},
		{"try-soft, the guest answers", infrav1.PowerOffModeTrySoft, true, 0, 1, 0, true, true},
		{"try-soft without Tools", infrav1.PowerOffModeTrySoft, false, 0, 0, 1, true, true},
		{"try-soft within the grace of an unanswered request", infrav1.PowerOffModeTrySoft, true, time.Second, 0, 0, false, false},
		{"try-soft past the grace of an unanswered request", infrav1.PowerOffModeTrySoft, true, time.Minute, 0, 1, true, false},
		{"soft past the grace asks again", infrav1.PowerOffModeSoft, true, time.Minute, 1, 0, true, true},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := providers.MachineSpec{
				Name: fmt.Sprintf("ns-off-%d", i), InstanceUUID: fmt.Sprintf("5a0c7e21-3b4d-4e6f-8a9b-0c1d2e3f4a%02d", i),
				Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
				PowerState: infrav1.PowerStatePoweredOn,
			}
			var rec recorder
			if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
				t.Fatal(err)
			}
			if tc.tools {
				guestBoots(t, c, "DC0", spec.Name, "192.0.2.80")
			}
			spec.PowerState, spec.PowerOffMode, spec.PowerOffGrace = infrav1.PowerStatePoweredOff, tc.mode, 10*time.Second
			if tc.softRequested > 0 {
				spec.SoftPowerOffTime = time.Now().Add(-tc.softRequested)
			}
			var recorded bool
			spec.RecordSoftPowerOff = func(context.Context, time.Time) error { recorded = true; return nil }
			shutdowns, powerOffs := calls("ShutdownGuest"), calls("PowerOffVM_Task")
			st, err := c.EnsureMachine(ctx, spec, rec.record)
			if err != nil {
				t.Fatal(err)
			}
			gotShutdowns, gotPowerOffs := calls("ShutdownGuest")-shutdowns, calls("PowerOffVM_Task")-powerOffs
			if gotShutdowns != tc.shutdowns || gotPowerOffs != tc.powerOffs || (st.PowerState == infrav1.PowerStatePoweredOff) != tc.off || recorded != tc.recorded {
				t.Errorf("%v ShutdownGuest, %v PowerOffVM_Task, state %s, recorded %t; want %v, %v, off %t, recorded %t",
					gotShutdowns, gotPowerOffs, st.PowerState, recorded, tc.shutdowns, tc.powerOffs, tc.off, tc.recorded)
			}
		})
	}
}

// A resize vCenter cannot make live (CPUs and memory without hot add)
// powers the VM off as spec.powerOffMode says, then on with the new
// shape, counted as TestPowerOffModes counts: Hard is PowerOffVM_Task in
// one call, as before; Soft and TrySoft ask the guest first
// (ShutdownGuest, its time recorded), and vcsim's guest answers at once.
// A guest that has not answered yet (a recorded request within the
// grace) keeps the VM running with its old shape, Restarting; past the
// grace TrySoft powers off hard and the VM comes back resized.
func TestResizeHonoursPowerOffMode(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	calls := func(method string) float64 {
		return testutil.ToFloat64(providers.BackendRequests.WithLabelValues("vsphere", method))
	}
	type call struct {
		softRequested        time.Duration // ago; 0 for none
		shutdowns, powerOffs float64
		recorded, restarting bool
	}
	cases := []struct {
		name  string
		mode  infrav1.PowerOffMode
		calls []call
	}{
		{"hard", infrav1.PowerOffModeHard, []call{{0, 0, 1, false, false}}},
		{"soft", infrav1.PowerOffModeSoft, []call{{0, 1, 0, true, false}}},
		{"try-soft", infrav1.PowerOffModeTrySoft, []call{{0, 1, 0, true, false}}},
		{"try-soft, the guest does not answer", infrav1.PowerOffModeTrySoft, []call{{time.Second, 0, 0, false, true}, {time.Minute, 0, 1, false, false}}},
		{"soft, the guest does not answer", infrav1.PowerOffModeSoft, []call{{time.Second, 0, 0, false, true}, {time.Minute, 1, 0, true, false}}},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec := providers.MachineSpec{
				Name: fmt.Sprintf("ns-resize-%d", i), InstanceUUID: fmt.Sprintf("6b1d8f32-4c5e-4f70-9bac-1d2e3f4a5b%02d", i),
				Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
				PowerState: infrav1.PowerStatePoweredOn,
			}
			var rec recorder
			if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
				t.Fatal(err)
			}
			guestBoots(t, c, "DC0", spec.Name, "192.0.2.81")
			spec.CPUs, spec.MemoryMiB = 2, 1024
			spec.PowerOffMode, spec.PowerOffGrace = tc.mode, 10*time.Second
			for j, want := range tc.calls {
				spec.SoftPowerOffTime = time.Time{}
				if want.softRequested > 0 {
					spec.SoftPowerOffTime = time.Now().Add(-want.softRequested)
				}
				var recorded bool
				spec.RecordSoftPowerOff = func(context.Context, time.Time) error { recorded = true; return nil }
				shutdowns, powerOffs := calls("ShutdownGuest"), calls("PowerOffVM_Task")
				st, err := c.EnsureMachine(ctx, spec, rec.record)
				if err != nil {
					t.Fatal(err)
				}
				gotShutdowns, gotPowerOffs := calls("ShutdownGuest")-shutdowns, calls("PowerOffVM_Task")-powerOffs
				if gotShutdowns != want.shutdowns || gotPowerOffs != want.powerOffs || recorded != want.recorded || st.Restarting != want.restarting {
					t.Errorf("call %d: %v ShutdownGuest, %v PowerOffVM_Task, recorded %t, restarting %t; want %v, %v, %t, %t",
						j, gotShutdowns, gotPowerOffs, recorded, st.Restarting, want.shutdowns, want.powerOffs, want.recorded, want.restarting)
				}
				// Running throughout: with its old shape while the guest
				// has time, its new one once restarted.
				resized := st.CPUs == 2 && st.MemoryMiB == 1024
				if st.PowerState != infrav1.PowerStatePoweredOn || resized == want.restarting {
					t.Errorf("call %d: %s with %d CPUs and %d MiB, restarting %t", j, st.PowerState, st.CPUs, st.MemoryMiB, st.Restarting)
				}
			}
		})
	}
}
