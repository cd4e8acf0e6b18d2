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
package resolve

import (
	"errors"
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	. "github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// The seed guide's class and image.
func seedClass() *VMClass {
	return &VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-large"},
		Spec: VMClassSpec{
			Hardware: VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []DiskSpec{
				{Name: "root", SizeGiB: 80, StorageClass: "gold", Provisioning: DiskProvisioningThin},
				{Name: "data", SizeGiB: 500, StorageClass: "gold", Provisioning: DiskProvisioningEagerZeroed},
			}},
			Network: &VMClassNetwork{Interfaces: []NetworkInterfaceSpec{
				{Name: "eth0", NetworkClass: "prod"},
				{Name: "eth1", NetworkClass: "storage", IPAM: IPAMConfig{Pool: &IPPoolReference{Name: "pool-a"}}},
				{Name: "eth2", NetworkClass: "mgmt", IPAM: IPAMConfig{Static: &StaticIPConfig{Address: "10.9.0.5", Prefix: ptr.To[int32](16)}}},
			}},
			Firmware: FirmwareEFISecure,
			Features: []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"},
		},
	}
}

func seedImage() *VMImage {
	return &VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec:       VMImageSpec{OSFamily: "linux", Sources: []ImageSource{{ProviderClass: "vsphere", Kind: ImageSourceTemplate, Ref: "ubuntu-22.04-cloudinit"}}},
	}
}

func vm(mutate func(*VirtualMachineSpec)) *VirtualMachine {
	v := &VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-01", Namespace: "ns", UID: "u1"},
		Spec: VirtualMachineSpec{
			ClassRef: LocalObjectReference{Name: "db-prod-large"}, ImageRef: LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
			DesiredPowerState: PowerStatePoweredOn,
		},
	}
	if mutate != nil {
		mutate(&v.Spec)
	}
	return v
}

func i32(v int32, from Provenance) ResolvedInt32 { return ResolvedInt32{Value: v, From: from} }
func i64(v int64, from Provenance) ResolvedInt64 { return ResolvedInt64{Value: v, From: from} }

var static90 = &StaticIPConfig{Address: "192.0.2.90", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}}

func TestResolveProvenance(t *testing.T) {
	classIfaces := []ResolvedInterface{
		{Name: "eth0", NetworkClass: "prod", Mode: IPAMDHCP, From: ProvenanceDefault},
		{Name: "eth1", NetworkClass: "storage", Mode: IPAMPool, Pool: &IPPoolReference{APIGroup: "infrastructure.banlieue.io", Kind: "IPPool", Name: "pool-a"}, From: ProvenanceClass},
		{Name: "eth2", NetworkClass: "mgmt", Mode: IPAMStatic, Static: &StaticIPConfig{Address: "10.9.0.5", Prefix: ptr.To[int32](16)}, From: ProvenanceClass},
	}
	cases := []struct {
		name       string
		vm         *VirtualMachine
		class      func(*VMClass)
		image      func(*VMImage)
		cpus       ResolvedInt32
		memory     ResolvedInt64
		disks      []ResolvedDisk
		interfaces []ResolvedInterface
		firmware   Firmware
		fwFrom     Provenance
	}{
		{
			name: "no overrides: everything from the class",
			vm:   vm(nil),
			cpus: i32(8, ProvenanceClass), memory: i64(32768, ProvenanceClass),
			disks: []ResolvedDisk{
				{Name: "root", SizeGiB: i64(80, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningThin},
				{Name: "data", SizeGiB: i64(500, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningEagerZeroed},
			},
			interfaces: classIfaces, firmware: FirmwareEFISecure, fwFrom: ProvenanceClass,
		},
		{
			name: "the seed's override example: memory, data disk and eth0 from the override",
			vm: vm(func(s *VirtualMachineSpec) {
				s.HardwareOverride = &HardwareOverride{MemoryMiB: ptr.To[int64](65536), DiskOverrides: []DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}}
				s.NetworkOverrides = []NetworkOverride{{Name: "eth0", Static: static90}}
			}),
			cpus: i32(8, ProvenanceClass), memory: i64(65536, ProvenanceOverride),
			disks: []ResolvedDisk{
				{Name: "root", SizeGiB: i64(80, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningThin},
				{Name: "data", SizeGiB: i64(2000, ProvenanceOverride), StorageClass: "gold", Provisioning: DiskProvisioningEagerZeroed},
			},
			interfaces: append([]ResolvedInterface{{Name: "eth0", NetworkClass: "prod", Mode: IPAMStatic, Static: static90, From: ProvenanceOverride}}, classIfaces[1:]...),
			firmware:   FirmwareEFISecure, fwFrom: ProvenanceClass,
		},
		{
			name: "cpus override; an override beats class static and pool IPAM",
			vm: vm(func(s *VirtualMachineSpec) {
				s.HardwareOverride = &HardwareOverride{CPUs: ptr.To[int32](16)}
				s.NetworkOverrides = []NetworkOverride{{Name: "eth1", Static: static90}, {Name: "eth2", Static: static90}}
			}),
			cpus: i32(16, ProvenanceOverride), memory: i64(32768, ProvenanceClass),
			disks: []ResolvedDisk{
				{Name: "root", SizeGiB: i64(80, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningThin},
				{Name: "data", SizeGiB: i64(500, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningEagerZeroed},
			},
			interfaces: []ResolvedInterface{
				classIfaces[0],
				{Name: "eth1", NetworkClass: "storage", Mode: IPAMStatic, Static: static90, From: ProvenanceOverride},
				{Name: "eth2", NetworkClass: "mgmt", Mode: IPAMStatic, Static: static90, From: ProvenanceOverride},
			},
			firmware: FirmwareEFISecure, fwFrom: ProvenanceClass,
		},
		{
			name: "overrides switch a pool interface to DHCP and a DHCP one to another kind of pool",
			vm: vm(func(s *VirtualMachineSpec) {
				s.NetworkOverrides = []NetworkOverride{{Name: "eth0", Pool: &IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "lab"}}, {Name: "eth1", DHCP: true}}
			}),
			cpus: i32(8, ProvenanceClass), memory: i64(32768, ProvenanceClass),
			disks: []ResolvedDisk{
				{Name: "root", SizeGiB: i64(80, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningThin},
				{Name: "data", SizeGiB: i64(500, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningEagerZeroed},
			},
			interfaces: []ResolvedInterface{
				{Name: "eth0", NetworkClass: "prod", Mode: IPAMPool, Pool: &IPPoolReference{APIGroup: "ipam.cluster.x-k8s.io", Kind: "InClusterIPPool", Name: "lab"}, From: ProvenanceOverride},
				{Name: "eth1", NetworkClass: "storage", Mode: IPAMDHCP, From: ProvenanceOverride},
				classIfaces[2],
			},
			firmware: FirmwareEFISecure, fwFrom: ProvenanceClass,
		},
		{
			name: "class without firmware, provisioning or network gets defaults",
			vm:   vm(nil),
			class: func(c *VMClass) {
				c.Spec.Firmware = ""
				c.Spec.Network = nil
				c.Spec.Hardware.Disks = []DiskSpec{{Name: "root", SizeGiB: 10}}
			},
			cpus: i32(8, ProvenanceClass), memory: i64(32768, ProvenanceClass),
			disks: []ResolvedDisk{{Name: "root", SizeGiB: i64(10, ProvenanceClass), Provisioning: DiskProvisioningThin}},
			// No firmware from anywhere: the backend keeps the template's.
			firmware: "", fwFrom: ProvenanceDefault,
		},
		{
			name:  "class without firmware takes the image template's",
			vm:    vm(nil),
			class: func(c *VMClass) { c.Spec.Firmware = "" },
			image: func(i *VMImage) { i.Spec.Template = &ImageTemplate{Firmware: FirmwareEFI} },
			cpus:  i32(8, ProvenanceClass), memory: i64(32768, ProvenanceClass),
			disks: []ResolvedDisk{
				{Name: "root", SizeGiB: i64(80, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningThin},
				{Name: "data", SizeGiB: i64(500, ProvenanceClass), StorageClass: "gold", Provisioning: DiskProvisioningEagerZeroed},
			},
			interfaces: classIfaces,
			firmware:   FirmwareEFI, fwFrom: ProvenanceImage,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			class := seedClass()
			if tc.class != nil {
				tc.class(class)
			}
			image := seedImage()
			if tc.image != nil {
				tc.image(image)
			}
			before := tc.vm.DeepCopy()
			r, err := Resolve(tc.vm, class, image)
			if err != nil {
				t.Fatal(err)
			}
			s := r.Spec
			check := func(what string, got, want interface{}) {
				t.Helper()
				if !apiequality.Semantic.DeepEqual(got, want) {
					t.Errorf("%s:\n%s", what, diff.Diff(want, got))
				}
			}
			check("cpus", s.CPUs, tc.cpus)
			check("memory", s.MemoryMiB, tc.memory)
			check("disks", s.Disks, tc.disks)
			check("interfaces", s.Interfaces, tc.interfaces)
			check("firmware", []interface{}{s.Firmware, s.FirmwareFrom}, []interface{}{tc.firmware, tc.fwFrom})
			check("class name", s.Class, "db-prod-large")
			check("image", s.Image.Sources[0].Ref, "ubuntu-22.04-cloudinit")
			check("install mode", s.Image.InstallMode, InstallModeImmediate)
			check("metadata", []interface{}{r.Name, r.Namespace, r.UID}, []interface{}{"db-prod-01", "ns", tc.vm.UID})
			check("input untouched", tc.vm, before)
			// The result shares no memory with the inputs.
			if len(s.Interfaces) > 0 && s.Interfaces[0].Static != nil {
				s.Interfaces[0].Static.Address = "mutated"
				check("input aliasing", tc.vm, before)
			}
		})
	}
}

func TestResolveRejectsUnknownOverrides(t *testing.T) {
	v := vm(func(s *VirtualMachineSpec) {
		s.HardwareOverride = &HardwareOverride{DiskOverrides: []DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](1)}, {Name: "scratch", SizeGiB: ptr.To[int64](1)}}}
		s.NetworkOverrides = []NetworkOverride{{Name: "eth9", Static: static90}}
	})
	_, err := Resolve(v, seedClass(), seedImage())
	var oe *OverrideError
	if !errors.As(err, &oe) {
		t.Fatalf("err = %v, want *OverrideError", err)
	}
	var paths []string
	for _, e := range oe.Errors {
		paths = append(paths, e.Field)
	}
	want := []string{"spec.hardwareOverride.diskOverrides[1].name", "spec.networkOverrides[0].name"}
	if !apiequality.Semantic.DeepEqual(paths, want) {
		t.Errorf("paths = %v, want %v", paths, want)
	}
}

func TestResolveImageAndVMFields(t *testing.T) {
	img := seedImage()
	img.Spec.Template = &ImageTemplate{InstallMode: InstallModeDeferred}
	img.Spec.OSDistribution, img.Spec.OSVersion, img.Spec.Architecture = "ubuntu", "22.04", "amd64"
	v := vm(func(s *VirtualMachineSpec) {
		s.DesiredPowerState = ""
		s.UserData = &UserData{ConfigMapRef: &KeySelector{Name: "cm", Key: "user-data"}}
		s.Placement = &Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": "dc1"}}}
	})
	class := seedClass()
	class.Spec.TPMEnabled = true
	r, err := Resolve(v, class, img)
	if err != nil {
		t.Fatal(err)
	}
	if r.Spec.Image.InstallMode != InstallModeDeferred || r.Spec.PowerState != PowerStatePoweredOn || !r.Spec.TPMEnabled ||
		r.Spec.UserData.ConfigMapRef.Name != "cm" || r.Spec.Placement.ProviderSelector.MatchLabels["dc"] != "dc1" ||
		len(r.Spec.Features) != 3 {
		t.Errorf("resolved = %+v", r.Spec)
	}
	// The image's guest OS and architecture, as the image says them.
	if i := r.Spec.Image; i.OSFamily != "linux" || i.OSDistribution != "ubuntu" || i.OSVersion != "22.04" || i.Architecture != "amd64" {
		t.Errorf("resolved image = %+v", i)
	}
}
