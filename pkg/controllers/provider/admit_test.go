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

package provider

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	imgs "github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/providers"
	libvirtmachines "github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
	proxmoxmachines "github.com/firestoned/banlieue/pkg/providers/proxmox/machinespec"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

func TestAdmit(t *testing.T) {
	shared := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "banlieue-system"},
		Spec: v1alpha1.ProviderSpec{Capabilities: v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "ds-gold"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "pg-prod"}}},
		}},
		Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{
			{Name: "prod-dc0-c0", Datacenter: "DC0", Cluster: "C0"}, {Name: "prod-dc0-c1", Datacenter: "DC0", Cluster: "C1"},
		}},
	}
	tenantOwn := shared.DeepCopy()
	tenantOwn.Namespace = "team-a"
	featured := shared.DeepCopy()
	featured.Spec.Capabilities.Features = []string{"hotAddCPU", "vtpm"}
	secure := shared.DeepCopy()
	secure.Spec.Capabilities.Features = []string{"efiSecureBoot"}
	images := []v1alpha1.VMImage{{Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{
		{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu"}, {ProviderClass: "proxmox", Kind: "Template", Ref: "9000"},
	}}}, {Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "kairos"}},
		CloudConfigs: []v1alpha1.CloudConfigSource{{SecretRef: v1alpha1.LocalObjectReference{Name: "install"}}, {SecretRef: v1alpha1.LocalObjectReference{Name: "seal"}}}}}}
	good := func() *infrav1.VSphereMachine {
		return &infrav1.VSphereMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.VSphereMachineSpec{Datacenter: "DC0", Cluster: "C1", Template: "ubuntu",
				Disks:   []infrav1.VSphereDisk{{Name: "root", Datastore: "ds-gold"}, {Name: "data"}},
				Network: []infrav1.VSphereNetworkDevice{{Name: "eth0", PortGroup: "pg-prod"}, {Name: "eth1"}}},
		}
	}
	for _, tc := range []struct {
		name     string
		provider *v1alpha1.Provider
		mutate   func(*infrav1.VSphereMachine)
		reason   string
		field    string
	}{
		{"published everything, shared Provider", shared, func(*infrav1.VSphereMachine) {}, "", ""},
		{"the namespace's own Provider", tenantOwn, func(*infrav1.VSphereMachine) {}, "", ""},
		{"failure domain named and matching", shared, func(m *infrav1.VSphereMachine) { m.Spec.FailureDomain = "prod-dc0-c1" }, "", ""},
		{"another tenant's Provider", tenantOwn, func(m *infrav1.VSphereMachine) { m.Namespace = "team-b" }, ReasonProviderNotAllowed, "metadata.annotations[banlieue.io/provider]"},
		{"unknown datacenter", shared, func(m *infrav1.VSphereMachine) { m.Spec.Datacenter = "DC9" }, ReasonFailureDomainNotPublished, "spec.datacenter, spec.cluster"},
		{"cluster of no failure domain", shared, func(m *infrav1.VSphereMachine) { m.Spec.Cluster = "C7" }, ReasonFailureDomainNotPublished, "spec.datacenter, spec.cluster"},
		{"failure domain of another cluster", shared, func(m *infrav1.VSphereMachine) { m.Spec.FailureDomain = "prod-dc0-c0" }, ReasonFailureDomainNotPublished, "spec.failureDomain, spec.datacenter, spec.cluster"},
		{"datastore outside the capabilities", shared, func(m *infrav1.VSphereMachine) { m.Spec.Disks[1].Datastore = "ds-other" }, ReasonDatastoreNotPublished, "spec.disks[1].datastore"},
		{"port group outside the capabilities", shared, func(m *infrav1.VSphereMachine) { m.Spec.Network[1].PortGroup = "VM Network" }, ReasonPortGroupNotPublished, "spec.network[1].portGroup"},
		{"template of no image (another VM)", shared, func(m *infrav1.VSphereMachine) { m.Spec.Template = "someone-elses-vm" }, ReasonTemplateNotPublished, "spec.template"},
		{"template of another class's source", shared, func(m *infrav1.VSphereMachine) { m.Spec.Template = "9000" }, ReasonTemplateNotPublished, "spec.template"},
		{"the image's cloud configs", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.Template, m.Spec.CloudConfigs = "kairos", []string{"install", "seal"}
		}, "", ""},
		{"cloud configs of another image", shared, func(m *infrav1.VSphereMachine) { m.Spec.CloudConfigs = []string{"install", "seal"} }, ReasonCloudConfigNotPublished, "spec.cloudConfigs"},
		{"the Provider's credentials as a cloud config", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.Template, m.Spec.CloudConfigs = "kairos", []string{"vsphere-creds"}
		}, ReasonCloudConfigNotPublished, "spec.cloudConfigs"},
		{"the image's cloud configs reordered", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.Template, m.Spec.CloudConfigs = "kairos", []string{"seal", "install"}
		}, ReasonCloudConfigNotPublished, "spec.cloudConfigs"},
		// resourcePool and folder are looked up under the failure domain:
		// nothing that could climb out of it, or skip the lookup, passes.
		{"a pool and folder under the failure domain", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.ResourcePool, m.Spec.Folder = "team-a/batch", "team-a"
		}, "", ""},
		{"an absolute resource pool path", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.ResourcePool = "/DC1/host/C9/Resources"
		}, vspheremachines.ReasonOutsideFailureDomain, "spec.resourcePool"},
		{"a resource pool by managed object reference", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.ResourcePool = "ResourcePool:resgroup-42"
		}, vspheremachines.ReasonOutsideFailureDomain, "spec.resourcePool"},
		{"a resource pool climbing out", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.ResourcePool = "../../C9/Resources"
		}, vspheremachines.ReasonOutsideFailureDomain, "spec.resourcePool"},
		{"a resource pool wildcard", shared, func(m *infrav1.VSphereMachine) { m.Spec.ResourcePool = "*" }, vspheremachines.ReasonOutsideFailureDomain, "spec.resourcePool"},
		{"an absolute folder path", shared, func(m *infrav1.VSphereMachine) { m.Spec.Folder = "/DC1/vm" }, vspheremachines.ReasonOutsideFailureDomain, "spec.folder"},
		{"an absolute template path", shared, func(m *infrav1.VSphereMachine) { m.Spec.Template = "/DC1/vm/ubuntu" }, vspheremachines.ReasonOutsideFailureDomain, "spec.template"},
		{"a template climbing out", shared, func(m *infrav1.VSphereMachine) { m.Spec.Template = "../../DC1/vm/ubuntu" }, vspheremachines.ReasonOutsideFailureDomain, "spec.template"},
		{"a folder by managed object reference", shared, func(m *infrav1.VSphereMachine) { m.Spec.Folder = "Folder:group-v3" }, vspheremachines.ReasonOutsideFailureDomain, "spec.folder"},
		{"an arm64 guest", shared, func(m *infrav1.VSphereMachine) { m.Spec.Architecture = infrav1.ArchitectureARM64 }, providers.ReasonArchitectureUnsupported, "spec.architecture"},
		// Features the machine uses must be the Provider's.
		{"CPU hot add, not advertised", shared, func(m *infrav1.VSphereMachine) { m.Spec.CPUHotAdd = true }, ReasonFeatureNotPublished, "spec.cpuHotAdd"},
		{"CPU hot add, advertised", featured, func(m *infrav1.VSphereMachine) { m.Spec.CPUHotAdd = true }, "", ""},
		{"memory hot add, not advertised", featured, func(m *infrav1.VSphereMachine) { m.Spec.MemoryHotAdd = true }, ReasonFeatureNotPublished, "spec.memoryHotAdd"},
		{"a vTPM, not advertised", shared, func(m *infrav1.VSphereMachine) { m.Spec.TPMEnabled, m.Spec.Firmware = true, "efi" }, ReasonFeatureNotPublished, "spec.tpmEnabled"},
		{"a vTPM, advertised", featured, func(m *infrav1.VSphereMachine) { m.Spec.TPMEnabled, m.Spec.Firmware = true, "efi" }, "", ""},
		// Secure boot is the Provider's to offer (placement.FirmwareFeature).
		{"efi-secure, not advertised", featured, func(m *infrav1.VSphereMachine) { m.Spec.Firmware = "efi-secure" }, ReasonFeatureNotPublished, "spec.firmware"},
		{"efi-secure, advertised", secure, func(m *infrav1.VSphereMachine) { m.Spec.Firmware = "efi-secure" }, "", ""},
		{"efi, without efiSecureBoot", featured, func(m *infrav1.VSphereMachine) { m.Spec.Firmware = "efi" }, "", ""},
	} {
		m := good()
		tc.mutate(m)
		r := &MachineReconciler{Kind: vspheremachines.MachineKind()}
		spec, fields := r.machineSpec(m, tc.provider)
		got := admit(m, spec, fields, tc.provider, "banlieue-system", "vsphere", images)
		switch {
		case tc.reason == "" && got != nil:
			t.Errorf("%s: refused: %v", tc.name, got)
		case tc.reason != "" && got == nil:
			t.Errorf("%s: admitted, want %s", tc.name, tc.reason)
		case got != nil && (got.reason != tc.reason || got.field != tc.field):
			t.Errorf("%s: %s on %q (%v), want %s on %q", tc.name, got.reason, got.field, got, tc.reason, tc.field)
		}
	}
}

// The shared-Provider namespace is the install's setting: a Provider of
// the configured one serves every namespace, one of banlieue-system no
// longer does when the install shares another, and none does when none
// is shared.
func TestAdmitSharedNamespace(t *testing.T) {
	images := []v1alpha1.VMImage{{Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu"}}}}}
	provider := func(ns string) *v1alpha1.Provider {
		return &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns},
			Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "fd", Datacenter: "DC0", Cluster: "C0"}}}}
	}
	for _, tc := range []struct {
		providerNS, shared string
		allowed            bool
	}{
		{"ops", "ops", true},
		{"banlieue-system", "ops", false},
		{"banlieue-system", "banlieue-system", true},
		{"ops", "", false},
		{"team-a", "", true}, // its own namespace's, whatever is shared
	} {
		m := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.VSphereMachineSpec{Datacenter: "DC0", Cluster: "C0", Template: "ubuntu"}}
		p := provider(tc.providerNS)
		r := &MachineReconciler{Kind: vspheremachines.MachineKind()}
		spec, fields := r.machineSpec(m, p)
		got := admit(m, spec, fields, p, tc.shared, "vsphere", images)
		switch {
		case tc.allowed && got != nil:
			t.Errorf("Provider of %s, shared %q: refused: %v", tc.providerNS, tc.shared, got)
		case !tc.allowed && (got == nil || got.reason != ReasonProviderNotAllowed):
			t.Errorf("Provider of %s, shared %q: %v, want %s", tc.providerNS, tc.shared, got, ReasonProviderNotAllowed)
		case !tc.allowed && tc.shared != "" && !strings.Contains(got.message, "only those of "+tc.shared):
			t.Errorf("the refusal does not name the shared namespace %s: %v", tc.shared, got)
		}
	}
}

// One reading of the banlieue.io/provider annotation serves both the
// machine reconciler and the Provider's protection.
func TestAnnotatedProvider(t *testing.T) {
	for _, tc := range []struct {
		annotation string
		want       string
		named      bool
	}{
		{"", "", false},
		{"banlieue-system/prod", "banlieue-system/prod", true},
		{"prod", "team-a/prod", true},
	} {
		vsm := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a"}}
		if tc.annotation != "" {
			vsm.Annotations = map[string]string{infrav1.ProviderAnnotation: tc.annotation}
		}
		key, named := annotatedProvider(vsm)
		if named != tc.named || (named && key.String() != tc.want) {
			t.Errorf("%q: %v %v, want %q %v", tc.annotation, key, named, tc.want, tc.named)
		}
		p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "prod"}}
		if got, want := servedBy(vsm, p), tc.want == "team-a/prod"; named && got != want {
			t.Errorf("%q: servedBy(team-a/prod) = %v, want %v", tc.annotation, got, want)
		}
	}
}

// The same admission for a LibvirtMachine: its failure domain names the
// host, its pools, networks, bridges and image volume must be published,
// and the reasons use libvirt's words.
func TestAdmitLibvirt(t *testing.T) {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "banlieue-system"},
		Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"}, Capabilities: v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Pool: "fast"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{
				{Name: "prod", Target: v1alpha1.NetworkTarget{Network: "default"}}, {Name: "lab", Target: v1alpha1.NetworkTarget{Bridge: "br0"}}},
		}},
		Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "lab-kvm-01", Host: "kvm-01"}}},
	}
	images := []v1alpha1.VMImage{{Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: "Volume", Ref: "images/debian.qcow2"}}}}}
	// An imported image publishes what the provider built of it, and
	// other revisions of it in the same pool (VMs built from them keep
	// them); nothing of another image, nor elsewhere.
	imported := v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian-url", UID: "8d1c5a7e-1111-2222-3333-444455556666"},
		Spec: v1alpha1.VMImageSpec{Import: &v1alpha1.ImageImport{URL: "https://m/x.qcow2", Format: "qcow2"}}}
	built := "fast/" + imgs.ArtifactName(imported.UID, "r2")
	imported.Status.PerProvider = []v1alpha1.ImageProviderStatus{{Provider: "banlieue-system/lab", Ready: true,
		FailureDomains: []v1alpha1.ImageFailureDomainStatus{{Name: "lab-kvm-01", Phase: "Ready", Revision: "r2", Ref: built}}}}
	images = append(images, imported)
	good := func() *infrav1.LibvirtMachine {
		return &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "lab-kvm-01"}, Image: "images/debian.qcow2",
				Disks:   []infrav1.LibvirtDisk{{Name: "root", Pool: "fast"}, {Name: "data"}},
				Network: []infrav1.LibvirtNetworkDevice{{Name: "eth0", Network: "default"}, {Name: "eth1", Bridge: "br0"}}},
		}
	}
	for _, tc := range []struct {
		name          string
		mutate        func(*infrav1.LibvirtMachine)
		reason, field string
	}{
		{"published everything", func(*infrav1.LibvirtMachine) {}, "", ""},
		{"no such failure domain", func(m *infrav1.LibvirtMachine) { m.Spec.FailureDomain = "elsewhere" }, ReasonFailureDomainNotPublished, "spec.failureDomain"},
		{"no failure domain", func(m *infrav1.LibvirtMachine) { m.Spec.FailureDomain = "" }, ReasonFailureDomainNotPublished, "spec.failureDomain"},
		{"pool outside the capabilities", func(m *infrav1.LibvirtMachine) { m.Spec.Disks[1].Pool = "other" }, "PoolNotPublished", "spec.disks[1].pool"},
		{"network outside", func(m *infrav1.LibvirtMachine) { m.Spec.Network[0].Network = "other" }, "NetworkNotPublished", "spec.network[0].network"},
		{"bridge outside", func(m *infrav1.LibvirtMachine) { m.Spec.Network[1].Bridge = "virbr0" }, "NetworkNotPublished", "spec.network[1].bridge"},
		{"a bridge named like a network", func(m *infrav1.LibvirtMachine) { m.Spec.Network[1].Bridge = "default" }, "NetworkNotPublished", "spec.network[1].bridge"},
		{"volume of no image", func(m *infrav1.LibvirtMachine) { m.Spec.Image = "images/someone-elses.qcow2" }, "ImageNotPublished", "spec.image"},
		{"an imported image", func(m *infrav1.LibvirtMachine) { m.Spec.Image = built }, "", ""},
		{"an earlier revision of it", func(m *infrav1.LibvirtMachine) { m.Spec.Image = "fast/" + imgs.ArtifactName(imported.UID, "r1") }, "", ""},
		{"a revision of it in another pool", func(m *infrav1.LibvirtMachine) { m.Spec.Image = "other/" + imgs.ArtifactName(imported.UID, "r1") }, "ImageNotPublished", "spec.image"},
		{"another image's import", func(m *infrav1.LibvirtMachine) {
			m.Spec.Image = "fast/" + imgs.ArtifactName("0000aaaa-1111-2222-3333-444455556666", "r2")
		}, "ImageNotPublished", "spec.image"},
		{"a vTPM, not advertised", func(m *infrav1.LibvirtMachine) { m.Spec.TPMEnabled, m.Spec.Firmware = true, "efi" }, ReasonFeatureNotPublished, "spec.tpmEnabled"},
		{"an amd64 guest", func(m *infrav1.LibvirtMachine) { m.Spec.Architecture = infrav1.ArchitectureAMD64 }, "", ""},
		{"an arm64 guest", func(m *infrav1.LibvirtMachine) { m.Spec.Architecture = infrav1.ArchitectureARM64 }, providers.ReasonArchitectureUnsupported, "spec.architecture"},
	} {
		m := good()
		tc.mutate(m)
		r := &MachineReconciler{Kind: libvirtmachines.MachineKind()}
		spec, fields := r.machineSpec(m, p)
		got := admit(m, spec, fields, p, "banlieue-system", "libvirt", images)
		switch {
		case tc.reason == "" && got != nil:
			t.Errorf("%s: refused: %v", tc.name, got)
		case tc.reason != "" && got == nil:
			t.Errorf("%s: admitted, want %s", tc.name, tc.reason)
		case got != nil && (got.reason != tc.reason || got.field != tc.field):
			t.Errorf("%s: %s on %q (%v), want %s on %q", tc.name, got.reason, got.field, got, tc.reason, tc.field)
		}
	}
}

// TestAdmitProxmoxVLANs: a bridge is published with its VLAN tag; a
// ProxmoxMachine may not tag another VLAN, or none, on it.
func TestAdmitProxmoxVLANs(t *testing.T) {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "pve", Namespace: "banlieue-system"},
		Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"}, Capabilities: v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr1", VLAN: 20}}},
		}},
		Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "pve-pve1", Host: "pve1"}}},
	}
	images := []v1alpha1.VMImage{{Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "debian"}}}}}
	for _, tc := range []struct {
		vlan   int32
		reason string
		bridge string
	}{{20, "", "vmbr1"}, {30, "BridgeNotPublished", "vmbr1"}, {0, "BridgeNotPublished", "vmbr1"},
		// The rogue machine: a VLAN on the template's bridge,
		// whatever that is, was tagged and powered on.
		{99, "BridgeNotPublished", ""},
		{20, "BridgeNotPublished", ""},
		{0, "", ""}, // the template's bridge as it is
	} {
		m := &infrav1.ProxmoxMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.ProxmoxMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "pve-pve1"}, Template: "debian",
				Network: []infrav1.ProxmoxNetworkDevice{{Name: "eth0", Bridge: tc.bridge, VLAN: tc.vlan, DHCP4: true}}},
		}
		r := &MachineReconciler{Kind: proxmoxmachines.MachineKind()}
		spec, fields := r.machineSpec(m, p)
		got := admit(m, spec, fields, p, "banlieue-system", "proxmox", images)
		switch {
		case tc.reason == "" && got != nil:
			t.Errorf("bridge %q vlan %d: refused: %v", tc.bridge, tc.vlan, got)
		case tc.reason != "" && (got == nil || got.reason != tc.reason || got.field != "spec.network[0].bridge"):
			t.Errorf("bridge %q vlan %d: %v, want %s on spec.network[0].bridge", tc.bridge, tc.vlan, got, tc.reason)
		}
	}
}
