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

// Package machinespec is how a VirtualMachine becomes a VSphereMachine:
// the vSphere backend's registration with the core (pkg/infrastructure).
// It imports no vSphere SDK, so the core controllers stay free of it.
package machinespec

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

// ProviderClass is the vSphere backend's providerClassRef.name.
const ProviderClass = "vsphere"

// Kind registers VSphereMachine for the vsphere provider class. The
// provider owns spec.providerID; status.taskRef alone (a task in flight)
// tells the core nothing.
func Kind() infrastructure.Kind {
	return infrastructure.Kind{
		ProviderClass:     ProviderClass,
		GroupVersionKind:  infrav1.GroupVersion.WithKind("VSphereMachine"),
		BuildSpec:         buildUnstructured,
		OwnedFields:       []string{"providerID"},
		QuietStatusFields: []string{"taskRef"},
	}
}

func buildUnstructured(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (map[string]interface{}, error) {
	spec, err := BuildSpec(vm, r, provider)
	if err != nil {
		return nil, err
	}
	return runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
}

// BuildSpec is the VSphereMachine spec for a resolved, scheduled VM on
// provider. Pure, so that what a VM becomes can be tested without a cluster.
func BuildSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (infrav1.VSphereMachineSpec, error) {
	s := vm.Status.Scheduled
	spec := infrav1.VSphereMachineSpec{
		FailureDomain: s.FailureDomain,
		CPUs:          r.Spec.CPUs.Value,
		MemoryMiB:     r.Spec.MemoryMiB.Value,
		Firmware:      infrav1.Firmware(r.Spec.Firmware),
		TPMEnabled:    r.Spec.TPMEnabled,
		PowerState:    infrav1.PowerState(r.Spec.PowerState),
	}
	for _, src := range r.Spec.Image.Sources {
		if src.ProviderClass == provider.Spec.ProviderClassRef.Name {
			spec.Template = src.Ref
		}
	}
	if spec.Template == "" {
		return spec, fmt.Errorf("VMImage %s has no source for provider class %q", r.Spec.Image.Name, provider.Spec.ProviderClassRef.Name)
	}
	for _, fd := range provider.Status.FailureDomains {
		if fd.Name == s.FailureDomain {
			spec.Datacenter, spec.Cluster = fd.Datacenter, fd.Cluster
		}
	}
	datastores := map[string]string{}
	for _, st := range s.Storage {
		datastores[st.Name] = st.Target
	}
	for _, d := range r.Spec.Disks {
		spec.Disks = append(spec.Disks, infrav1.VSphereDisk{
			Name: d.Name, SizeGiB: d.SizeGiB.Value, Provisioning: infrav1.DiskProvisioning(d.Provisioning), Datastore: datastores[d.Name],
		})
	}
	portGroups := map[string]string{}
	for _, n := range s.Network {
		portGroups[n.Name] = n.Target
	}
	for _, n := range r.Spec.Interfaces {
		dev := infrav1.VSphereNetworkDevice{Name: n.Name, PortGroup: portGroups[n.Name]}
		switch n.Mode {
		case v1alpha1.IPAMStatic:
			dev.Static = &infrav1.StaticIP{Address: n.Static.Address, Prefix: ptr.Deref(n.Static.Prefix, 0), Gateway: n.Static.Gateway, Nameservers: n.Static.Nameservers}
		default:
			// DHCP; pool allocation is not implemented yet and falls back to DHCP.
			dev.DHCP4 = true
		}
		spec.Network = append(spec.Network, dev)
	}
	if u := r.Spec.UserData; u != nil {
		if u.SecretRef != nil {
			spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: u.SecretRef.Name, Key: u.SecretRef.Key}
		}
		if u.ConfigMapRef != nil {
			spec.UserDataConfigMapRef = &infrav1.ConfigMapKeyReference{Name: u.ConfigMapRef.Name, Key: u.ConfigMapRef.Key}
		}
	}
	return spec, nil
}
