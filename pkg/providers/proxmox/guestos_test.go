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
	"slices"
	"testing"

	goproxmox "github.com/luthermonson/go-proxmox"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// TestOSTypeMapping: each guest OS's ostype, always one Proxmox VE takes.
func TestOSTypeMapping(t *testing.T) {
	g := func(family infrav1.GuestOSFamily, dist, version string) *infrav1.GuestOS {
		return &infrav1.GuestOS{Family: family, Distribution: dist, Version: version}
	}
	const linux, windows, other = infrav1.GuestOSFamilyLinux, infrav1.GuestOSFamilyWindows, infrav1.GuestOSFamilyOther
	for _, tc := range []struct {
		os   *infrav1.GuestOS
		want string
	}{
		{nil, ""},
		{g(linux, "ubuntu", "22.04"), "l26"},
		{g(linux, "", ""), "l26"},
		{g(windows, "windows", "10"), "win10"},
		{g(windows, "windows", "11"), "win11"},
		{g(windows, "windows-server", "2016"), "win10"},
		{g(windows, "windows-server", "2019"), "win10"},
		{g(windows, "windows-server", "2022"), "win11"},
		{g(windows, "windows-server", "2025"), "win11"},
		{g(windows, "windows-server", "2012r2"), "win8"},
		{g(windows, "windows", "7"), "win7"},
		{g(windows, "windows-server", "2008"), "w2k8"},
		{g(windows, "", ""), "win11"},
		{g(other, "openindiana", ""), "solaris"},
		{g(other, "freebsd", "14"), "other"},
	} {
		got := OSType(tc.os)
		if got != tc.want {
			t.Errorf("OSType(%+v) = %q, want %q", tc.os, got, tc.want)
		}
		if got != "" && !slices.Contains(pvesim.OSTypes, got) {
			t.Errorf("OSType(%+v) = %q, which Proxmox VE refuses", tc.os, got)
		}
	}
}

// TestOSTypeOnTheVM: a machine of a guest OS is cloned with its ostype
// (read back through the API) before its first start; a changed guest OS
// reaches a running VM at its next power-off, without a restart of its
// own; a machine naming none keeps the template's.
func TestOSTypeOnTheVM(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	ostype := func(name string) string {
		t.Helper()
		vms := namedVMs(sim, name)
		if len(vms) != 1 {
			t.Fatalf("%d VMs named %s", len(vms), name)
		}
		var cfg goproxmox.VirtualMachineConfig
		if err := c.api.Get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/config", vms[0].Node, vms[0].VMID), &cfg); err != nil {
			t.Fatal(err)
		}
		if cfg.OSType == nil {
			return ""
		}
		return *cfg.OSType
	}
	spec := machine("team.win", "0b9a3c4e-2222-4a5b-9c8d-7e6f5a4b3c2d")
	spec.GuestOS = &infrav1.GuestOS{Family: infrav1.GuestOSFamilyWindows, Distribution: "windows-server", Version: "2019"}
	spec.Architecture = infrav1.ArchitectureAMD64
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := ostype(spec.Name); got != "win10" {
		t.Errorf("ostype %q, want win10 (the template's is l26)", got)
	}
	starts := sim.Requests()["POST qemu start"]
	spec.GuestOS = &infrav1.GuestOS{Family: infrav1.GuestOSFamilyWindows, Distribution: "windows-server", Version: "2022"}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := ostype(spec.Name); got != "win10" || sim.Requests()["POST qemu start"] != starts {
		t.Errorf("running: ostype %q, %d more starts; want win10 and none", got, sim.Requests()["POST qemu start"]-starts)
	}
	spec.PowerState, spec.PowerOffMode = infrav1.PowerStatePoweredOff, infrav1.PowerOffModeHard
	for i := 0; i < 2; i++ { // powered off, then converged
		if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
	}
	if got := ostype(spec.Name); got != "win11" {
		t.Errorf("after power-off: ostype %q, want win11", got)
	}

	plain := machine("team.plain", "0b9a3c4e-3333-4a5b-9c8d-7e6f5a4b3c2d")
	plain.PowerState = infrav1.PowerStatePoweredOff
	if _, err := c.EnsureMachine(ctx, plain, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := ostype(plain.Name); got != "l26" {
		t.Errorf("no guest OS: ostype %q, want the template's l26", got)
	}
}
