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
package machinespec

import (
	"strings"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// TestBuildSpec: the seed's override example on the seed's Provider becomes
// the VSphereMachine the provider needs.
func TestBuildSpec(t *testing.T) {
	class := &v1alpha1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-large"},
		Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []v1alpha1.DiskSpec{
				{Name: "root", SizeGiB: 80, StorageClass: "gold", Provisioning: "thin"},
				{Name: "data", SizeGiB: 500, StorageClass: "gold", Provisioning: "eagerZeroed"},
			}},
			Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}, {Name: "eth1", NetworkClass: "prod"}}},
			Firmware: "efi-secure",
		},
	}
	image := &v1alpha1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec: v1alpha1.VMImageSpec{OSFamily: "linux", OSDistribution: "ubuntu", OSVersion: "22.04", Architecture: "x86_64", Sources: []v1alpha1.ImageSource{
			{ProviderClass: "proxmox", Kind: "Template", Ref: "9000"},
			{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"},
		}},
	}
	vm := &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-02", Namespace: "ns"},
		Spec: v1alpha1.VirtualMachineSpec{
			DesiredPowerState: v1alpha1.PowerStatePoweredOff,
			PowerOffMode:      v1alpha1.PowerOffModeSoft, PowerOffGraceSeconds: ptr.To[int32](30),
			UserData:         &v1alpha1.UserData{SecretRef: &v1alpha1.KeySelector{Name: "ci", Key: "user-data"}},
			HardwareOverride: &v1alpha1.HardwareOverride{MemoryMiB: ptr.To[int64](65536), DiskOverrides: []v1alpha1.DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: "192.0.2.90", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}}}},
		},
		Status: v1alpha1.VirtualMachineStatus{Scheduled: &v1alpha1.ScheduledPlacement{
			Provider: "prod-vsphere", FailureDomain: "fd-east",
			Storage: []v1alpha1.StorageResolution{{Name: "root", Target: "ds-fast-01"}, {Name: "data", Target: "ds-fast-02"}},
			Network: []v1alpha1.NetworkResolution{{Name: "eth0", Target: "vmnet-prod"}, {Name: "eth1", Target: "vmnet-prod"}},
		}},
	}
	provider := &v1alpha1.Provider{
		Spec:   v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"}},
		Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "fd-west", Datacenter: "DC-W", Cluster: "C-W"}, {Name: "fd-east", Datacenter: "DC-E", Cluster: "C-E"}}},
	}
	r, err := resolve.Resolve(vm, class, image)
	if err != nil {
		t.Fatal(err)
	}
	got, err := BuildSpec(vm, r, provider)
	if err != nil {
		t.Fatal(err)
	}
	want := infrav1.VSphereMachineSpec{
		CommonMachineSpec: infrav1.CommonMachineSpec{
			FailureDomain: "fd-east", HostName: "db-prod-02", CPUs: 8, MemoryMiB: 65536, Firmware: "efi-secure", PowerState: infrav1.PowerStatePoweredOff,
			PowerOffMode: infrav1.PowerOffModeSoft, PowerOffGraceSeconds: ptr.To[int32](30),
			UserDataSecretRef: &infrav1.SecretKeyReference{Name: "ci", Key: "user-data"},
			GuestOS:           &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "ubuntu", Version: "22.04"},
			Architecture:      infrav1.ArchitectureAMD64,
		},
		Template: "ubuntu-22.04-cloudinit", Datacenter: "DC-E", Cluster: "C-E",
		Disks: []infrav1.VSphereDisk{
			{Name: "root", SizeGiB: 80, Provisioning: "thin", Datastore: "ds-fast-01"},
			{Name: "data", SizeGiB: 2000, Provisioning: "eagerZeroed", Datastore: "ds-fast-02"},
		},
		Network: []infrav1.VSphereNetworkDevice{
			{Name: "eth0", PortGroup: "vmnet-prod", Static: &infrav1.StaticIP{Address: "192.0.2.90", Prefix: 24, Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}}},
			{Name: "eth1", PortGroup: "vmnet-prod", DHCP4: true},
		},
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("spec differs:\n%s", diff.Diff(want, got))
	}

	// An arm64 image is refused by name before anything is built.
	r.Spec.Image.Architecture = "arm64"
	if _, err := BuildSpec(vm, r, provider); err == nil || !strings.Contains(err.Error(), "spec.image.architecture") {
		t.Errorf("an arm64 image: %v", err)
	}
	r.Spec.Image.Architecture = "amd64"

	provider.Spec.ProviderClassRef.Name = "libvirt"
	if _, err := BuildSpec(vm, r, provider); err == nil {
		t.Error("an image without a source for the provider class built a spec")
	}
}

// TestMachineSpecArchitecture: a VSphereMachine written for another
// architecture than x86-64 (by hand, by Cluster API) is refused by the
// provider's admission on spec.architecture.
func TestMachineSpecArchitecture(t *testing.T) {
	m := &infrav1.VSphereMachine{Spec: infrav1.VSphereMachineSpec{Template: "t", CommonMachineSpec: infrav1.CommonMachineSpec{
		GuestOS: &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux}}}}
	for arch, refused := range map[infrav1.Architecture]bool{"": false, infrav1.ArchitectureAMD64: false, infrav1.ArchitectureARM64: true} {
		m.Spec.Architecture = arch
		_, fields := machineSpec(m, v1alpha1.FailureDomain{})
		got := len(fields.Invalid) > 0 && fields.Invalid[0].Field == "spec.architecture" && fields.Invalid[0].Reason == "ArchitectureUnsupported"
		if got != refused {
			t.Errorf("architecture %q: invalid %+v, want refused %v", arch, fields.Invalid, refused)
		}
	}
}

// The core's annotation and the API's are one.
func TestProviderAnnotation(t *testing.T) {
	if infrastructure.ProviderAnnotation != infrav1.ProviderAnnotation {
		t.Errorf("%q != %q", infrastructure.ProviderAnnotation, infrav1.ProviderAnnotation)
	}
}
