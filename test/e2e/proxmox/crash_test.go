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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// TestProviderCrashes: the provider is SIGKILLed while a clone runs, and
// again while the destroy runs; started again each time (the kubelet
// restarts its container), it waits for the recorded task: exactly one VM for the machine, none after the delete.
func TestProviderCrashes(t *testing.T) {
	ctx := context.Background()
	if err := c.Create(ctx, proxmoxProvider(t, "crash-proxmox", "proxmox-token", map[string]string{"crash": "yes"})); err != nil {
		t.Fatal(err)
	}
	waitProvider(t, "crash-proxmox", "InventoryWalked")
	ensureImage(t)
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pve-crash"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	name := providers.BackendName(ns, "crash-0")
	clonesBefore := sim.Requests()["POST qemu clone"]
	sim.SetTaskDelay(4 * time.Second)
	defer sim.SetTaskDelay(100 * time.Millisecond)
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "crash-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "pve-crash"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"crash": "yes"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	crashWhile(t, "qmclone")
	sim.SetTaskDelay(100 * time.Millisecond)
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.PowerState != "PoweredOn" {
			return fmt.Errorf("power %q", vm.Status.PowerState)
		}
		return nil
	})
	if got := vmsNamed(name); len(got) != 1 {
		t.Fatalf("%d VMs for the machine after a crash mid-clone, want 1: %+v", len(got), got)
	}
	if n := sim.Requests()["POST qemu clone"] - clonesBefore; n != 1 {
		t.Errorf("%d clones for one machine", n)
	}
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "crash-0"}, pm); err != nil {
		t.Fatal(err)
	}

	sim.SetTaskDelay(4 * time.Second)
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	crashWhile(t, "qmdestroy")
	sim.SetTaskDelay(100 * time.Millisecond)
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there (%v)", err)
		}
		return nil
	})
	if got := vmsNamed(name); len(got) != 0 {
		t.Errorf("VMs left after a crash mid-delete: %+v", got)
	}
	if err := c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "crash-proxmox"}}); err != nil {
		t.Fatal(err)
	}
}

// crashWhile SIGKILLs the provider once a task of taskType runs: the main
// process of the leading pod's container, as the kernel's OOM killer or a
// node's crash would end it; it waits for the kubelet to have started it
// again. Whichever replica takes the Lease next (once the killed one's
// expires) finds the recorded task.
func crashWhile(t *testing.T, taskType string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, time.Minute, func() error {
		if sim.RunningTasks(taskType) == 0 {
			return fmt.Errorf("no %s task running yet", taskType)
		}
		return nil
	})
	leader, err := env.ProviderLeader(ctx, "proxmox")
	if err != nil {
		t.Fatal(err)
	}
	restarts, err := devenv.KillContainer(leader, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sim.RunningTasks(taskType) == 0 {
		t.Fatalf("the %s task ended before the provider was killed: a crash after it proves nothing", taskType)
	}
	eventually(t, time.Minute, func() error {
		p := &corev1.Pod{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(leader), p); err != nil {
			return err
		}
		if !devenv.RestartedSince(p, 0, restarts) {
			return fmt.Errorf("pod %s: the killed container is not running and ready again", p.Name)
		}
		return nil
	})
}

func vmsNamed(name string) []pvesim.VM {
	var out []pvesim.VM
	for _, v := range sim.VMs() {
		if v.Name == name {
			out = append(out, v)
		}
	}
	return out
}

// ensureImage makes the VMImage of the simulator's template.
func ensureImage(t *testing.T) {
	t.Helper()
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian-12"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "debian-12-cloud"}}}}
	if err := c.Create(context.Background(), img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}
