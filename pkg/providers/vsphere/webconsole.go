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
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/providers"
)

// WebConsoleTTL is how long a web console URL is promised to work.
// vSphere reports no expiry with a WebMKS ticket; vm-operator gives its
// requests 120 s (DefaultExpiryTime) and so does banlieue. The ticket is
// accepted once.
const WebConsoleTTL = 120 * time.Second

var (
	_ providers.WebConsoles     = &Client{}
	_ providers.NoSerialConsole = &Client{}
)

// NoSerialConsole: vCenter reaches a VM's serial port only through a
// network serial port concentrator, which banlieue does not set up; the
// VM's screen is reachable through a WebMKS ticket instead.
func (c *Client) NoSerialConsole() string {
	return "vSphere has no serial console here (vCenter serves one only through a network serial port concentrator); " +
		"POST virtualmachines/NAME/webconsole for a one-time web console URL"
}

// WebConsoleURL acquires a WebMKS ticket for the VM and builds its URL as
// vm-operator does (wss://HOST:PORT/ticket/TICKET): the ESXi host that
// runs the VM serves it.
func (c *Client) WebConsoleURL(ctx context.Context, spec providers.MachineSpec) (string, time.Time, error) {
	l, err := c.locate(ctx, spec.Location.Datacenter)
	if err != nil {
		return "", time.Time{}, err
	}
	vm, err := findMachine(ctx, l, spec)
	if err != nil {
		return "", time.Time{}, c.refs.forgetIfGone(err)
	}
	if vm == nil {
		return "", time.Time{}, fmt.Errorf("%w: VM %s is not in vCenter", providers.ErrNoConsole, spec.Name)
	}
	// Asked first, so that a stopped VM gets a plain answer rather than
	// the ticket call's InvalidState fault (also handled below: the VM
	// may stop in between).
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"runtime.powerState"}, &m); err != nil {
		return "", time.Time{}, fmt.Errorf("reading %s: %w", spec.Name, c.refs.forgetIfGone(err))
	}
	if m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
		return "", time.Time{}, fmt.Errorf("%w: %s is %s", providers.ErrNotPoweredOn, spec.Name, m.Runtime.PowerState)
	}
	t, err := vm.AcquireTicket(ctx, string(types.VirtualMachineTicketTypeWebmks))
	if fault.Is(err, &types.InvalidState{}) || fault.Is(err, &types.InvalidPowerState{}) {
		return "", time.Time{}, fmt.Errorf("%w: %s: %v", providers.ErrNotPoweredOn, spec.Name, err)
	}
	if err != nil {
		return "", time.Time{}, fmt.Errorf("acquiring a webmks ticket for %s: %w", spec.Name, err)
	}
	if t.Host == "" || t.Ticket == "" {
		return "", time.Time{}, fmt.Errorf("vCenter answered a webmks ticket for %s without host or ticket", spec.Name)
	}
	return fmt.Sprintf("wss://%s:%d/ticket/%s", t.Host, t.Port, t.Ticket), time.Now().Add(WebConsoleTTL), nil
}
