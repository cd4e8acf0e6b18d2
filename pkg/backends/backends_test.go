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

package backends

import (
	"strings"
	"testing"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	libvirtmachines "github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
	proxmoxmachines "github.com/firestoned/banlieue/pkg/providers/proxmox/machinespec"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// TestAdmit: what each backend cannot build, asked through the registry as
// the scheduler asks it, with the field it names ("" when it can).
func TestAdmit(t *testing.T) {
	reg, err := Infrastructure()
	if err != nil {
		t.Fatal(err)
	}
	resolved := func(mode v1alpha1.InstallMode, provisioning ...v1alpha1.DiskProvisioning) *v1alpha1.ResolvedVirtualMachine {
		r := &v1alpha1.ResolvedVirtualMachine{}
		r.Spec.Image.InstallMode = mode
		for _, p := range provisioning {
			r.Spec.Disks = append(r.Spec.Disks, v1alpha1.ResolvedDisk{Name: "d", Provisioning: p})
		}
		return r
	}
	// ignition makes r an Ignition guest with interfaces of these modes.
	ignition := func(r *v1alpha1.ResolvedVirtualMachine, modes ...v1alpha1.IPAMMode) *v1alpha1.ResolvedVirtualMachine {
		r.Spec.Image.GuestAgent = v1alpha1.GuestAgentIgnition
		for _, m := range modes {
			r.Spec.Interfaces = append(r.Spec.Interfaces, v1alpha1.ResolvedInterface{Name: "eth", Mode: m})
		}
		return r
	}
	// imported makes r's image an import of format f.
	imported := func(r *v1alpha1.ResolvedVirtualMachine, f v1alpha1.ImageFormat) *v1alpha1.ResolvedVirtualMachine {
		r.Spec.Image.Imported = &v1alpha1.ResolvedImport{Name: "img", Revision: "1", Format: f}
		return r
	}
	// arch makes r an image of architecture a.
	arch := func(r *v1alpha1.ResolvedVirtualMachine, a string) *v1alpha1.ResolvedVirtualMachine {
		r.Spec.Image.Architecture = a
		return r
	}
	const thin, thick, eager = v1alpha1.DiskProvisioningThin, v1alpha1.DiskProvisioningThick, v1alpha1.DiskProvisioningEagerZeroed
	for _, tc := range []struct {
		class     string
		resolved  *v1alpha1.ResolvedVirtualMachine
		wantField string
	}{
		{"vsphere", resolved("", thin, eager), ""},
		{"vsphere", resolved("", thick, thin), ""},
		{"vsphere", resolved("", eager, thick), ""},
		{"vsphere", resolved(v1alpha1.InstallModeDeferred, thin), ""},
		{"libvirt", resolved("", thin, thick, eager), ""},
		{"libvirt", resolved("", eager), ""},
		{"libvirt", resolved("", thick, thin), ""},
		{"libvirt", resolved(v1alpha1.InstallModeDeferred, eager), ""},
		{"proxmox", resolved("", thin, thin), ""},
		{"proxmox", resolved("", thin, thick), "spec.disks[1].provisioning"},
		{"proxmox", resolved(v1alpha1.InstallModeDeferred, thin), "spec.image.installMode"},
		{"proxmox", imported(resolved(v1alpha1.InstallModeDeferred, thin), v1alpha1.ImageFormatISO), ""},
		{"proxmox", imported(resolved(v1alpha1.InstallModeDeferred, thin), v1alpha1.ImageFormatQCOW2), "spec.image.installMode"},
		{"proxmox", ignition(resolved("", thin), v1alpha1.IPAMDHCP), "spec.image.guestAgent"},
		{"libvirt", ignition(resolved("", thin), v1alpha1.IPAMDHCP), ""},
		{"libvirt", ignition(resolved("", thin), v1alpha1.IPAMDHCP, v1alpha1.IPAMPool), "spec.interfaces[1].mode"},
		{"libvirt", ignition(resolved("", thin), v1alpha1.IPAMStatic), "spec.interfaces[0].mode"},
		{"vsphere", ignition(resolved("", thin), v1alpha1.IPAMStatic), ""},
		{"vsphere", arch(resolved("", thin), "amd64"), ""},
		{"vsphere", arch(resolved("", thin), "x86_64"), ""},
		{"vsphere", arch(resolved("", thin), "arm64"), "spec.image.architecture"},
		{"vsphere", arch(resolved("", thick), "arm64"), "spec.image.architecture"},
		{"libvirt", arch(resolved("", thin), "amd64"), ""},
		{"libvirt", arch(resolved("", thin), "aarch64"), "spec.image.architecture"},
		{"libvirt", arch(resolved("", thin), "sparc"), "spec.image.architecture"},
		{"proxmox", arch(resolved("", thin), "X86-64"), ""},
		{"proxmox", arch(resolved("", thin), "riscv64"), "spec.image.architecture"},
		{"no-such-backend", arch(resolved("", thick), "arm64"), ""},
		{"no-such-backend", resolved("", thick), ""},
	} {
		p := &v1alpha1.Provider{Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: tc.class}}}
		got := ""
		if err := reg.Admit(tc.resolved, p); err != nil {
			got = err.Field
		}
		if got != tc.wantField {
			t.Errorf("%s, image %+v, disks %+v, interfaces %+v: refused %q, want %q", tc.class, tc.resolved.Spec.Image, tc.resolved.Spec.Disks, tc.resolved.Spec.Interfaces, got, tc.wantField)
		}
	}
}

// TestLimits: each backend's CRD limits, read from the CRD as shipped, are
// checked before placing: a VM at every limit is admitted, one past any of
// them is refused by the path of the field past it.
func TestLimits(t *testing.T) {
	reg, err := Infrastructure()
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range reg.Kinds() {
		l := k.Limits
		if l.CPUs == 0 || l.MemoryMiB == 0 || l.Disks == 0 || l.DiskGiB == 0 || l.Interfaces == 0 {
			t.Errorf("%s: a limit was not read from its CRD: %+v", k.GroupVersionKind.Kind, l)
			continue
		}
		at := func() *v1alpha1.ResolvedVirtualMachine {
			r := &v1alpha1.ResolvedVirtualMachine{}
			r.Spec.CPUs.Value, r.Spec.MemoryMiB.Value = int32(l.CPUs), l.MemoryMiB
			for range l.Disks {
				r.Spec.Disks = append(r.Spec.Disks, v1alpha1.ResolvedDisk{Name: "d", SizeGiB: v1alpha1.ResolvedInt64{Value: l.DiskGiB}})
			}
			for range l.Interfaces {
				r.Spec.Interfaces = append(r.Spec.Interfaces, v1alpha1.ResolvedInterface{Name: "n"})
			}
			return r
		}
		p := &v1alpha1.Provider{Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: k.ProviderClass}}}
		if err := reg.Admit(at(), p); err != nil {
			t.Errorf("%s at its limits: refused %v", k.ProviderClass, err)
		}
		for _, tc := range []struct {
			field string
			past  func(*v1alpha1.ResolvedVirtualMachine)
		}{
			{"spec.cpus", func(r *v1alpha1.ResolvedVirtualMachine) { r.Spec.CPUs.Value++ }},
			{"spec.memoryMiB", func(r *v1alpha1.ResolvedVirtualMachine) { r.Spec.MemoryMiB.Value++ }},
			{"spec.disks", func(r *v1alpha1.ResolvedVirtualMachine) { r.Spec.Disks = append(r.Spec.Disks, r.Spec.Disks[0]) }},
			{"spec.disks[1].sizeGiB", func(r *v1alpha1.ResolvedVirtualMachine) { r.Spec.Disks[1].SizeGiB.Value++ }},
			{"spec.interfaces", func(r *v1alpha1.ResolvedVirtualMachine) {
				r.Spec.Interfaces = append(r.Spec.Interfaces, r.Spec.Interfaces[0])
			}},
		} {
			r := at()
			tc.past(r)
			got := ""
			if err := reg.Admit(r, p); err != nil {
				got = err.Field
			}
			if got != tc.field {
				t.Errorf("%s past %s: refused %q, want %q", k.ProviderClass, tc.field, got, tc.field)
			}
		}
	}
}

// TestAdmitMachine: a backend's one admission point, asked by its provider
// of a machine written by hand or by Cluster API (no VM, no scheduler),
// refuses what it refuses for VMs, by the machine's own field.
func TestAdmitMachine(t *testing.T) {
	common := func(format infrav1.UserDataFormat) infrav1.CommonMachineSpec {
		return infrav1.CommonMachineSpec{CPUs: 1, MemoryMiB: 512, UserDataFormat: format}
	}
	static := &infrav1.StaticIP{Address: "192.0.2.5", Prefix: 24}
	for _, tc := range []struct {
		name      string
		kind      providers.MachineKind
		machine   infrav1.Machine
		wantField string
	}{
		{"proxmox cloud-init", proxmoxmachines.MachineKind(), &infrav1.ProxmoxMachine{Spec: infrav1.ProxmoxMachineSpec{CommonMachineSpec: common("")}}, ""},
		{"proxmox ignition", proxmoxmachines.MachineKind(), &infrav1.ProxmoxMachine{Spec: infrav1.ProxmoxMachineSpec{CommonMachineSpec: common(infrav1.UserDataIgnition)}}, "spec.userDataFormat"},
		{"proxmox thick data disk", proxmoxmachines.MachineKind(), &infrav1.ProxmoxMachine{Spec: infrav1.ProxmoxMachineSpec{CommonMachineSpec: common(""),
			Disks: []infrav1.ProxmoxDisk{{Name: "root", SizeGiB: 10}, {Name: "data", SizeGiB: 10, Provisioning: infrav1.DiskProvisioningThick}}}}, "spec.disks[1].provisioning"},
		{"libvirt ignition with DHCP", libvirtmachines.MachineKind(), &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: common(infrav1.UserDataIgnition),
			Network: []infrav1.LibvirtNetworkDevice{{Name: "eth0", DHCP4: true}}}}, ""},
		{"libvirt ignition with a static address", libvirtmachines.MachineKind(), &infrav1.LibvirtMachine{Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: common(infrav1.UserDataIgnition),
			Network: []infrav1.LibvirtNetworkDevice{{Name: "eth0", DHCP4: true}, {Name: "eth1", Static: static}}}}, "spec.network[1].static"},
		{"vsphere ignition with a static address", vspheremachines.MachineKind(), &infrav1.VSphereMachine{Spec: infrav1.VSphereMachineSpec{CommonMachineSpec: common(infrav1.UserDataIgnition),
			Network: []infrav1.VSphereNetworkDevice{{Name: "eth0", Static: static}}}}, ""},
	} {
		if tc.kind.Admit == nil {
			t.Fatalf("%s: the kind asks no admission of its machines", tc.name)
		}
		got := ""
		if err := tc.kind.Admit(tc.machine, &v1alpha1.Provider{}); err != nil {
			got = err.Field
		}
		if got != tc.wantField {
			t.Errorf("%s: refused %q, want %q", tc.name, got, tc.wantField)
		}
	}
}

// TestAdmitProxmoxThickReason: Proxmox VE refuses a thick disk, boot or
// data, saying why (its storages allocate, not the disk), not only that.
func TestAdmitProxmoxThickReason(t *testing.T) {
	reg, err := Infrastructure()
	if err != nil {
		t.Fatal(err)
	}
	r := &v1alpha1.ResolvedVirtualMachine{}
	r.Spec.Disks = []v1alpha1.ResolvedDisk{{Name: "root", Provisioning: v1alpha1.DiskProvisioningThick}}
	p := &v1alpha1.Provider{Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"}}}
	ferr := reg.Admit(r, p)
	if ferr == nil || ferr.Field != "spec.disks[0].provisioning" || !strings.Contains(ferr.Error(), "storage's type and configuration") || !strings.Contains(ferr.Error(), "never per disk") {
		t.Errorf("thick boot disk on Proxmox VE: %v; want refused on spec.disks[0].provisioning with the storage named as the reason", ferr)
	}
}
