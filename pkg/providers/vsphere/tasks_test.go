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
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
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
			p := vmPower{vm}
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
// logged out returns an error, not a success and not never.
func TestTaskWaitEndsWithTheSession(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	w := watchOf(c.gc.Client)
	// A task vCenter never ends: its wait lasts until the session does.
	never := types.ManagedObjectReference{Type: "Task", Value: "task-never"}
	w.mu.Lock()
	w.first = time.Hour
	w.mu.Unlock()
	result := make(chan error, 1)
	go func() {
		_, err := w.await(ctx, never)
		result <- err
	}()
	for {
		w.mu.Lock()
		_, joined := w.waits[never.Value]
		w.mu.Unlock()
		if joined {
			break
		}
		runtime.Gosched()
	}
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-result:
		if err == nil {
			t.Error("the wait returned no error after its session ended")
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
	if err := (vmPower{vm}).HardOff(ctx); err != nil {
		t.Errorf("the power-off beside an unknown task: %v", err)
	}
	if err := <-gone; !fault.Is(err, &types.ManagedObjectNotFound{}) {
		t.Errorf("the unknown task's wait: %v, want ManagedObjectNotFound", err)
	}
}
