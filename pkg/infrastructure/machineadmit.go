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

package infrastructure

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// A backend's Admitter reads a resolved VM. A machine written by hand or
// by Cluster API has none: its provider asks the same Admitter of the
// machine seen in that shape (AsResolved, then the kind's disks and
// interfaces), and names the refused field by the machine's own path
// (MachineField). So what a backend can build is answered in one place
// for both.

// AsResolved is the part of a machine's spec every kind shares, in the
// shape of a resolved VM.
func AsResolved(c infrav1.CommonMachineSpec) *v1alpha1.ResolvedVirtualMachine {
	r := &v1alpha1.ResolvedVirtualMachine{}
	r.Spec.CPUs.Value, r.Spec.MemoryMiB.Value = c.CPUs, c.MemoryMiB
	r.Spec.Firmware, r.Spec.TPMEnabled = v1alpha1.Firmware(c.Firmware), c.TPMEnabled
	r.Spec.PowerState = v1alpha1.PowerState(c.PowerState)
	if c.UserDataFormat == infrav1.UserDataIgnition {
		r.Spec.Image.GuestAgent = v1alpha1.GuestAgentIgnition
	}
	return r
}

// AddDisk appends a machine's disk to r.
func AddDisk(r *v1alpha1.ResolvedVirtualMachine, name string, sizeGiB int64, p infrav1.DiskProvisioning) {
	r.Spec.Disks = append(r.Spec.Disks, v1alpha1.ResolvedDisk{Name: name, SizeGiB: v1alpha1.ResolvedInt64{Value: sizeGiB},
		Provisioning: v1alpha1.DiskProvisioning(p)})
}

// AddInterface appends a machine's interface to r: a static address, or
// DHCP.
func AddInterface(r *v1alpha1.ResolvedVirtualMachine, name string, static *infrav1.StaticIP) {
	mode := v1alpha1.IPAMDHCP
	if static != nil {
		mode = v1alpha1.IPAMStatic
	}
	r.Spec.Interfaces = append(r.Spec.Interfaces, v1alpha1.ResolvedInterface{Name: name, Mode: mode})
}

// machinePaths are the resolved VM's paths whose machine field has
// another name, by prefix.
var machinePaths = []struct{ resolved, machine string }{
	{"spec.image.guestAgent", "spec.userDataFormat"},
	{"spec.image.installMode", "spec.installMode"},
	{"spec.interfaces[", "spec.network["},
}

// MachineField is err (an Admitter's, asked of AsResolved) naming the
// machine's field instead of the resolved VM's.
func MachineField(err *field.Error) *field.Error {
	if err == nil {
		return nil
	}
	out := *err
	for _, p := range machinePaths {
		if rest, ok := strings.CutPrefix(out.Field, p.resolved); ok {
			out.Field = p.machine + rest
			break
		}
	}
	// An interface's mode is, on a machine, whether it has a static
	// address.
	if strings.HasPrefix(out.Field, "spec.network[") && strings.HasSuffix(out.Field, "].mode") {
		out.Field = strings.TrimSuffix(out.Field, "mode") + "static"
	}
	return &out
}
