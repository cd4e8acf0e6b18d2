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

package proxmox

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// TestRestartAcrossProviderCrash (issue 34): the provider is SIGKILLed
// while the reset it asked for runs; started again, it does not ask
// again: the restart is Unknown (it may have happened), one reset request
// reached the backend, counted on the simulator. A restart asked after
// that is sent, once.
func TestRestartAcrossProviderCrash(t *testing.T) {
	ctx := context.Background()
	if err := c.Create(ctx, proxmoxProvider(t, "restart-proxmox", "proxmox-token", map[string]string{"restart": "yes"})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "restart-proxmox"}})
	})
	waitProvider(t, "restart-proxmox", "InventoryWalked")
	ensureImage(t)
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pve-restart"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "restart-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "pve-restart"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"restart": "yes"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.PowerState != "PoweredOn" {
			return fmt.Errorf("power %q", vm.Status.PowerState)
		}
		return nil
	})

	resets := func() int { return sim.Requests()["POST qemu reset"] }
	before := resets()
	sim.SetTaskDelay(4 * time.Second)
	defer sim.SetTaskDelay(100 * time.Millisecond)
	if err := c.SubResource("restart").Create(ctx, vm, &v1alpha1.VirtualMachineRestart{RequestID: "crash-restart"}); err != nil {
		t.Fatal(err)
	}
	crashWhile(t, "qmreset")
	sim.SetTaskDelay(100 * time.Millisecond)
	phase(t, vm, "crash-restart", v1alpha1.RestartUnknown)
	if n := resets() - before; n != 1 {
		t.Errorf("%d reset requests reached the backend for one restart across a crash, want 1 (requests: %v)", n, sim.Requests())
	}
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), pm); err != nil {
		t.Fatal(err)
	}
	if r := pm.Status.Restart; r == nil || r.Phase != infrav1.RestartUnknown || r.Message == "" {
		t.Errorf("machine status.restart %+v, want Unknown with why", r)
	}

	// A new restart after it is sent, once.
	if err := c.SubResource("restart").Create(ctx, vm, &v1alpha1.VirtualMachineRestart{RequestID: "after-crash"}); err != nil {
		t.Fatal(err)
	}
	phase(t, vm, "after-crash", v1alpha1.RestartDone)
	if n := resets() - before; n != 2 {
		t.Errorf("%d reset requests for two restarts, want 2", n)
	}
}

// phase waits for vm's restart id to reach want.
func phase(t *testing.T, vm *v1alpha1.VirtualMachine, id string, want v1alpha1.RestartPhase) {
	t.Helper()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if r := vm.Status.Restart; r == nil || r.ID != id || r.Phase != want {
			return fmt.Errorf("status.restart %+v, want %s %s", r, id, want)
		}
		return nil
	})
}
