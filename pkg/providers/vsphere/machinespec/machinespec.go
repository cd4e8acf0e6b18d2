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
	"slices"

	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/providers"
)

// ProviderClass is the vSphere backend's providerClassRef.name.
const ProviderClass = "vsphere"

// Kind registers VSphereMachine and VSphereCluster for the vsphere provider class. The
// provider owns spec.providerID; status.taskRef alone (a task in flight)
// tells the core nothing.
func Kind() infrastructure.Kind {
	return infrastructure.Kind{
		ProviderClass:     ProviderClass,
		ImportFormats:     ImportFormats,
		GroupVersionKind:  infrav1.GroupVersion.WithKind("VSphereMachine"),
		Cluster:           infrav1.GroupVersion.WithKind("VSphereCluster"),
		BuildSpec:         infrastructure.Typed(BuildSpec),
		Admit:             Admit,
		OwnedFields:       []string{"providerID"},
		Snapshots:         &SnapshotLimits,
		QuietStatusFields: []string{"taskRef"},
	}
}

// Architectures are what a vSphere Provider runs: x86-64 guests.
var Architectures = []infrav1.Architecture{infrav1.ArchitectureAMD64}

// ArchitectureWhy says why (a refusal's reason).
const ArchitectureWhy = "vSphere Providers run x86-64 guests"

// Admit is what a vSphere Provider cannot build: an image for another
// architecture than x86-64. Every disk's provisioning is honoured, the
// boot disk's through the clone's relocate disk locator (thin, thick or
// eagerly scrubbed, whatever the template's backing), the others as they
// are added. Asked before scheduling and again by BuildSpec.
func Admit(r *v1alpha1.ResolvedVirtualMachine, _ *v1alpha1.Provider) *field.Error {
	return infrastructure.ImageArchitecture(r, Architectures, ArchitectureWhy)
}

// BuildSpec is the VSphereMachine spec for a resolved, scheduled VM on
// provider. Pure, so that what a VM becomes can be tested without a cluster.
func BuildSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (infrav1.VSphereMachineSpec, error) {
	if err := Admit(r, provider); err != nil {
		return infrav1.VSphereMachineSpec{}, err
	}
	s := vm.Status.Scheduled
	spec := infrav1.VSphereMachineSpec{CommonMachineSpec: infrastructure.CommonSpec(vm, r)}
	var err error
	if spec.Template, err = infrastructure.ImageRef(r, provider); err != nil {
		return spec, err
	}
	if fd, ok := infrastructure.FailureDomain(provider, s.FailureDomain); ok {
		spec.Datacenter, spec.Cluster = fd.Datacenter, fd.Cluster
	}
	datastores := infrastructure.Targets(s.Storage)
	for _, d := range r.Spec.Disks {
		spec.Disks = append(spec.Disks, infrav1.VSphereDisk{
			Name: d.Name, SizeGiB: d.SizeGiB.Value, Provisioning: infrav1.DiskProvisioning(d.Provisioning), Datastore: datastores[d.Name],
		})
	}
	spec.CPUHotAdd = slices.Contains(r.Spec.Features, FeatureHotAddCPU)
	spec.MemoryHotAdd = slices.Contains(r.Spec.Features, FeatureHotAddMemory)
	portGroups := infrastructure.Targets(s.Network)
	for _, n := range r.Spec.Interfaces {
		// No static address is DHCP; a pool's address is static here
		// (the core claimed it before building the machine).
		static := infrastructure.StaticIP(n)
		spec.Network = append(spec.Network, infrav1.VSphereNetworkDevice{Name: n.Name, PortGroup: portGroups[n.Name], Static: static, DHCP4: static == nil})
	}
	return spec, nil
}

// The vSphere-only settings a VSphereMachine passes to the backend in
// providers.MachineSpec.Options.
const (
	OptionResourcePool = "resourcePool"
	OptionFolder       = "folder"
	// OptionCPUHotAdd and OptionMemoryHotAdd are "true" to enable hot add.
	OptionCPUHotAdd    = "cpuHotAdd"
	OptionMemoryHotAdd = "memoryHotAdd"
)

// The class features a VSphereMachine applies (the others are matched
// against the Provider's published features only).
const (
	FeatureHotAddCPU    = "hotAddCPU"
	FeatureHotAddMemory = "hotAddMemory"
)

// SnapshotLimits: the longest snapshot chain VMware supports for one VM
// is 32 (vCenter itself refuses none sooner); vSphere keeps a running
// VM's memory in a snapshot and reverts a running VM as it runs.
var SnapshotLimits = providers.SnapshotLimits{MaxPerVM: 32, Memory: true, RevertRunning: true}
