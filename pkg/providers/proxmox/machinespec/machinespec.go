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

// Package machinespec is how a VirtualMachine becomes a ProxmoxMachine and
// how the generic provider reconcilers see one: the Proxmox VE backend's
// registrations with the core (pkg/infrastructure) and with the provider
// SDK (pkg/providers). It imports no Proxmox SDK.
package machinespec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/providers"
)

// ProviderClass is the Proxmox VE backend's providerClassRef.name.
const ProviderClass = "proxmox"

// Reasons of a VMImage's Proxmox source.
const (
	ImageReasonTemplateNotFound = "TemplateNotFound"
	ImageReasonNoProxmoxSource  = "NoProxmoxSource"
)

// Keys of a Proxmox Provider's credentials Secret: an API token.
const (
	// TokenIDKey holds USER@REALM!TOKENID (banlieue@pve!provider).
	TokenIDKey = "tokenID"
	// TokenSecretKey holds the token's secret (a UUID).
	TokenSecretKey = "tokenSecret"
	// ConsoleUsernameKey and ConsolePasswordKey, optional, are a PVE user
	// (USER@REALM, with VM.Console on the VMs) the serial console logs in
	// as: Proxmox VE before qemu-server 9.1.7 refuses API tokens at the
	// console's websocket handshake, and go-proxmox v0.9.0 opens that
	// websocket only with a user's ticket (docs/design/console.md).
	ConsoleUsernameKey = "consoleUsername"
	ConsolePasswordKey = "consolePassword"
)

// Kind registers ProxmoxMachine and ProxmoxCluster for the proxmox provider class. The
// provider owns spec.providerID.
func Kind() infrastructure.Kind {
	return infrastructure.Kind{
		ProviderClass:     ProviderClass,
		ImportFormats:     ImportFormats,
		GroupVersionKind:  infrav1.GroupVersion.WithKind("ProxmoxMachine"),
		Cluster:           infrav1.GroupVersion.WithKind("ProxmoxCluster"),
		BuildSpec:         infrastructure.Typed(BuildSpec),
		Admit:             Admit,
		OwnedFields:       []string{"providerID"},
		Snapshots:         &SnapshotLimits,
		QuietStatusFields: []string{"taskRef"},
	}
}

// Architectures are what a Proxmox VE Provider runs: x86-64 guests.
var Architectures = []infrav1.Architecture{infrav1.ArchitectureAMD64}

// ArchitectureWhy says why (a refusal's reason).
const ArchitectureWhy = "Proxmox VE runs on x86-64 hosts, which clone x86-64 templates"

// Admit is what a Proxmox VE Provider cannot build: an image installed at
// each clone (installMode deferred: a template is cloned as it is) other
// than an imported installer (its template boots the ISO), an
// Ignition guest (its user data would sit on a NoCloud drive), and a
// disk other than thin (ThickReason: a thick disk would be accepted and not
// be thick), and an image for another architecture than x86-64. Asked
// before scheduling and again by BuildSpec.
func Admit(r *v1alpha1.ResolvedVirtualMachine, _ *v1alpha1.Provider) *field.Error {
	if err := infrastructure.ImageArchitecture(r, Architectures, ArchitectureWhy); err != nil {
		return err
	}
	// An imported installer (format iso) of installMode deferred is a
	// template with a blank disk booting the installer CD-ROM after it:
	// each clone installs itself. Any other deferred image is not.
	if im := r.Spec.Image.Imported; r.Spec.Image.InstallMode == v1alpha1.InstallModeDeferred && (im == nil || im.Format != v1alpha1.ImageFormatISO) {
		return field.NotSupported(field.NewPath("spec", "image", "installMode"), r.Spec.Image.InstallMode,
			[]string{string(v1alpha1.InstallModeImmediate) + " (Proxmox VE clones a template as it is; deferred only for an imported installer, format iso)"})
	}
	if r.Spec.Image.GuestAgent == v1alpha1.GuestAgentIgnition {
		// The user data reaches the guest as a NoCloud drive's user-data,
		// which an Ignition guest never reads.
		return field.NotSupported(field.NewPath("spec", "image", "guestAgent"), r.Spec.Image.GuestAgent,
			[]string{string(v1alpha1.GuestAgentCloudInit) + " (Proxmox VE delivers user data on a NoCloud drive)"})
	}
	return infrastructure.ThinDisks(r, ThickReason)
}

// ThickReason is why a Proxmox VE disk cannot be asked thick: a storage
// allocates as its type and configuration do (lvmthin, zfs and ceph on
// write; a directory's preallocation is a storage setting), and neither a
// full clone nor a new disk takes an allocation of its own.
const ThickReason = "Proxmox VE allocates a disk as its storage's type and configuration do, never per disk: lvmthin, zfs and ceph on write"

// BuildSpec is the ProxmoxMachine spec for a resolved, scheduled VM on
// provider: disks on the storages and interfaces on the bridges (and VLANs)
// the Provider maps their classes to. Pure.
func BuildSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (infrav1.ProxmoxMachineSpec, error) {
	s := vm.Status.Scheduled
	spec := infrav1.ProxmoxMachineSpec{CommonMachineSpec: infrastructure.CommonSpec(vm, r)}
	var err error
	if spec.Template, err = infrastructure.ImageRef(r, provider); err != nil {
		return spec, err
	}
	if err := Admit(r, provider); err != nil {
		return spec, err
	}
	storages := infrastructure.Targets(s.Storage)
	for _, d := range r.Spec.Disks {
		spec.Disks = append(spec.Disks, infrav1.ProxmoxDisk{
			Name: d.Name, SizeGiB: d.SizeGiB.Value, Provisioning: infrav1.DiskProvisioning(d.Provisioning), Storage: storages[d.Name],
		})
	}
	nics, err := infrastructure.Interfaces(r, provider)
	if err != nil {
		return spec, err
	}
	for _, n := range nics {
		spec.Network = append(spec.Network, infrav1.ProxmoxNetworkDevice{Name: n.Name, Bridge: n.Target.Bridge, VLAN: n.Target.VLAN, Static: n.Static, DHCP4: n.Static == nil})
	}
	return spec, nil
}

// MachineFinalizer holds a ProxmoxMachine until its VM is destroyed.
const MachineFinalizer = "infrastructure.banlieue.io/proxmoxmachine"

// MachineKind is ProxmoxMachine for the provider's generic reconcilers.
func MachineKind() providers.MachineKind {
	return providers.MachineKind{
		Name:             "proxmoxmachine",
		New:              func() infrav1.Machine { return &infrav1.ProxmoxMachine{} },
		NewList:          func() client.ObjectList { return &infrav1.ProxmoxMachineList{} },
		Items:            items,
		Finalizer:        MachineFinalizer,
		CreatedReason:    "Cloned",
		ProviderIDScheme: "proxmox",
		Spec:             machineSpec,
		Admit:            admitMachine,
		Observe: func(m infrav1.Machine, st providers.MachineStatus) {
			pm := m.(*infrav1.ProxmoxMachine)
			pm.Status.MACAddresses = st.MACAddresses
			// Handle is NODE/VMID.
			if node, id, ok := strings.Cut(st.Handle, "/"); ok {
				if vmid, err := strconv.Atoi(id); err == nil {
					pm.Status.Node, pm.Status.VMID = node, int32(vmid)
				}
			}
		},
	}
}

func items(l client.ObjectList) []infrav1.Machine {
	return providers.MachineItems[infrav1.ProxmoxMachine](l.(*infrav1.ProxmoxMachineList).Items)
}

// machineSpec is the backend's view of a ProxmoxMachine: the node is the
// failure domain's host.
func machineSpec(m infrav1.Machine, fd v1alpha1.FailureDomain) (providers.MachineSpec, providers.Fields) {
	pm := m.(*infrav1.ProxmoxMachine)
	spec := providers.MachineSpec{Location: failuredomain.Location{Host: fd.Host}, Image: pm.Spec.Template}
	for _, n := range pm.Spec.Network {
		nic := providers.NIC{Name: n.Name, Bridge: n.Bridge, VLAN: n.VLAN}
		if st := n.Static; st != nil {
			nic.Static = &providers.StaticIP{Address: st.Address, Prefix: st.Prefix, Gateway: st.Gateway, Nameservers: st.Nameservers}
		}
		spec.NICs = append(spec.NICs, nic)
	}
	for _, d := range pm.Spec.Disks {
		spec.Disks = append(spec.Disks, providers.Disk{Name: d.Name, SizeGiB: d.SizeGiB, Provisioning: string(d.Provisioning), Target: d.Storage})
	}
	return spec, providers.Fields{
		Invalid:   providers.ArchitectureError(pm.Spec.Architecture, Architectures, ArchitectureWhy),
		Disk:      func(i int) string { return fmt.Sprintf("spec.disks[%d].storage", i) },
		NIC:       func(i int) string { return fmt.Sprintf("spec.network[%d].bridge", i) },
		Image:     "spec.template",
		Storage:   "Storage",
		Network:   "Bridge",
		ImageWord: "Template",
	}
}

// ImageKind: a Proxmox VE template lives on one node and is cloned in
// full onto any node of the cluster, so one check covers every failure
// domain.
func ImageKind() providers.ImageKind {
	return providers.ImageKind{
		Word:           "template",
		NotFoundReason: ImageReasonTemplateNotFound,
		NoSourceReason: ImageReasonNoProxmoxSource,
		Scope:          func(failuredomain.Location) failuredomain.Location { return failuredomain.Location{} },
		ScopeWord:      "cluster",
		// An import is built on every node as a template of its own (the
		// same name on each): a clone finds the one on its node first.
		ImportScope:   func(l failuredomain.Location) failuredomain.Location { return failuredomain.Location{Host: l.Host} },
		ImportFormats: ImportFormats,
	}
}

var tokenID = regexp.MustCompile(`^[^@!\s]+@[^@!\s]+![A-Za-z][A-Za-z0-9._-]*$`)

var userID = regexp.MustCompile(`^[^@!\s:]+@[^@!\s:]+$`)

// Credentials are an API token: the Secret's tokenID (USER@REALM!TOKENID)
// and tokenSecret; and, optional, the console's user (consoleUsername,
// USER@REALM, and consolePassword), both or neither.
func Credentials(s *corev1.Secret) (providers.Credentials, error) {
	id, secret := string(s.Data[TokenIDKey]), string(s.Data[TokenSecretKey])
	user, pass := string(s.Data[ConsoleUsernameKey]), string(s.Data[ConsolePasswordKey])
	switch {
	case id == "" || secret == "":
		return providers.Credentials{}, errors.New("needs non-empty keys tokenID (USER@REALM!TOKENID) and tokenSecret (an API token of Proxmox VE)")
	case !tokenID.MatchString(id):
		return providers.Credentials{}, fmt.Errorf("tokenID %q is not USER@REALM!TOKENID", id)
	case (user == "") != (pass == ""):
		return providers.Credentials{}, errors.New("consoleUsername and consolePassword go together: set both (a PVE user for the serial console) or neither")
	case user != "" && !userID.MatchString(user):
		return providers.Credentials{}, fmt.Errorf("consoleUsername %q is not USER@REALM (a user, not an API token: PVE refuses tokens at the console)", user)
	}
	return providers.Credentials{Username: id, Password: secret, ConsoleUsername: user, ConsolePassword: pass}, nil
}

// ImportFormats are the spec.import formats this backend builds: asked by
// the API server before a VMImage is stored (a class listed in
// spec.import.providerClasses that takes none is refused by name) and by
// the provider before it fetches a byte.
var ImportFormats = []v1alpha1.ImageFormat{v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw, v1alpha1.ImageFormatISO}

// SnapshotLimits: Proxmox VE documents no bound on a VM's snapshots
// (storages differ, none is enforced by qemu-server); it keeps a running
// VM's memory (vmstate); and it rolls a running VM back itself: the
// rollback task stops the VM first, then resumes it from the snapshot's
// memory, or leaves it stopped when the snapshot holds none.
var SnapshotLimits = providers.SnapshotLimits{MaxPerVM: 0, Memory: true, RevertRunning: true}
