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
	"fmt"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// CommonSpec is the part of every backend's machine spec that comes
// straight from the resolved VM: failure domain, the guest's host name
// (the VM's, whatever the machine is named: a migration's target keeps
// it), size, firmware, vTPM and power (state, and how to power off). Spec
// builders start from it.
func CommonSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine) infrav1.CommonMachineSpec {
	spec := infrav1.CommonMachineSpec{
		FailureDomain: vm.Status.Scheduled.FailureDomain,
		HostName:      providers.HostName(vm.Name),
		CPUs:          r.Spec.CPUs.Value,
		MemoryMiB:     r.Spec.MemoryMiB.Value,
		Firmware:      infrav1.Firmware(r.Spec.Firmware),
		TPMEnabled:    r.Spec.TPMEnabled,
		PowerState:    infrav1.PowerState(r.Spec.PowerState),
		// How to power off is the VM's own choice, not the class's: it
		// comes from its spec as it is.
		PowerOffMode:         infrav1.PowerOffMode(vm.Spec.PowerOffMode),
		PowerOffGraceSeconds: vm.Spec.PowerOffGraceSeconds,
	}
	if r.Spec.Image.GuestAgent == v1alpha1.GuestAgentIgnition {
		spec.UserDataFormat = infrav1.UserDataIgnition
	}
	for _, c := range r.Spec.Image.CloudConfigs {
		spec.CloudConfigs = append(spec.CloudConfigs, c.SecretRef.Name)
	}
	if u := r.Spec.UserData; u != nil {
		if u.SecretRef != nil {
			spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: u.SecretRef.Name, Key: u.SecretRef.Key}
		}
		if u.ConfigMapRef != nil {
			spec.UserDataConfigMapRef = &infrav1.ConfigMapKeyReference{Name: u.ConfigMapRef.Name, Key: u.ConfigMapRef.Key}
		}
	}
	return spec
}

// StaticIP is an interface's static address in the machine's shape (its
// own, or the one its pool gave); nil for DHCP.
func StaticIP(n v1alpha1.ResolvedInterface) *infrav1.StaticIP {
	if n.Static == nil { // DHCP, or a pool address not claimed yet
		return nil
	}
	return &infrav1.StaticIP{Address: n.Static.Address, Prefix: ptr.Deref(n.Static.Prefix, 0), Gateway: n.Static.Gateway, Nameservers: n.Static.Nameservers}
}

// Targets maps each disk or interface name of a scheduled VM to its
// backend target (status.scheduled.storage or .network).
func Targets[T v1alpha1.StorageResolution | v1alpha1.NetworkResolution](rs []T) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		switch r := any(r).(type) {
		case v1alpha1.StorageResolution:
			out[r.Name] = r.Target
		case v1alpha1.NetworkResolution:
			out[r.Name] = r.Target
		}
	}
	return out
}

// Interface is a resolved interface with the backend target its network
// class maps to on the Provider (zero when it names none: the image's
// network) and its static address (nil for DHCP).
type Interface struct {
	Name   string
	Target v1alpha1.NetworkTarget
	Static *infrav1.StaticIP
}

// Interfaces resolves each interface of r against provider's network
// classes; a class the Provider does not offer is an error.
func Interfaces(r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) ([]Interface, error) {
	targets := map[string]v1alpha1.NetworkTarget{}
	for _, n := range provider.Spec.Capabilities.NetworkClasses {
		targets[n.Name] = n.Target
	}
	var out []Interface
	for _, n := range r.Spec.Interfaces {
		t, ok := targets[n.NetworkClass]
		if !ok && n.NetworkClass != "" {
			return nil, fmt.Errorf("interface %s: Provider %s has no network class %q", n.Name, provider.Name, n.NetworkClass)
		}
		out = append(out, Interface{Name: n.Name, Target: t, Static: StaticIP(n)})
	}
	return out, nil
}

// ImageRef is the ref of the resolved image's source for provider's class.
func ImageRef(r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (string, error) {
	class := provider.Spec.ProviderClassRef.Name
	for _, src := range r.Spec.Image.Sources {
		if src.ProviderClass == class {
			return src.Ref, nil
		}
	}
	return "", fmt.Errorf("VMImage %s has no source for provider class %q", r.Spec.Image.Name, class)
}

// FailureDomain is the failure domain of provider named name, if published.
func FailureDomain(provider *v1alpha1.Provider, name string) (v1alpha1.FailureDomain, bool) {
	for _, fd := range provider.Status.FailureDomains {
		if fd.Name == name {
			return fd, true
		}
	}
	return v1alpha1.FailureDomain{}, false
}

// ThinDisks refuses a disk provisioned other than thin among the first
// count of resolved's disks (all of them when count < 0), for a backend
// that cannot allocate those otherwise: why says what it does instead.
func ThinDisks(resolved *v1alpha1.ResolvedVirtualMachine, count int, why string) *field.Error {
	for i, d := range resolved.Spec.Disks {
		if count >= 0 && i >= count {
			break
		}
		if d.Provisioning != "" && d.Provisioning != v1alpha1.DiskProvisioningThin {
			return field.NotSupported(field.NewPath("spec", "disks").Index(i).Child("provisioning"), d.Provisioning,
				[]string{string(v1alpha1.DiskProvisioningThin) + " (" + why + ")"})
		}
	}
	return nil
}
