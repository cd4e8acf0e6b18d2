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
	"crypto/rand"
	"encoding/hex"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
)

// TicketPort is the port the simulator's tickets name: an ESXi host's
// (443), where vCenter sends a WebMKS client. Nothing listens there: the
// ticket is the simulator's, usable only to check its shape.
const TicketPort = 443

// AcquireTickets gives model's VMs VirtualMachine.AcquireTicket, which
// govmomi's simulator does not implement, for the webmks ticket type
// only: a random ticket naming the VM's host (its name) and TicketPort;
// InvalidState when the VM is not powered on, as vCenter answers;
// InvalidArgument for any other ticket type. Call it after model.Create
// and after any other Handler is set (it calls the previous one).
//
// govmomi's simulator/example_extend_test.go wraps one VM by replacing it
// in the registry; that misses VMs cloned later, and the simulator's own
// code asserts its VMs' type. Nor can the registry's Handler hand back a
// wrapper: a logged-in call's target is looked up again in its session
// after the Handler. So the Handler points AcquireTicket calls at one
// ticket issuer of its own (the request keeps the VM's reference), which
// answers for any VM. Without a session the call is refused as
// unauthenticated, as before.
func AcquireTickets(model *simulator.Model) {
	r := model.Map()
	issuer := &ticketIssuer{Self: types.ManagedObjectReference{Type: "BanlieueTicketIssuer", Value: "ticket-issuer"}}
	prev := r.Handler
	r.Handler = func(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
		if req, ok := m.Body.(*types.AcquireTicket); ok && req.This.Type == "VirtualMachine" && ctx.Session != nil {
			// In the caller's session registry, not the model's: the
			// simulator walks the model's objects as managed objects
			// (FindByUuid), which the issuer is not.
			if ctx.Session.Registry.Get(issuer.Self) == nil {
				ctx.Session.Put(issuer)
			}
			m.This = issuer.Self
			return issuer, nil
		}
		if prev != nil {
			return prev(ctx, m)
		}
		return nil, nil
	}
}

// ticketIssuer answers the VMs' AcquireTicket calls.
type ticketIssuer struct {
	Self types.ManagedObjectReference
}

func (i *ticketIssuer) Reference() types.ManagedObjectReference { return i.Self }

// AcquireTicket is called by the simulator's dispatcher, by name, for the
// VM req.This.
func (i *ticketIssuer) AcquireTicket(ctx *simulator.Context, req *types.AcquireTicket) soap.HasFault {
	body := &methods.AcquireTicketBody{}
	vm, ok := ctx.Map.Get(req.This).(*simulator.VirtualMachine)
	if !ok {
		body.Fault_ = simulator.Fault("", &types.ManagedObjectNotFound{Obj: req.This})
		return body
	}
	if req.TicketType != string(types.VirtualMachineTicketTypeWebmks) {
		body.Fault_ = simulator.Fault("the simulator issues webmks tickets only", &types.InvalidArgument{InvalidProperty: "ticketType"})
		return body
	}
	var host string
	var power types.VirtualMachinePowerState
	// The VM's fields are read under its lock, as the simulator's own
	// methods hold it while they change them.
	ctx.WithLock(vm, func() {
		power = vm.Runtime.PowerState
		if vm.Runtime.Host != nil {
			if h, ok := ctx.Map.Get(*vm.Runtime.Host).(*simulator.HostSystem); ok {
				host = h.Name
			}
		}
	})
	if power != types.VirtualMachinePowerStatePoweredOn {
		body.Fault_ = simulator.Fault("the VM is not powered on", &types.InvalidState{})
		return body
	}
	ticket := make([]byte, 16)
	_, _ = rand.Read(ticket) // crypto/rand.Read does not fail (Go 1.24)
	body.Res = &types.AcquireTicketResponse{Returnval: types.VirtualMachineTicket{
		Ticket: hex.EncodeToString(ticket),
		Host:   host,
		Port:   TicketPort,
	}}
	return body
}
