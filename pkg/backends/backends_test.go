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
	"testing"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
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
		{"vsphere", resolved("", thick, thin), "spec.disks[0].provisioning"},
		{"vsphere", resolved(v1alpha1.InstallModeDeferred, thin), ""},
		{"libvirt", resolved("", thin, thick, eager), ""},
		{"libvirt", resolved("", eager), "spec.disks[0].provisioning"},
		{"proxmox", resolved("", thin, thin), ""},
		{"proxmox", resolved("", thin, thick), "spec.disks[1].provisioning"},
		{"proxmox", resolved(v1alpha1.InstallModeDeferred, thin), "spec.image.installMode"},
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
