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
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// vcsimVMs are the simulator's own VMs of DC0, powered on.
func vcsimVMs(t *testing.T, c *Client) []*object.VirtualMachine {
	t.Helper()
	vms, err := find.NewFinder(c.gc.Client, false).VirtualMachineList(context.Background(), "/DC0/vm/*")
	if err != nil || len(vms) == 0 {
		t.Fatalf("vcsim's VMs: %v (%d)", err, len(vms))
	}
	return vms
}

// TestTaskWaitsShareOneCollector: concurrent task waits of one session
// share the session's own collector: no collector or filter is made or
// destroyed per wait, and the waits share their reads.
func TestTaskWaitsShareOneCollector(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	vms := vcsimVMs(t, c)
	methods := []string{"CreatePropertyCollector", "CreateFilter", "DestroyPropertyCollector", "DestroyPropertyFilter", "WaitForUpdatesEx", "RetrievePropertiesEx"}
	counted := map[string]func() float64{}
	for _, m := range methods {
		counted[m] = calls(m)
	}
	const rounds = 3
	var wg sync.WaitGroup
	errs := make(chan error, len(vms)*rounds*2)
	for _, vm := range vms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := vmPower{vm: vm}
			for range rounds {
				if err := p.HardOff(ctx); err != nil {
					errs <- fmt.Errorf("powering off %s: %w", vm.Name(), err)
				}
				if err := p.Start(ctx); err != nil {
					errs <- fmt.Errorf("powering on %s: %w", vm.Name(), err)
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	waits := len(vms) * rounds * 2
	grown := map[string]float64{}
	for _, m := range methods {
		grown[m] = counted[m]()
	}
	t.Logf("%d task waits: %v", waits, grown)
	if made := grown["CreatePropertyCollector"] + grown["CreateFilter"] + grown["DestroyPropertyCollector"] + grown["DestroyPropertyFilter"]; made > 0 {
		t.Errorf("the waits made or destroyed %v collectors or filters, want none: %v", made, grown)
	}
	if reads := grown["RetrievePropertiesEx"] + grown["WaitForUpdatesEx"]; reads == 0 || reads >= float64(waits) {
		t.Errorf("%v reads for %d waits, want them shared (fewer than one per wait, more than none)", reads, waits)
	}
	for _, vm := range vms {
		if s, err := vm.PowerState(ctx); err != nil || s != types.VirtualMachinePowerStatePoweredOn {
			t.Errorf("%s is %s (%v) after its waits, want poweredOn", vm.Name(), s, err)
		}
	}
}

// TestTaskWaitReturnsTheFault: a task that fails returns its info and its
// fault, as govmomi's wait does (callers test it with fault.Is).
func TestTaskWaitReturnsTheFault(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	vm := vcsimVMs(t, c)[0]
	task, err := vm.PowerOn(ctx) // already on
	if err != nil {
		t.Fatal(err)
	}
	info, err := awaitTask(ctx, task)
	if !fault.Is(err, &types.InvalidPowerState{}) {
		t.Fatalf("err = %v, want the task's InvalidPowerState", err)
	}
	if info == nil || info.State != types.TaskInfoStateError {
		t.Errorf("info %+v, want the failed task's", info)
	}
}

// TestTaskWaitEndsWithTheSession: a wait in flight when the session is
// logged out ends with an error, not a success and not never.
func TestTaskWaitEndsWithTheSession(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	w := watchOf(c.gc.Client)
	// A task vCenter never ends, joined as await joins it: its wait lasts
	// until the session does.
	w.mu.Lock()
	w.first = time.Hour
	w.mu.Unlock()
	tw := w.join(types.ManagedObjectReference{Type: "Task", Value: "task-never"})
	defer w.leave(tw)
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-tw.done:
		if tw.err == nil {
			t.Error("the wait ended with no error after its session ended")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the wait still waits 10 s after its session ended")
	}
}

// TestTaskWaitOfAnUnknownTask: a task vCenter does not know fails its own
// wait with vCenter's fault, and only its own: the task beside it in the
// same read still returns its outcome.
func TestTaskWaitOfAnUnknownTask(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	w := watchOf(c.gc.Client)
	vm := vcsimVMs(t, c)[0]
	gone := make(chan error, 1)
	go func() {
		_, err := w.await(ctx, types.ManagedObjectReference{Type: "Task", Value: "task-gone"})
		gone <- err
	}()
	if err := (vmPower{vm: vm}).HardOff(ctx); err != nil {
		t.Errorf("the power-off beside an unknown task: %v", err)
	}
	if err := <-gone; !fault.Is(err, &types.ManagedObjectNotFound{}) {
		t.Errorf("the unknown task's wait: %v, want ManagedObjectNotFound", err)
	}
}

// TestCallsPerBuild: building VMs shaped like make bench's (EFI, two
// disks on the template's datastore, a NIC, cloud-init user data, powered
// on), a few at a time as the provider's workers do, costs at most 10
// vCenter calls per VM: the clone, its reconfigure and power-on, the
// instance UUID search, two reads of the VM and the shared task reads;
// no collector per wait, no power state read that a task or the
// converge read already told, no folder made where the clone made it,
// the template's devices and the network's backing read once.
func TestCallsPerBuild(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	noop := func(context.Context, string) error { return nil }
	const vms, workers = 24, 4
	before := callsPerMethod(t)
	var wg sync.WaitGroup
	next := make(chan int)
	go func() {
		for i := range vms {
			next <- i
		}
		close(next)
	}()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				spec := providers.MachineSpec{
					Name: fmt.Sprintf("calls-%d", i), InstanceUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
					Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 2, MemoryMiB: 4096, Firmware: "efi",
					NICs: []providers.NIC{{Name: "eth0", Network: "VM Network"}}, Disks: []providers.Disk{{SizeGiB: 20, Target: "LocalDS_0"}, {SizeGiB: 50, Target: "LocalDS_0"}},
					UserData: []byte("#cloud-config\n"), PowerState: infrav1.PowerStatePoweredOn,
				}
				st, err := c.EnsureMachine(ctx, spec, noop)
				if err != nil {
					t.Errorf("%s: %v", spec.Name, err)
				} else if st.PowerState != infrav1.PowerStatePoweredOn || len(st.DiskSizesGiB) != 2 {
					t.Errorf("%s: %+v, want powered on with two disks", spec.Name, st)
				}
			}
		}()
	}
	wg.Wait()
	var total float64
	perVM := map[string]float64{}
	for m, n := range callsPerMethod(t) {
		if d := n - before[m]; d > 0 {
			perVM[m] = d / vms
			total += d / vms
		}
	}
	t.Logf("%.1f vCenter calls per VM: %v", total, perVM)
	if total > 10 {
		t.Errorf("%.1f vCenter calls per VM, want at most 10: %v", total, perVM)
	}
	for _, m := range []string{"CreatePropertyCollector", "CreateFilter", "MakeDirectory"} {
		if perVM[m] > 0 {
			t.Errorf("%s %.2f per VM, want none", m, perVM[m])
		}
	}
}
