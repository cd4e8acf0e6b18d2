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

// Package machinespec is how a VirtualMachine becomes a LibvirtMachine and
// how the generic provider reconcilers see one: the libvirt backend's
// registrations with the core (pkg/infrastructure) and with the provider
// SDK (pkg/providers). It imports no libvirt SDK.
package machinespec

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/providers"
)

// ProviderClass is the libvirt backend's providerClassRef.name.
const ProviderClass = "libvirt"

// DefaultNetwork is the network of an interface that names none: the one
// a libvirt installation defines by default. Like any network, a Provider
// must publish it (a network class whose target it is) for machines to use it.
const DefaultNetwork = "default"

// Reasons of a VMImage's libvirt source.
const (
	ImageReasonVolumeNotFound  = "VolumeNotFound"
	ImageReasonNoLibvirtSource = "NoLibvirtSource"
)

// Kind registers LibvirtMachine and LibvirtCluster for the libvirt provider class. The
// provider owns spec.providerID; status.taskRef alone tells the core
// nothing.
func Kind() infrastructure.Kind {
	return infrastructure.Kind{
		ProviderClass:     ProviderClass,
		ImportFormats:     ImportFormats,
		GroupVersionKind:  infrav1.GroupVersion.WithKind("LibvirtMachine"),
		Cluster:           infrav1.GroupVersion.WithKind("LibvirtCluster"),
		BuildSpec:         infrastructure.Typed(BuildSpec),
		Admit:             Admit,
		OwnedFields:       []string{"providerID"},
		Snapshots:         &SnapshotLimits,
		QuietStatusFields: []string{"taskRef"},
	}
}

// Architectures are what a libvirt Provider runs: its hosts publish no
// architecture of their own, so x86-64 guests (domains of arch x86_64).
var Architectures = []infrav1.Architecture{infrav1.ArchitectureAMD64}

// ArchitectureWhy says why (a refusal's reason).
const ArchitectureWhy = "a libvirt Provider's hosts publish no architecture and are taken to be x86-64"

// Admit is what a libvirt Provider cannot build: an image for another
// architecture than its hosts', a static or pool address for an Ignition
// guest. Every disk's provisioning is honoured: a thin boot disk is a
// copy-on-write overlay of the image, a thick or eagerZeroed one a full
// copy allocated in full (or, for an installer, a blank volume allocated
// so). Asked before scheduling and again by BuildSpec.
func Admit(r *v1alpha1.ResolvedVirtualMachine, _ *v1alpha1.Provider) *field.Error {
	if err := infrastructure.ImageArchitecture(r, Architectures, ArchitectureWhy); err != nil {
		return err
	}
	if r.Spec.Image.GuestAgent == v1alpha1.GuestAgentIgnition {
		// QEMU passes Ignition its config and no network metadata
		// (Afterburn reads kernel arguments on VMware only): a static or
		// pool address would be accepted and ignored.
		for i, n := range r.Spec.Interfaces {
			if n.Mode == v1alpha1.IPAMStatic || n.Mode == v1alpha1.IPAMPool {
				return field.NotSupported(field.NewPath("spec", "interfaces").Index(i).Child("mode"), n.Mode,
					[]string{string(v1alpha1.IPAMDHCP) + " (an Ignition guest on libvirt gets no network metadata)"})
			}
		}
	}
	return nil
}

// BuildSpec is the LibvirtMachine spec for a resolved, scheduled VM on
// provider: disks in the pools and interfaces on the networks or bridges
// the Provider maps their classes to. Pure.
func BuildSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (infrav1.LibvirtMachineSpec, error) {
	if err := Admit(r, provider); err != nil {
		return infrav1.LibvirtMachineSpec{}, err
	}
	s := vm.Status.Scheduled
	spec := infrav1.LibvirtMachineSpec{CommonMachineSpec: infrastructure.CommonSpec(vm, r)}
	var err error
	if spec.Image, err = infrastructure.ImageRef(r, provider); err != nil {
		return spec, err
	}
	if im := r.Spec.Image.Imported; im != nil && spec.Image == im.Name {
		// The provider imported it into the Provider's image pool.
		spec.Image = providers.ImageStorage(provider) + "/" + im.Name
	}
	if r.Spec.Image.InstallMode == v1alpha1.InstallModeDeferred {
		spec.InstallMode = string(v1alpha1.InstallModeDeferred)
	}
	pools := infrastructure.Targets(s.Storage)
	for _, d := range r.Spec.Disks {
		spec.Disks = append(spec.Disks, infrav1.LibvirtDisk{
			Name: d.Name, SizeGiB: d.SizeGiB.Value, Provisioning: infrav1.DiskProvisioning(d.Provisioning), Pool: pools[d.Name],
		})
	}
	nics, err := infrastructure.Interfaces(r, provider)
	if err != nil {
		return spec, err
	}
	for _, n := range nics {
		spec.Network = append(spec.Network, infrav1.LibvirtNetworkDevice{Name: n.Name, Network: n.Target.Network, Bridge: n.Target.Bridge, Static: n.Static, DHCP4: n.Static == nil})
	}
	return spec, nil
}

// MachineFinalizer holds a LibvirtMachine until its domain is destroyed.
const MachineFinalizer = "infrastructure.banlieue.io/libvirtmachine"

// MachineKind is LibvirtMachine for the provider's generic reconcilers.
func MachineKind() providers.MachineKind {
	return providers.MachineKind{
		Name:             "libvirtmachine",
		New:              func() infrav1.Machine { return &infrav1.LibvirtMachine{} },
		NewList:          func() client.ObjectList { return &infrav1.LibvirtMachineList{} },
		Items:            items,
		Finalizer:        MachineFinalizer,
		CreatedReason:    "Defined",
		ProviderIDScheme: "libvirt",
		Spec:             machineSpec,
		Admit:            admitMachine,
		Observe: func(m infrav1.Machine, st providers.MachineStatus) {
			lm := m.(*infrav1.LibvirtMachine)
			lm.Status.DomainUUID, lm.Status.MACAddresses = st.InstanceUUID, st.MACAddresses
		},
	}
}

func items(l client.ObjectList) []infrav1.Machine {
	return providers.MachineItems[infrav1.LibvirtMachine](l.(*infrav1.LibvirtMachineList).Items)
}

// machineSpec is the backend's view of a LibvirtMachine: the host is the
// failure domain's (admission refuses a machine whose failure domain the
// Provider does not publish).
func machineSpec(m infrav1.Machine, fd v1alpha1.FailureDomain) (providers.MachineSpec, providers.Fields) {
	lm := m.(*infrav1.LibvirtMachine)
	spec := providers.MachineSpec{Location: failuredomain.Location{Host: fd.Host}, Image: lm.Spec.Image,
		ImageIsInstaller: lm.Spec.InstallMode == string(v1alpha1.InstallModeDeferred)}
	for _, n := range lm.Spec.Network {
		nic := providers.NIC{Name: n.Name, Network: n.Network, Bridge: n.Bridge}
		if nic.Network == "" && nic.Bridge == "" {
			// Admission then checks that the Provider publishes it.
			nic.Network = DefaultNetwork
		}
		if st := n.Static; st != nil {
			nic.Static = &providers.StaticIP{Address: st.Address, Prefix: st.Prefix, Gateway: st.Gateway, Nameservers: st.Nameservers}
		}
		spec.NICs = append(spec.NICs, nic)
	}
	for _, d := range lm.Spec.Disks {
		spec.Disks = append(spec.Disks, providers.Disk{Name: d.Name, SizeGiB: d.SizeGiB, Provisioning: string(d.Provisioning), Target: d.Pool})
	}
	return spec, providers.Fields{
		Invalid: providers.ArchitectureError(lm.Spec.Architecture, Architectures, ArchitectureWhy),
		Disk:    func(i int) string { return fmt.Sprintf("spec.disks[%d].pool", i) },
		NIC: func(i int) string {
			if lm.Spec.Network[i].Bridge != "" {
				return fmt.Sprintf("spec.network[%d].bridge", i)
			}
			return fmt.Sprintf("spec.network[%d].network", i)
		},
		Image:     "spec.image",
		Storage:   "Pool",
		Network:   "Network",
		ImageWord: "Image",
	}
}

// ImageKind: libvirt image volumes live on each host.
func ImageKind() providers.ImageKind {
	return providers.ImageKind{
		Word:           "volume",
		NotFoundReason: ImageReasonVolumeNotFound,
		NoSourceReason: ImageReasonNoLibvirtSource,
		Scope:          func(l failuredomain.Location) failuredomain.Location { return failuredomain.Location{Host: l.Host} },
		ScopeWord:      "host",
		// Disk images uploaded as they are (QEMU reads both; an overlay
		// is made on either); an installer installed by a build VM
		// (immediate) or uploaded for clones to boot from (deferred).
		ImportFormats: ImportFormats,
	}
}

// Credentials are a TLS client certificate: the Secret's tls.crt and
// tls.key (a kubernetes.io/tls Secret). An endpoint that takes none (a
// local socket) reads an empty Secret and gets none.
func Credentials(s *corev1.Secret) (providers.Credentials, error) {
	if s.Name == "" {
		return providers.Credentials{}, nil
	}
	crt, key := s.Data[corev1.TLSCertKey], s.Data[corev1.TLSPrivateKeyKey]
	if len(crt) == 0 || len(key) == 0 {
		return providers.Credentials{}, errors.New("needs non-empty keys tls.crt and tls.key (a client certificate libvirtd trusts)")
	}
	return providers.Credentials{ClientCertificate: crt, ClientKey: key}, nil
}

// ImportFormats are the spec.import formats this backend builds: asked by
// the API server before a VMImage is stored (a class listed in
// spec.import.providerClasses that takes none is refused by name) and by
// the provider before it fetches a byte.
var ImportFormats = []v1alpha1.ImageFormat{v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw, v1alpha1.ImageFormatISO}

// SnapshotLimits: libvirt puts no bound on a domain's internal snapshots
// (qcow2 has its own, 65536 per image); a running domain's memory is
// kept (savevm) and it is reverted as it runs (loadvm).
var SnapshotLimits = providers.SnapshotLimits{MaxPerVM: 0, Memory: true, RevertRunning: true}
