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

package libvirt

import (
	"context"
	"strings"
	"testing"

	"libvirt.org/go/libvirtxml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestOSInfoID: each guest OS's libosinfo id.
func TestOSInfoID(t *testing.T) {
	g := func(family infrav1.GuestOSFamily, dist, version string) *infrav1.GuestOS {
		return &infrav1.GuestOS{Family: family, Distribution: dist, Version: version}
	}
	const linux, windows, other = infrav1.GuestOSFamilyLinux, infrav1.GuestOSFamilyWindows, infrav1.GuestOSFamilyOther
	const generic = "http://libosinfo.org/linux/2022"
	for _, tc := range []struct {
		os   *infrav1.GuestOS
		want string
	}{
		{nil, ""},
		{g(linux, "ubuntu", "22.04"), "http://ubuntu.com/ubuntu/22.04"},
		{g(linux, "ubuntu", "24.04"), "http://ubuntu.com/ubuntu/24.04"},
		{g(linux, "ubuntu", "jammy"), generic},
		{g(linux, "ubuntu", ""), generic},
		{g(linux, "debian", "12"), "http://debian.org/debian/12"},
		{g(linux, "debian", "12.5"), "http://debian.org/debian/12"},
		{g(linux, "rhel", "9.4"), "http://redhat.com/rhel/9.4"},
		{g(linux, "rhel", "9"), "http://redhat.com/rhel/9.0"},
		{g(linux, "centos-stream", "9"), "http://centos.org/centos-stream/9"},
		{g(linux, "rocky", "9.3"), "http://rockylinux.org/rocky/9"},
		{g(linux, "almalinux", "9"), "http://almalinux.org/almalinux/9"},
		{g(linux, "fedora", "40"), "http://fedoraproject.org/fedora/40"},
		{g(linux, "opensuse", "15.5"), "http://opensuse.org/opensuse/15.5"},
		{g(linux, "flatcar", "3815"), generic},
		{g(linux, "", ""), generic},
		{g(linux, "rhel", `9.4"/><evil`), "http://redhat.com/rhel/9.0"}, // only numbers and dots as they are
		{g(windows, "windows", "10"), "http://microsoft.com/win/10"},
		{g(windows, "windows", "11"), "http://microsoft.com/win/11"},
		{g(windows, "windows-server", "2016"), "http://microsoft.com/win/2k16"},
		{g(windows, "windows-server", "2019"), "http://microsoft.com/win/2k19"},
		{g(windows, "windows-server", "2022"), "http://microsoft.com/win/2k22"},
		{g(windows, "windows-server", "2025"), "http://microsoft.com/win/2k25"},
		{g(windows, "windows", ""), ""},
		{g(other, "freebsd", "14.1"), "http://freebsd.org/freebsd/14.1"},
		{g(other, "haiku", "1"), ""},
	} {
		if got := OSInfoID(tc.os); got != tc.want {
			t.Errorf("OSInfoID(%+v) = %q, want %q", tc.os, got, tc.want)
		}
	}
}

// TestDomainMetadata: the domain's metadata names the guest OS and keeps
// the seed's state beside it, each read back alone; the os arch follows
// the image's architecture.
func TestDomainMetadata(t *testing.T) {
	for _, tc := range []struct{ os, seed string }{
		{"", ""}, {"http://ubuntu.com/ubuntu/22.04", ""}, {"", seedRemoved}, {"http://debian.org/debian/12", seedEjected},
		{`http://x/"<&>`, seedRemoved},
	} {
		m := domainMetadata(tc.os, tc.seed)
		if (m == nil) != (tc.os == "" && tc.seed == "") {
			t.Errorf("%+v: metadata %v", tc, m)
			continue
		}
		d := &libvirtxml.Domain{Type: "qemu", Name: "n", Metadata: m}
		doc, err := d.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		back := &libvirtxml.Domain{}
		if err := back.Unmarshal(doc); err != nil {
			t.Fatalf("%+v: %v\n%s", tc, err, doc)
		}
		if got := osInfoIDOf(back.Metadata); got != tc.os {
			t.Errorf("%+v: os id %q back", tc, got)
		}
		if tc.seed != "" && !strings.Contains(back.Metadata.XML, `state="`+tc.seed+`"`) {
			t.Errorf("%+v: no seed state in %s", tc, back.Metadata.XML)
		}
	}
	for arch, want := range map[infrav1.Architecture]string{"": "x86_64", infrav1.ArchitectureAMD64: "x86_64", infrav1.ArchitectureARM64: "aarch64"} {
		doc, err := domainXML(providers.MachineSpec{Name: "n", CPUs: 1, MemoryMiB: 64, Architecture: arch}, Options{DomainType: "qemu"}, volumes{})
		d := &libvirtxml.Domain{}
		if err == nil {
			err = d.Unmarshal(doc)
		}
		if err != nil || d.OS.Type.Arch != want {
			t.Errorf("architecture %q: os arch %q, %v; want %s", arch, d.OS.Type.Arch, err, want)
		}
	}
}

// TestGuestOSOnTheDomain: a machine of a guest OS is defined with the
// libosinfo element naming it (read back from libvirtd) and arch x86_64;
// a changed guest OS redefines the domain, which keeps the seed's state
// recorded beside it.
func TestGuestOSOnTheDomain(t *testing.T) {
	ctx := context.Background()
	spec := providers.MachineSpec{
		Name: "ns.os-0", HostName: "os-0", InstanceUUID: "8e3f5a71-2b4c-4d6e-9f70-8192a3b4c5d6",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:    []providers.Disk{{Name: "root", SizeGiB: 1}},
		NICs:     []providers.NIC{{Name: "eth0", Network: libvirtd.Network}},
		UserData: []byte("#cloud-config\n"), PowerState: infrav1.PowerStatePoweredOff,
		GuestOS:      &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "ubuntu", Version: "22.04"},
		Architecture: infrav1.ArchitectureAMD64,
	}
	c := connect(t)
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(ctx, spec, rec.record) })
	defined := func() *libvirtxml.Domain {
		t.Helper()
		d := &libvirtxml.Domain{}
		if err := d.Unmarshal(domainXMLOf(t, spec.Name)); err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := defined()
	if got := osInfoIDOf(d.Metadata); got != "http://ubuntu.com/ubuntu/22.04" || d.OS.Type.Arch != "x86_64" {
		t.Errorf("os id %q, arch %q; want ubuntu 22.04 on x86_64:\n%v", got, d.OS.Type.Arch, d.Metadata)
	}
	if d.Metadata == nil || !strings.Contains(d.Metadata.XML, libosinfoURI) {
		t.Fatalf("no libosinfo namespace in the metadata %v", d.Metadata)
	}
	// The seed's state recorded (as removeSeed does), then the image
	// says Debian 12: the redefinition names it and keeps the state.
	dom, err := c.l.DomainLookupByName(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.setSeedState(dom, seedRemoved); err != nil {
		t.Fatal(err)
	}
	spec.GuestOS = &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "debian", Version: "12"}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := osInfoIDOf(defined().Metadata); got != "http://debian.org/debian/12" {
		t.Errorf("after the change: os id %q, want debian 12", got)
	}
	if state, err := c.seedState(dom); err != nil || state != seedRemoved {
		t.Errorf("after the redefinition: seed state %q, %v; want %s", state, err, seedRemoved)
	}
	// No guest OS named: the element goes, the state stays.
	spec.GuestOS = nil
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if got := osInfoIDOf(defined().Metadata); got != "" {
		t.Errorf("no guest OS: os id %q", got)
	}
	if state, err := c.seedState(dom); err != nil || state != seedRemoved {
		t.Errorf("no guest OS: seed state %q, %v; want %s", state, err, seedRemoved)
	}
}
