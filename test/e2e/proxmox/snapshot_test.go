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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// TestSnapshotsThroughTheAPI (issue 34) on pvesim: VirtualMachineSnapshots
// become Proxmox VE snapshots (counted on the simulator), the Provider's
// bound refuses one more by field path, a restore rolls the VM back once
// and it runs again, a provider SIGKILLed while its snapshot task runs
// leaves exactly one snapshot, and deleting the object removes the
// backend snapshot before the object goes.
func TestSnapshotsThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	p := proxmoxProvider(t, "snap-proxmox", "proxmox-token", map[string]string{"snap": "yes"})
	p.Spec.Capabilities.MaxSnapshotsPerVM = ptr.To[int32](2)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "snap-proxmox"}})
	})
	pr := waitProvider(t, "snap-proxmox", "InventoryWalked")
	if s := pr.Status.Snapshots; s == nil || ptr.Deref(s.MaxPerVM, 0) != 2 || s.BackendMaxPerVM != nil || !s.Memory {
		t.Errorf("Provider status.snapshots %+v, want maxPerVM 2, no backend bound, memory", s)
	}
	ensureImage(t)
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pve-snap"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "snap-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "pve-snap"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"snap": "yes"}}}}}
	// A snapshot of a VM that does not exist is refused by name.
	refused(t, newSnapshot("early", "snap-0", false), "spec.vmName", "Not found")
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	powered(t, vm, "PoweredOn")
	vmid := machineVMID(t, vm)

	s1 := newSnapshot("snap-mem", vm.Name, true)
	s2 := newSnapshot("snap-disk", vm.Name, false)
	for _, s := range []*v1alpha1.VirtualMachineSnapshot{s1, s2} {
		if err := c.Create(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	ready(t, s1)
	ready(t, s2)
	if !s1.Status.Memory || s2.Status.Memory {
		t.Errorf("memory: %s %v, %s %v; want true, false", s1.Name, s1.Status.Memory, s2.Name, s2.Status.Memory)
	}
	if s1.Status.SourceUID == "" || s1.Status.BackendName == "" || s1.Status.CreationTime == nil || len(s1.OwnerReferences) != 1 {
		t.Errorf("snapshot status %+v, owners %v: want the machine's UID, the backend name, a creation time and the VM as owner", s1.Status, s1.OwnerReferences)
	}
	if n := len(backendSnapshots(vmid)); n != 2 {
		t.Errorf("%d snapshots on the simulator for two VirtualMachineSnapshots, want 2: %+v", n, sim.Snapshots(vmid))
	}
	// The Provider allows two per VM: a third is refused before any call.
	posts := func() int { return sim.Requests()["POST qemu snapshot"] }
	before := posts()
	refused(t, newSnapshot("snap-third", vm.Name, false), "spec.vmName", "maxSnapshotsPerVM")
	refused(t, newRestore("to-nothing", vm.Name, "no-such-snapshot"), "spec.snapshotName", "Not found")

	// A restore to the disk-only snapshot: one rollback, Done, the VM
	// stopped by it and started again as its spec says.
	rollbacks := func() int { return sim.Requests()["POST qemu snapshot rollback"] }
	rb := rollbacks()
	r1 := newRestore("back-to-disk", vm.Name, s2.Name)
	if err := c.Create(ctx, r1); err != nil {
		t.Fatal(err)
	}
	restored(t, r1, v1alpha1.RestoreDone)
	if n := rollbacks() - rb; n != 1 {
		t.Errorf("%d rollback requests for one restore, want 1", n)
	}
	powered(t, vm, "PoweredOn")

	// Deleting a snapshot removes the backend's before the object goes.
	if err := c.Delete(ctx, s1); err != nil {
		t.Fatal(err)
	}
	gone(t, s1.Name, &v1alpha1.VirtualMachineSnapshot{})
	if names := backendSnapshots(vmid); len(names) != 1 || names[0] != s2.Status.BackendName {
		t.Errorf("snapshots left on the simulator %v, want only %s", names, s2.Status.BackendName)
	}

	// A provider killed while its snapshot task runs takes no second one.
	sim.SetTaskDelay(4 * time.Second)
	defer sim.SetTaskDelay(100 * time.Millisecond)
	s3 := newSnapshot("snap-crash", vm.Name, false)
	if err := c.Create(ctx, s3); err != nil {
		t.Fatal(err)
	}
	crashWhile(t, "qmsnapshot")
	sim.SetTaskDelay(100 * time.Millisecond)
	ready(t, s3)
	if n := posts() - before; n != 1 {
		t.Errorf("%d snapshot requests reached the backend for one snapshot across a crash (and a refused one), want 1", n)
	}
	if n := len(backendSnapshots(vmid)); n != 2 {
		t.Errorf("%d snapshots on the simulator, want 2 (%s and %s)", n, s2.Name, s3.Name)
	}

	// Deleting the VM deletes its snapshots (owner reference).
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	gone(t, s2.Name, &v1alpha1.VirtualMachineSnapshot{})
	gone(t, s3.Name, &v1alpha1.VirtualMachineSnapshot{})
}

func newSnapshot(name, vm string, memory bool) *v1alpha1.VirtualMachineSnapshot {
	return &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: vm, IncludeMemory: memory}}
}

func newRestore(name, vm, snapshot string) *v1alpha1.VirtualMachineRestore {
	return &v1alpha1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.VirtualMachineRestoreSpec{VMName: vm, SnapshotName: snapshot}}
}

// refused creates obj and wants it refused as Invalid, naming path and
// saying why.
func refused(t *testing.T, obj client.Object, path, why string) {
	t.Helper()
	err := c.Create(context.Background(), obj)
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), why) {
		t.Errorf("creating %s: %v, want Invalid naming %s and %q", obj.GetName(), err, path, why)
	}
}

func ready(t *testing.T, s *v1alpha1.VirtualMachineSnapshot) {
	t.Helper()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(s), s); err != nil {
			return err
		}
		if !s.Status.ReadyToUse {
			return fmt.Errorf("snapshot %s not ready: %v", s.Name, meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotReady))
		}
		return nil
	})
}

func restored(t *testing.T, r *v1alpha1.VirtualMachineRestore, want v1alpha1.RestorePhase) {
	t.Helper()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(r), r); err != nil {
			return err
		}
		if r.Status.Phase != want {
			return fmt.Errorf("restore %s is %s (%s), want %s", r.Name, r.Status.Phase, r.Status.Message, want)
		}
		return nil
	})
}

func powered(t *testing.T, vm *v1alpha1.VirtualMachine, want string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if string(vm.Status.PowerState) != want {
			return fmt.Errorf("power %q, want %s", vm.Status.PowerState, want)
		}
		return nil
	})
}

// machineVMID is the Proxmox VE VM id of vm's machine.
func machineVMID(t *testing.T, vm *v1alpha1.VirtualMachine) int {
	t.Helper()
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), pm); err != nil {
		t.Fatal(err)
	}
	if pm.Status.VMID == 0 {
		t.Fatalf("machine %s has no VMID", pm.Name)
	}
	return int(pm.Status.VMID)
}

// backendSnapshots are the names of VM vmid's complete snapshots on the
// simulator.
func backendSnapshots(vmid int) []string {
	var out []string
	for _, s := range sim.Snapshots(vmid) {
		if s.State == "" {
			out = append(out, s.Name)
		}
	}
	return out
}
