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
	"errors"
	"fmt"
	"regexp"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere"
)

// TestAcquireTicket: the simulator's AcquireTicket (this package's
// extension; govmomi's simulator has none) on a VM the provider cloned:
// a random webmks ticket naming the VM's host; InvalidArgument for
// another ticket type; InvalidState once the VM is off. The backend's
// WebConsoleURL builds its URL from it and says ErrNotPoweredOn for a VM
// that is off; it streams no serial console and says what to use.
func TestAcquireTicket(t *testing.T) {
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
	spec := providers.MachineSpec{Name: "wc", InstanceUUID: "33333333-3333-4333-8333-333333333333",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: "tmpl", CPUs: 1, MemoryMiB: 256, PowerState: "PoweredOn"}
	noop := func(context.Context, string) error { return nil }
	if _, err := c.EnsureMachine(ctx, spec, noop); err != nil {
		t.Fatal(err)
	}

	gc, err := Login(ctx, s.Endpoint, "u@vsphere.local", "p")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gc.Logout(ctx) }()
	f := find.NewFinder(gc.Client)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	vm, err := f.VirtualMachine(ctx, "wc")
	if err != nil {
		t.Fatal(err)
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"runtime.host"}, &m); err != nil {
		t.Fatal(err)
	}
	host, err := object.NewHostSystem(gc.Client, *m.Runtime.Host).ObjectName(ctx)
	if err != nil {
		t.Fatal(err)
	}

	first, err := vm.AcquireTicket(ctx, string(types.VirtualMachineTicketTypeWebmks))
	if err != nil {
		t.Fatal(err)
	}
	second, err := vm.AcquireTicket(ctx, string(types.VirtualMachineTicketTypeWebmks))
	if err != nil {
		t.Fatal(err)
	}
	hex32 := regexp.MustCompile(`^[0-9a-f]{32}$`)
	if first.Host != host || first.Port != TicketPort || !hex32.MatchString(first.Ticket) {
		t.Errorf("ticket %+v: want host %s, port %d, 32 hex digits", first, host, TicketPort)
	}
	if first.Ticket == second.Ticket {
		t.Errorf("two tickets alike: %s", first.Ticket)
	}
	if _, err := vm.AcquireTicket(ctx, string(types.VirtualMachineTicketTypeMks)); !fault.Is(err, &types.InvalidArgument{}) {
		t.Errorf("an mks ticket: %v; want InvalidArgument", err)
	}

	u, expires, err := c.WebConsoleURL(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	want := regexp.MustCompile(fmt.Sprintf(`^wss://%s:%d/ticket/[0-9a-f]{32}$`, regexp.QuoteMeta(host), TicketPort))
	if !want.MatchString(u) {
		t.Errorf("web console URL %q, want %s", u, want)
	}
	if d := time.Until(expires); d < time.Minute || d > vsphere.WebConsoleTTL {
		t.Errorf("expires in %s, want about %s", d, vsphere.WebConsoleTTL)
	}
	if why := c.NoSerialConsole(); !regexp.MustCompile(`vSphere has no serial console.*webconsole`).MatchString(why) {
		t.Errorf("no serial console reason %q", why)
	}

	task, err := vm.PowerOff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.AcquireTicket(ctx, string(types.VirtualMachineTicketTypeWebmks)); !fault.Is(err, &types.InvalidState{}) {
		t.Errorf("a ticket of a powered-off VM: %v; want InvalidState", err)
	}
	if _, _, err := c.WebConsoleURL(ctx, spec); !errors.Is(err, providers.ErrNotPoweredOn) {
		t.Errorf("WebConsoleURL of a powered-off VM: %v; want ErrNotPoweredOn", err)
	}
}
