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
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// The seed's override example on a libvirt Provider: pools per disk, one
// interface on a libvirt network and one on a host bridge.
func TestBuildSpec(t *testing.T) {
	class := &v1alpha1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-large"},
		Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []v1alpha1.DiskSpec{
				{Name: "root", SizeGiB: 80, StorageClass: "gold", Provisioning: "thin"},
				{Name: "data", SizeGiB: 500, StorageClass: "bulk", Provisioning: "eagerZeroed"},
			}},
			Network: &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}, {Name: "eth1", NetworkClass: "lab"}}},
		},
	}
	image := &v1alpha1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "debian"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{
			{ProviderClass: "vsphere", Kind: "Template", Ref: "debian-12"},
			{ProviderClass: "libvirt", Kind: "Volume", Ref: "images/debian-12.qcow2"},
		}},
	}
	vm := &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-02", Namespace: "ns"},
		Spec: v1alpha1.VirtualMachineSpec{
			HardwareOverride: &v1alpha1.HardwareOverride{MemoryMiB: ptr.To[int64](65536), DiskOverrides: []v1alpha1.DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: "192.0.2.90", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}},
		},
		Status: v1alpha1.VirtualMachineStatus{Scheduled: &v1alpha1.ScheduledPlacement{
			Provider: "lab-libvirt", FailureDomain: "lab-kvm-01",
			Storage: []v1alpha1.StorageResolution{{Name: "root", Target: "fast"}, {Name: "data", Target: "bulk"}},
			Network: []v1alpha1.NetworkResolution{{Name: "eth0", Target: "banlieue"}, {Name: "eth1", Target: "br-lab"}},
		}},
	}
	provider := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-libvirt"},
		Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"},
			Capabilities: v1alpha1.ProviderCapabilities{NetworkClasses: []v1alpha1.NetworkClassCapability{
				{Name: "prod", Target: v1alpha1.NetworkTarget{Network: "banlieue"}},
				{Name: "lab", Target: v1alpha1.NetworkTarget{Bridge: "br-lab"}},
			}}},
		Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "lab-kvm-01", Host: "kvm-01"}}},
	}
	r, err := resolve.Resolve(vm, class, image)
	if err != nil {
		t.Fatal(err)
	}
	got, err := BuildSpec(vm, r, provider)
	if err != nil {
		t.Fatal(err)
	}
	want := infrav1.LibvirtMachineSpec{
		CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "lab-kvm-01", HostName: "db-prod-02", CPUs: 8, MemoryMiB: 65536, PowerState: infrav1.PowerStatePoweredOn},
		Image:             "images/debian-12.qcow2",
		Disks: []infrav1.LibvirtDisk{
			{Name: "root", SizeGiB: 80, Provisioning: "thin", Pool: "fast"},
			{Name: "data", SizeGiB: 2000, Provisioning: "eagerZeroed", Pool: "bulk"},
		},
		Network: []infrav1.LibvirtNetworkDevice{
			{Name: "eth0", Network: "banlieue", Static: &infrav1.StaticIP{Address: "192.0.2.90", Prefix: 24, Gateway: "192.0.2.1"}},
			{Name: "eth1", Bridge: "br-lab", DHCP4: true},
		},
	}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("spec differs:\n%s", diff.Diff(want, got))
	}

	// What the provider builds of it, and where a refusal would point.
	m := &infrav1.LibvirtMachine{Spec: got}
	spec, fields := machineSpec(m, provider.Status.FailureDomains[0])
	if spec.Location.Host != "kvm-01" || spec.Image != want.Image || len(spec.Disks) != 2 || spec.Disks[1].Target != "bulk" ||
		spec.NICs[0].Network != "banlieue" || spec.NICs[1].Bridge != "br-lab" || spec.NICs[0].Static == nil {
		t.Errorf("machine spec %+v", spec)
	}
	if fields.Disk(1) != "spec.disks[1].pool" || fields.NIC(0) != "spec.network[0].network" || fields.NIC(1) != "spec.network[1].bridge" {
		t.Errorf("fields %s %s %s", fields.Disk(1), fields.NIC(0), fields.NIC(1))
	}

	provider.Spec.Capabilities.NetworkClasses = provider.Spec.Capabilities.NetworkClasses[:1]
	if _, err := BuildSpec(vm, r, provider); err == nil {
		t.Error("an interface whose network class the Provider lacks built a spec")
	}

	// An interface without a network class is on libvirt's default network.
	class.Spec.Network.Interfaces = append(class.Spec.Network.Interfaces[:1], v1alpha1.NetworkInterfaceSpec{Name: "eth1"})
	if r, err = resolve.Resolve(vm, class, image); err != nil {
		t.Fatal(err)
	}
	if got, err = BuildSpec(vm, r, provider); err != nil {
		t.Fatal(err)
	}
	if n := got.Network[1]; n.Network != "" || n.Bridge != "" || !n.DHCP4 {
		t.Errorf("interface without a network class: %+v", n)
	}
	if spec, _ := machineSpec(&infrav1.LibvirtMachine{Spec: got}, provider.Status.FailureDomains[0]); spec.NICs[1].Network != DefaultNetwork {
		t.Errorf("the backend puts it on %q, want %q", spec.NICs[1].Network, DefaultNetwork)
	}
}

func TestCredentials(t *testing.T) {
	if c, err := Credentials(&corev1.Secret{}); err != nil || c.ClientCertificate != nil {
		t.Errorf("no Secret (a local socket): %+v, %v", c, err)
	}
	named := metav1.ObjectMeta{Name: "lab-tls"}
	if _, err := Credentials(&corev1.Secret{ObjectMeta: named, Data: map[string][]byte{"tls.crt": []byte("x")}}); err == nil {
		t.Error("a Secret without tls.key was accepted")
	}
	c, err := Credentials(&corev1.Secret{ObjectMeta: named, Data: map[string][]byte{"tls.crt": []byte("c"), "tls.key": []byte("k")}})
	if err != nil || string(c.ClientCertificate) != "c" || string(c.ClientKey) != "k" {
		t.Errorf("%+v, %v", c, err)
	}
}
