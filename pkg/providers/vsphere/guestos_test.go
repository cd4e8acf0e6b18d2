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
	"testing"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// TestGuestID: each guest OS's guestId, always one vSphere knows.
func TestGuestID(t *testing.T) {
	g := func(family infrav1.GuestOSFamily, dist, version string) *infrav1.GuestOS {
		return &infrav1.GuestOS{Family: family, Distribution: dist, Version: version}
	}
	const linux, windows, other = infrav1.GuestOSFamilyLinux, infrav1.GuestOSFamilyWindows, infrav1.GuestOSFamilyOther
	for _, tc := range []struct {
		os   *infrav1.GuestOS
		want string
	}{
		{nil, ""},
		{g(linux, "ubuntu", "22.04"), "ubuntu64Guest"},
		{g(linux, "ubuntu", ""), "ubuntu64Guest"},
		{g(linux, "debian", "12"), "debian12_64Guest"},
		{g(linux, "debian", "11.9"), "debian11_64Guest"},
		{g(linux, "debian", "14"), "debian13_64Guest"}, // the newest vSphere knows
		{g(linux, "debian", ""), "otherLinux64Guest"},
		{g(linux, "rhel", "9.4"), "rhel9_64Guest"},
		{g(linux, "rhel", "10"), "rhel10_64Guest"},
		{g(linux, "rhel", "8"), "rhel8_64Guest"},
		{g(linux, "centos-stream", "9"), "centos9_64Guest"},
		{g(linux, "rocky", "9"), "rockylinux_64Guest"},
		{g(linux, "almalinux", "9"), "almalinux_64Guest"},
		{g(linux, "oraclelinux", "9"), "oracleLinux9_64Guest"},
		{g(linux, "sles", "15.5"), "sles15_64Guest"},
		{g(linux, "opensuse", "15.5"), "opensuse64Guest"},
		{g(linux, "fedora", "40"), "fedora64Guest"},
		{g(linux, "flatcar", ""), "coreos64Guest"},
		{g(linux, "photon", "5"), "vmwarePhoton64Guest"},
		{g(linux, "amazonlinux", "2"), "amazonlinux2_64Guest"},
		{g(linux, "arch", ""), "otherLinux64Guest"},
		{g(linux, "", ""), "otherLinux64Guest"},
		{g(windows, "windows-server", "2019"), "windows2019srv_64Guest"},
		{g(windows, "windows-server", "2022"), "windows2019srvNext_64Guest"},
		{g(windows, "windows-server", "2025"), "windows2022srvNext_64Guest"},
		{g(windows, "windows-server", "2016"), "windows9Server64Guest"},
		{g(windows, "windows-server", "2012r2"), "windows8Server64Guest"},
		{g(windows, "windows", "10"), "windows9_64Guest"},
		{g(windows, "windows", "11"), "windows11_64Guest"},
		{g(windows, "windows", "xp"), ""}, // unknown: the template's stays
		{g(other, "freebsd", "14.1"), "freebsd14_64Guest"},
		{g(other, "", ""), "otherGuest64"},
	} {
		got := GuestID(tc.os)
		if got != tc.want {
			t.Errorf("GuestID(%+v) = %q, want %q", tc.os, got, tc.want)
		}
		if got != "" && !isGuestID(got) {
			t.Errorf("GuestID(%+v) = %q, which vSphere does not know", tc.os, got)
		}
	}
}

// TestGuestIDOnTheVM: a machine of a guest OS gets its guestId before
// its first power-on; a changed guest OS reaches the VM at its next
// power-off, never by powering it off; a machine naming none keeps the
// template's.
func TestGuestIDOnTheVM(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	templateID := vmProps(t, c, "DC0", tmpl).Config.GuestId
	spec := providers.MachineSpec{
		Name: "ns-os-0", InstanceUUID: "5b7d9f1a-3c5e-4a7b-8c9d-0e1f2a3b4c5d",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		// Secure boot switches the firmware first, then reads the VM again.
		Firmware:   "efi-secure",
		PowerState: infrav1.PowerStatePoweredOn, Architecture: infrav1.ArchitectureAMD64,
		GuestOS: &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "debian", Version: "12"},
	}
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := vmProps(t, c, "DC0", spec.Name).Config.GuestId; got != "debian12_64Guest" {
		t.Errorf("guestId %q (the template's %q), want debian12_64Guest", got, templateID)
	}
	// The image now says Windows Server 2022: not while it runs.
	spec.GuestOS = &infrav1.GuestOS{Family: infrav1.GuestOSFamilyWindows, Distribution: "windows-server", Version: "2022"}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if m := vmProps(t, c, "DC0", spec.Name); m.Config.GuestId != "debian12_64Guest" || m.Runtime.PowerState != "poweredOn" {
		t.Errorf("running: guestId %q, power %s; want it unchanged and running", m.Config.GuestId, m.Runtime.PowerState)
	}
	spec.PowerState = infrav1.PowerStatePoweredOff
	spec.PowerOffMode = infrav1.PowerOffModeHard
	for i := 0; i < 2; i++ { // powered off, then converged
		if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
	}
	if got := vmProps(t, c, "DC0", spec.Name).Config.GuestId; got != "windows2019srvNext_64Guest" {
		t.Errorf("after power-off: guestId %q, want windows2019srvNext_64Guest", got)
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}

	plain := providers.MachineSpec{
		Name: "ns-os-1", InstanceUUID: "6c8e0a2b-4d6f-4b8c-9d0e-1f2a3b4c5d6e",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		PowerState: infrav1.PowerStatePoweredOff,
	}
	if _, err := c.EnsureMachine(ctx, plain, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := vmProps(t, c, "DC0", plain.Name).Config.GuestId; got != templateID {
		t.Errorf("no guest OS: guestId %q, want the template's %q", got, templateID)
	}
}
