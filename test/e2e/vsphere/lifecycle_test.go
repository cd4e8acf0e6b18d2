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
	"sort"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// vcVM reads a VM from vcsim by name (nil when absent).
func vcVM(t *testing.T, dc, name string) *mo.VirtualMachine {
	t.Helper()
	m, err := vcsim.ReadVM(context.Background(), vcURL, user, password, dc, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("not within %s: %v", timeout, last)
	}
}

// TestSeedGuideOnVCSim: the seed guide's objects become a powered-on VM in
// vcsim with the class's shape; power changes reach it; deleting the
// VirtualMachine destroys it.
func TestSeedGuideOnVCSim(t *testing.T) {
	ctx := context.Background()
	markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
	markTemplate(t, "DC1", "ubuntu-22.04-cloudinit")
	secret(t, ns, "seed-creds", map[string]string{"username": user, "password": password})
	p := provider("seed-vsphere", "seed-creds", func(s *v1alpha1.ProviderSpec) {
		s.Capabilities = v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
			Features:       []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"},
		}
	})
	p.Labels = map[string]string{"seed": "yes"}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "seed-vsphere", "InventoryWalked")
	class := &v1alpha1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "seed-class"},
		Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []v1alpha1.DiskSpec{
				{Name: "root", SizeGiB: 80, StorageClass: "gold"}, {Name: "data", SizeGiB: 500, StorageClass: "gold"},
			}},
			Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
			Firmware: "efi-secure", Features: []string{"hotAddCPU"},
		},
	}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}}}
	if err := c.Create(ctx, img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	// The seed guide's image says what it holds (issue 32): the VM's
	// guestId follows. An image of its own, which the VM cannot be
	// resolved without, so no cache shows it without those fields.
	seedImage := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-seed"},
		Spec: v1alpha1.VMImageSpec{OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "22.04", Architecture: "amd64",
			Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}}}
	if err := c.Create(ctx, seedImage); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-01", Namespace: ns},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "seed-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: seedImage.Name},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"seed": "yes"}}},
			HardwareOverride: &v1alpha1.HardwareOverride{MemoryMiB: ptr.To[int64](65536),
				DiskOverrides: []v1alpha1.DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: "192.0.2.90", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}}}},
		},
	}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	vmName := providers.BackendName(ns, "db-prod-01")
	vsm := &infrav1.VSphereMachine{}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) {
			return fmt.Errorf("VM not Ready: %+v", vm.Status.Conditions)
		}
		return c.Get(ctx, client.ObjectKeyFromObject(vm), vsm)
	})
	if !ptr.Deref(vm.Status.Initialization.Provisioned, false) || vm.Status.PowerState != "PoweredOn" || vsm.Spec.ProviderID == "" {
		t.Errorf("VM status %+v, providerID %q", vm.Status, vsm.Spec.ProviderID)
	}
	// The static address of the network override, applied by guest
	// customization, shows in the VirtualMachine's addresses.
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		for _, a := range vm.Status.Addresses {
			if a.Type == "InternalIP" && a.Address == "192.0.2.90" {
				return nil
			}
		}
		return fmt.Errorf("addresses %+v", vm.Status.Addresses)
	})
	m := vcVM(t, vsm.Spec.Datacenter, vmName)
	if m == nil {
		t.Fatalf("no VM %s in vcsim datacenter %s", vmName, vsm.Spec.Datacenter)
	}
	if m.Config.Hardware.NumCPU != 8 || m.Config.Hardware.MemoryMB != 65536 || string(m.Runtime.PowerState) != "poweredOn" {
		t.Errorf("vcsim VM: cpus %d memory %d power %s", m.Config.Hardware.NumCPU, m.Config.Hardware.MemoryMB, m.Runtime.PowerState)
	}
	if g := vsm.Spec.GuestOS; g == nil || g.Distribution != "ubuntu" || vsm.Spec.Architecture != infrav1.ArchitectureAMD64 || m.Config.GuestId != "ubuntu64Guest" {
		t.Errorf("guest OS: VSphereMachine %+v %q, vcsim guestId %q; want ubuntu, amd64, ubuntu64Guest", g, vsm.Spec.Architecture, m.Config.GuestId)
	}
	var sizes []int64
	for _, d := range m.Config.Hardware.Device {
		if disk, ok := d.(*types.VirtualDisk); ok {
			sizes = append(sizes, disk.CapacityInKB/(1024*1024))
		}
	}
	if fmt.Sprint(sizes) != "[80 2000]" {
		t.Errorf("vcsim disks %v GiB, want [80 2000] (class root, override data)", sizes)
	}
	// What /resolved says is what vCenter runs.
	resolved, err := clientset.NewForConfigOrDie(env.Admin).BanlieueV1alpha1().VirtualMachines(ns).GetResolved(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	r := resolved.Spec
	if r.CPUs.Value != m.Config.Hardware.NumCPU || r.MemoryMiB.Value != int64(m.Config.Hardware.MemoryMB) ||
		fmt.Sprint([]int64{r.Disks[0].SizeGiB.Value, r.Disks[1].SizeGiB.Value}) != fmt.Sprint(sizes) {
		t.Errorf("/resolved (cpus %d, memory %d, disks %d/%d) differs from vcsim (cpus %d, memory %d, disks %v)",
			r.CPUs.Value, r.MemoryMiB.Value, r.Disks[0].SizeGiB.Value, r.Disks[1].SizeGiB.Value, m.Config.Hardware.NumCPU, m.Config.Hardware.MemoryMB, sizes)
	}
	if "vsphere://"+m.Config.Uuid != vsm.Spec.ProviderID {
		t.Errorf("providerID %s, BIOS UUID %s", vsm.Spec.ProviderID, m.Config.Uuid)
	}

	// Power changes through the VirtualMachine reach vcsim and come back as status.
	for _, step := range []struct {
		desired v1alpha1.PowerState
		vcsim   string
	}{{v1alpha1.PowerStatePoweredOff, "poweredOff"}, {v1alpha1.PowerStateSuspended, "suspended"}, {v1alpha1.PowerStatePoweredOn, "poweredOn"}} {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(vm.DeepCopy())
		vm.Spec.DesiredPowerState = step.desired
		if err := c.Patch(ctx, vm, patch); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			if m := vcVM(t, vsm.Spec.Datacenter, vmName); m == nil || string(m.Runtime.PowerState) != step.vcsim {
				return fmt.Errorf("vcsim VM not %s", step.vcsim)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if vm.Status.PowerState != step.desired {
				return fmt.Errorf("VM status power %s, want %s", vm.Status.PowerState, step.desired)
			}
			return nil
		})
	}

	// A restart through the API (issue 34) reaches vCenter as
	// ResetVM_Task. vcsim runs no guest, so nothing shows a guest booting
	// again: the provider's record (Done) and the VM's Event are what is
	// checked here; the libvirt e2e test sees the real guest reboot.
	if err := c.SubResource("restart").Create(ctx, vm, &v1alpha1.VirtualMachineRestart{RequestID: "seed-restart"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if r := vm.Status.Restart; r == nil || r.ID != "seed-restart" || r.Phase != v1alpha1.RestartDone {
			return fmt.Errorf("status.restart %+v, want seed-restart Done", r)
		}
		return nil
	})
	if m := vcVM(t, vsm.Spec.Datacenter, vmName); m == nil || m.Runtime.PowerState != "poweredOn" {
		t.Errorf("vcsim VM after the reset: %+v, want powered on", m)
	}

	// Deleting the VirtualMachine destroys the VM in vcsim.
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VirtualMachine still there: %v", err)
		}
		if vcVM(t, vsm.Spec.Datacenter, vmName) != nil {
			return fmt.Errorf("vcsim still has %s", vmName)
		}
		return nil
	})
}

// dcFinder is a finder of datacenter dc, on a session of the test's.
func dcFinder(t *testing.T, dc string) *find.Finder {
	t.Helper()
	f := find.NewFinder(vcLogin(t).Client, false)
	d, err := f.Datacenter(context.Background(), dc)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(d)
	return f
}

// vcVMNames lists the VMs of datacenter dc whose names start with prefix.
func vcVMNames(t *testing.T, dc, prefix string) []string {
	t.Helper()
	vms, err := dcFinder(t, dc).VirtualMachineList(context.Background(), prefix+"*")
	if err != nil {
		return nil
	}
	var out []string
	for _, vm := range vms {
		out = append(out, vm.Name())
	}
	sort.Strings(out)
	return out
}
