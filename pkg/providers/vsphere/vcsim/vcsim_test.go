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
package vcsim

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere"
)

// TestSimulator: the provider logs in with the CA bundle, sees the
// datacenters' templates, and the simulated DHCP addresses a powered-on
// clone — with the static address of its cloud-init metadata if it has one.
func TestSimulator(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{Datacenters: 2, Clusters: 3, Template: "tmpl", Username: "u@vsphere.local", Password: "p", DHCP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := vsphere.Connect(ctx, providers.Connection{Endpoint: s.Endpoint, CABundle: s.CABundle,
		Credentials: providers.Credentials{Username: "u@vsphere.local", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	for _, dc := range []string{"DC0", "DC1"} {
		if ok, err := c.TemplateExists(ctx, dc, "tmpl"); !ok || err != nil {
			t.Errorf("template in %s: %v %v", dc, ok, err)
		}
	}
	noop := func(context.Context, string) error { return nil }
	_, err = c.EnsureMachine(ctx, providers.MachineSpec{Name: "a", InstanceUUID: "11111111-1111-4111-8111-111111111111",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: "tmpl", CPUs: 1, MemoryMiB: 256, PowerState: "PoweredOn"}, noop)
	if err != nil {
		t.Fatal(err)
	}
	static := providers.MachineSpec{Name: "b", InstanceUUID: "22222222-2222-4222-8222-222222222222",
		Location: failuredomain.Location{Datacenter: "DC1", Cluster: "DC1_C2"}, Image: "tmpl", CPUs: 1, MemoryMiB: 256, PowerState: "PoweredOn",
		UserData: []byte("#cloud-config\n"),
		NICs:     []providers.NIC{{Name: "eth0", Static: &providers.StaticIP{Address: "192.0.2.44", Prefix: 24}}}}
	if _, err := c.EnsureMachine(ctx, static, noop); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ dc, name, want string }{{"DC0", "a", "10.10.0."}, {"DC1", "b", "192.0.2.44"}} {
		var got string
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 20*time.Second, true, func(ctx context.Context) (bool, error) {
			got = guestIP(t, s, tc.dc, tc.name)
			return got != "", nil
		})
		if err != nil || !strings.HasPrefix(got, tc.want) {
			t.Errorf("%s: guest address %q, want %s…", tc.name, got, tc.want)
		}
	}
}

func guestIP(t *testing.T, s *Simulator, dc, name string) string {
	t.Helper()
	m, err := ReadVM(context.Background(), s.Endpoint, "u@vsphere.local", "p", dc, name)
	if err != nil || m == nil {
		t.Fatalf("%s: %v", name, err)
	}
	if m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Fatalf("%s is %s", name, m.Runtime.PowerState)
	}
	if m.Guest == nil {
		return ""
	}
	return m.Guest.IpAddress
}

func TestKargsAddress(t *testing.T) {
	for kargs, want := range map[string]string{
		"ifname=eth0:00:50:56:00:00:01 ip=192.0.2.10::192.0.2.1:255.255.255.0:vm:eth0:none": "192.0.2.10",
		"ifname=eth0:00:50:56:00:00:01 ip=eth0:dhcp ip=10.0.0.5:::255.0.0.0:vm:eth1:none":   "10.0.0.5",
		"ip=[2001:db8::5]:::64:vm:eth0:none":                                                "2001:db8::5",
		"ip=eth0:dhcp":                                                                      "",
	} {
		if got := kargsAddress(kargs); got != want {
			t.Errorf("kargsAddress(%q) = %q, want %q", kargs, got, want)
		}
	}
}

// TestBuildRate: the raw baseline builds its VMs over every cluster of
// every datacenter (a build per cluster here), each reconfigured and
// powered on, then leaves none behind.
func TestBuildRate(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{Datacenters: 2, Clusters: 3, Template: "tmpl", Username: "u@vsphere.local", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	gc, err := Login(ctx, s.Endpoint, "u@vsphere.local", "p")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gc.Logout(ctx) }()
	targets, err := buildTargets(ctx, gc, "tmpl")
	if err != nil || len(targets) != 6 {
		t.Fatalf("%d build targets (%v), want the 6 clusters", len(targets), err)
	}
	if err := targets[4].build(ctx, "probe"); err != nil {
		t.Fatal(err)
	}
	m, err := ReadVM(ctx, s.Endpoint, "u@vsphere.local", "p", "DC1", "probe")
	if err != nil || m == nil {
		t.Fatalf("probe: %v", err)
	}
	if m.Config.Hardware.NumCPU != 8 || m.Config.Hardware.MemoryMB != 32768 || m.Config.Firmware != "efi" || m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		t.Errorf("built %d CPUs, %d MiB, %s firmware, %s: want it reconfigured and powered on", m.Config.Hardware.NumCPU, m.Config.Hardware.MemoryMB, m.Config.Firmware, m.Runtime.PowerState)
	}
	rate, err := s.BuildRate(ctx, "u@vsphere.local", "p", "tmpl", 6, 2)
	if err != nil || rate <= 0 {
		t.Fatalf("rate %v: %v", rate, err)
	}
	for _, dc := range []string{"DC0", "DC1"} {
		for i := range 6 {
			if m, err := ReadVM(ctx, s.Endpoint, "u@vsphere.local", "p", dc, fmt.Sprintf("build-rate-%d", i)); err != nil || m != nil {
				t.Errorf("build-rate-%d left in %s (%v)", i, dc, err)
			}
		}
	}
}

// TestCloneDiskBacking: the simulator Start serves honours a clone's
// relocate disk locator, as vCenter does (govmomi's vcsim alone keeps the
// template's backing): the provider's clone of disk 0 eagerly scrubbed is.
func TestCloneDiskBacking(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{Datacenters: 1, Clusters: 1, Template: "tmpl", Username: "u@vsphere.local", Password: "p"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	c, err := vsphere.Connect(ctx, providers.Connection{Endpoint: s.Endpoint, CABundle: s.CABundle,
		Credentials: providers.Credentials{Username: "u@vsphere.local", Password: "p"}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	noop := func(context.Context, string) error { return nil }
	for _, tc := range []struct {
		name, provisioning string
		thin, eager        bool
	}{{"eager", "eagerZeroed", false, true}, {"thin", "thin", true, false}} {
		if _, err := c.EnsureMachine(ctx, providers.MachineSpec{Name: tc.name, InstanceUUID: fmt.Sprintf("33333333-3333-4333-8333-3333333333%02d", len(tc.name)),
			Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: "tmpl", CPUs: 1, MemoryMiB: 256, PowerState: "PoweredOff",
			Disks: []providers.Disk{{Name: "root", SizeGiB: 1, Provisioning: tc.provisioning}}}, noop); err != nil {
			t.Fatal(err)
		}
		m, err := ReadVM(ctx, s.Endpoint, "u@vsphere.local", "p", "DC0", tc.name)
		if err != nil || m == nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		for _, d := range m.Config.Hardware.Device {
			if disk, ok := d.(*types.VirtualDisk); ok {
				b := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo)
				if thin, eager := b.ThinProvisioned != nil && *b.ThinProvisioned, b.EagerlyScrub != nil && *b.EagerlyScrub; thin != tc.thin || eager != tc.eager {
					t.Errorf("%s: boot disk thin=%t eager=%t, want thin=%t eager=%t", tc.name, thin, eager, tc.thin, tc.eager)
				}
				break
			}
		}
	}
}

// TestServingIPs: with more addresses to serve on, the certificate names
// them (a pod reaches the simulator on the node's bridge address) and the
// CA bundle verifies it there, as the provider does, while a name it does
// not hold is refused.
func TestServingIPs(t *testing.T) {
	ctx := context.Background()
	s, err := Start(ctx, Config{Username: "u", Password: "p", ServingIPs: []net.IP{net.ParseIP("10.88.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	u, err := url.Parse(s.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(s.CABundle) {
		t.Fatal("CABundle holds no certificate")
	}
	for name, want := range map[string]bool{"10.88.0.1": true, "127.0.0.1": true, "10.88.0.2": false} {
		conn, err := tls.Dial("tcp", u.Host, &tls.Config{RootCAs: roots, ServerName: name})
		if err == nil {
			_ = conn.Close()
		}
		if (err == nil) != want {
			t.Errorf("verifying the simulator as %s: %v, want it verified %v", name, err, want)
		}
	}
}
