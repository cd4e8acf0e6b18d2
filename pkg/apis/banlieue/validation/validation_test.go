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

package validation

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// want is one expected error: its type and exact field path.
type want struct {
	typ  field.ErrorType
	path string
}

func (w want) String() string { return fmt.Sprintf("%s %s", w.typ, w.path) }

// check asserts errs is exactly the wanted set (order ignored).
func check(t *testing.T, errs field.ErrorList, wants ...want) {
	t.Helper()
	var got []string
	for _, e := range errs {
		got = append(got, want{e.Type, e.Field}.String())
	}
	var exp []string
	for _, w := range wants {
		exp = append(exp, w.String())
	}
	if strings.Join(sorted(got), "; ") != strings.Join(sorted(exp), "; ") {
		t.Errorf("errors:\n got  %v\n want %v\n (%v)", got, exp, errs)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := range out {
		for j := i + 1; j < len(out); j++ {
			if out[j] < out[i] {
				out[i], out[j] = out[j], out[i]
			}
		}
	}
	return out
}

func validVM() *banlieue.VirtualMachine {
	return &banlieue.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-01", Namespace: "ns"},
		Spec: banlieue.VirtualMachineSpec{
			ClassRef:          banlieue.LocalObjectReference{Name: "db-prod-large"},
			ImageRef:          banlieue.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
			DesiredPowerState: banlieue.PowerStatePoweredOn,
			Placement: &banlieue.Placement{ProviderSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"dc": "dc1"}}},
			UserData: &banlieue.UserData{SecretRef: &banlieue.KeySelector{Name: "cloudinit", Key: "user-data"}},
			HardwareOverride: &banlieue.HardwareOverride{
				CPUs: ptr.To[int32](16), MemoryMiB: ptr.To[int64](65536),
				DiskOverrides: []banlieue.DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}},
			},
			NetworkOverrides: []banlieue.NetworkOverride{{Name: "eth0", Static: &banlieue.StaticIPConfig{
				Address: "192.0.2.90", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"},
			}}},
		},
	}
}

func TestValidateVirtualMachine(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*banlieue.VirtualMachine)
		want   []want
	}{
		{"valid", func(*banlieue.VirtualMachine) {}, nil},
		{"bad name", func(vm *banlieue.VirtualMachine) { vm.Name = "DB_01" }, []want{{field.ErrorTypeInvalid, "metadata.name"}}},
		{"missing classRef", func(vm *banlieue.VirtualMachine) { vm.Spec.ClassRef.Name = "" }, []want{{field.ErrorTypeRequired, "spec.classRef.name"}}},
		{"bad imageRef", func(vm *banlieue.VirtualMachine) { vm.Spec.ImageRef.Name = "Ubuntu!" }, []want{{field.ErrorTypeInvalid, "spec.imageRef.name"}}},
		{"unknown power state", func(vm *banlieue.VirtualMachine) { vm.Spec.DesiredPowerState = "Hibernating" }, []want{{field.ErrorTypeNotSupported, "spec.desiredPowerState"}}},
		{"soft power-off with a grace", func(vm *banlieue.VirtualMachine) {
			vm.Spec.PowerOffMode, vm.Spec.PowerOffGraceSeconds = banlieue.PowerOffModeTrySoft, ptr.To[int32](30)
		}, nil},
		{"unknown power-off mode", func(vm *banlieue.VirtualMachine) { vm.Spec.PowerOffMode = "Gentle" }, []want{{field.ErrorTypeNotSupported, "spec.powerOffMode"}}},
		{"negative grace", func(vm *banlieue.VirtualMachine) { vm.Spec.PowerOffGraceSeconds = ptr.To[int32](-1) }, []want{{field.ErrorTypeInvalid, "spec.powerOffGraceSeconds"}}},
		{"grace over an hour", func(vm *banlieue.VirtualMachine) { vm.Spec.PowerOffGraceSeconds = ptr.To[int32](3601) }, []want{{field.ErrorTypeInvalid, "spec.powerOffGraceSeconds"}}},
		{"migration timeout", func(vm *banlieue.VirtualMachine) { vm.Spec.MigrationTimeoutSeconds = ptr.To[int32](60) }, nil},
		{"zero migration timeout", func(vm *banlieue.VirtualMachine) { vm.Spec.MigrationTimeoutSeconds = ptr.To[int32](0) }, []want{{field.ErrorTypeInvalid, "spec.migrationTimeoutSeconds"}}},
		{"negative migration timeout", func(vm *banlieue.VirtualMachine) { vm.Spec.MigrationTimeoutSeconds = ptr.To[int32](-5) }, []want{{field.ErrorTypeInvalid, "spec.migrationTimeoutSeconds"}}},
		{"anti-affinity", func(vm *banlieue.VirtualMachine) {
			vm.Spec.Placement.AntiAffinity = []banlieue.AntiAffinityTerm{
				{TopologyKey: "failureDomain", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Mode: "required"},
				{TopologyKey: "provider", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "db"}}, Mode: "preferred"},
			}
		}, nil},
		{"anti-affinity mistakes", func(vm *banlieue.VirtualMachine) {
			vm.Spec.Placement.AntiAffinity = []banlieue.AntiAffinityTerm{
				{TopologyKey: "rack", LabelSelector: &metav1.LabelSelector{}, Mode: "sometimes"},
				{TopologyKey: "provider"},
			}
		}, []want{{field.ErrorTypeNotSupported, "spec.placement.antiAffinity[0].topologyKey"}, {field.ErrorTypeNotSupported, "spec.placement.antiAffinity[0].mode"},
			{field.ErrorTypeRequired, "spec.placement.antiAffinity[1].labelSelector"}}},
		{"invalid selector", func(vm *banlieue.VirtualMachine) {
			vm.Spec.Placement.FailureDomainSelector = &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "name", Operator: "Near"}}}
		}, []want{{field.ErrorTypeInvalid, "spec.placement.failureDomainSelector.matchExpressions[0].operator"}}},
		{"userData both refs", func(vm *banlieue.VirtualMachine) {
			vm.Spec.UserData.ConfigMapRef = &banlieue.KeySelector{Name: "cm", Key: "user-data"}
		}, []want{{field.ErrorTypeInvalid, "spec.userData"}}},
		{"userData neither ref", func(vm *banlieue.VirtualMachine) { vm.Spec.UserData.SecretRef = nil }, []want{{field.ErrorTypeRequired, "spec.userData"}}},
		{"userData bad key", func(vm *banlieue.VirtualMachine) { vm.Spec.UserData.SecretRef.Key = "a/b" }, []want{{field.ErrorTypeInvalid, "spec.userData.secretRef.key"}}},
		{"cpus zero", func(vm *banlieue.VirtualMachine) { vm.Spec.HardwareOverride.CPUs = ptr.To[int32](0) }, []want{{field.ErrorTypeInvalid, "spec.hardwareOverride.cpus"}}},
		{"memory negative", func(vm *banlieue.VirtualMachine) { vm.Spec.HardwareOverride.MemoryMiB = ptr.To[int64](-1) }, []want{{field.ErrorTypeInvalid, "spec.hardwareOverride.memoryMiB"}}},
		{"disk size zero", func(vm *banlieue.VirtualMachine) {
			vm.Spec.HardwareOverride.DiskOverrides[0].SizeGiB = ptr.To[int64](0)
		}, []want{{field.ErrorTypeInvalid, "spec.hardwareOverride.diskOverrides[0].sizeGiB"}}},
		{"duplicate disk override", func(vm *banlieue.VirtualMachine) {
			o := vm.Spec.HardwareOverride
			o.DiskOverrides = append(o.DiskOverrides, o.DiskOverrides[0])
		}, []want{{field.ErrorTypeDuplicate, "spec.hardwareOverride.diskOverrides[1].name"}}},
		{"duplicate network override", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides = append(vm.Spec.NetworkOverrides, vm.Spec.NetworkOverrides[0])
		}, []want{{field.ErrorTypeDuplicate, "spec.networkOverrides[1].name"}}},
		{"bad address", func(vm *banlieue.VirtualMachine) { vm.Spec.NetworkOverrides[0].Static.Address = "192.0.2.300" }, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].static.address"}}},
		{"override to DHCP", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0] = banlieue.NetworkOverride{Name: "eth0", DHCP: true}
		}, nil},
		{"override to a pool", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0] = banlieue.NetworkOverride{Name: "eth0", Pool: &banlieue.IPPoolReference{Name: "lab", Kind: "InClusterIPPool", APIGroup: "ipam.cluster.x-k8s.io"}}
		}, nil},
		{"override to DHCP and a pool", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0] = banlieue.NetworkOverride{Name: "eth0", DHCP: true, Pool: &banlieue.IPPoolReference{Name: "lab"}}
		}, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0]"}}},
		{"override pool of a bad kind", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0] = banlieue.NetworkOverride{Name: "eth0", Pool: &banlieue.IPPoolReference{Name: "lab", Kind: "ip pool"}}
		}, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].pool.kind"}}},
		{"missing prefix", func(vm *banlieue.VirtualMachine) { vm.Spec.NetworkOverrides[0].Static.Prefix = nil }, []want{{field.ErrorTypeRequired, "spec.networkOverrides[0].static.prefix"}}},
		{"v4 prefix too long", func(vm *banlieue.VirtualMachine) { vm.Spec.NetworkOverrides[0].Static.Prefix = ptr.To[int32](33) }, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].static.prefix"}}},
		{"v6 prefix in range", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0].Static = &banlieue.StaticIPConfig{Address: "2001:db8::10", Prefix: ptr.To[int32](64), Gateway: "2001:db8::1"}
		}, nil},
		{"v6 prefix too long", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0].Static = &banlieue.StaticIPConfig{Address: "2001:db8::10", Prefix: ptr.To[int32](129)}
		}, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].static.prefix"}}},
		{"gateway outside prefix", func(vm *banlieue.VirtualMachine) { vm.Spec.NetworkOverrides[0].Static.Gateway = "198.51.100.1" }, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].static.gateway"}}},
		{"gateway other family", func(vm *banlieue.VirtualMachine) { vm.Spec.NetworkOverrides[0].Static.Gateway = "2001:db8::1" }, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].static.gateway"}}},
		{"bad nameserver", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0].Static.Nameservers = []string{"dns.example"}
		}, []want{{field.ErrorTypeInvalid, "spec.networkOverrides[0].static.nameservers[0]"}}},
		{"too many nameservers", func(vm *banlieue.VirtualMachine) {
			vm.Spec.NetworkOverrides[0].Static.Nameservers = strings.Split(strings.Repeat("192.0.2.53,", MaxNameservers)+"192.0.2.54", ",")
		}, []want{{field.ErrorTypeTooMany, "spec.networkOverrides[0].static.nameservers"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			vm := validVM()
			tc.mutate(vm)
			check(t, ValidateVirtualMachine(vm), tc.want...)
		})
	}
}

func TestValidateVirtualMachineUpdate(t *testing.T) {
	scheduled := func(vm *banlieue.VirtualMachine) {
		vm.Status.Scheduled = &banlieue.ScheduledPlacement{Provider: "p"}
	}
	cases := []struct {
		name   string
		old    func(*banlieue.VirtualMachine)
		mutate func(*banlieue.VirtualMachine)
		want   []want
	}{
		{"power state may change", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.DesiredPowerState = banlieue.PowerStateSuspended }, nil},
		{"classRef immutable", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.ClassRef.Name = "other" }, []want{{field.ErrorTypeInvalid, "spec.classRef"}}},
		{"imageRef immutable", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.ImageRef.Name = "other" }, []want{{field.ErrorTypeInvalid, "spec.imageRef"}}},
		{"userData immutable", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.UserData.SecretRef.Name = "other" }, []want{{field.ErrorTypeInvalid, "spec.userData"}}},
		{"placement mutable before scheduling", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.Placement = nil }, nil},
		{"placement changes once scheduled (a migration)", scheduled, func(vm *banlieue.VirtualMachine) { vm.Spec.Placement = nil }, nil},
		{"unknown migration policy", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.MigrationPolicy = "Sometimes" }, []want{{field.ErrorTypeNotSupported, "spec.migrationPolicy"}}},
		{"network overrides frozen once scheduled", scheduled, func(vm *banlieue.VirtualMachine) { vm.Spec.NetworkOverrides = nil }, []want{{field.ErrorTypeForbidden, "spec.networkOverrides"}}},
		{"disk may grow", nil, func(vm *banlieue.VirtualMachine) {
			vm.Spec.HardwareOverride.DiskOverrides[0].SizeGiB = ptr.To[int64](3000)
		}, nil},
		{"disk may not shrink", nil, func(vm *banlieue.VirtualMachine) {
			vm.Spec.HardwareOverride.DiskOverrides[0].SizeGiB = ptr.To[int64](10)
		}, []want{{field.ErrorTypeForbidden, "spec.hardwareOverride.diskOverrides[data].sizeGiB"}}},
		{"disk override may not be removed", nil, func(vm *banlieue.VirtualMachine) { vm.Spec.HardwareOverride = nil }, []want{{field.ErrorTypeForbidden, "spec.hardwareOverride.diskOverrides"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			old := validVM()
			old.ResourceVersion = "1"
			if tc.old != nil {
				tc.old(old)
			}
			vm := old.DeepCopy()
			tc.mutate(vm)
			check(t, ValidateVirtualMachineUpdate(vm, old), tc.want...)
		})
	}
}

func TestValidateVirtualMachineStatusUpdate(t *testing.T) {
	old := validVM()
	old.ResourceVersion = "1"
	vm := old.DeepCopy()
	vm.Status = banlieue.VirtualMachineStatus{
		ObservedGeneration: -1,
		Conditions: []metav1.Condition{
			{Type: "Ready", Status: "Maybe", Reason: "x", LastTransitionTime: metav1.Now()},
			{Type: "Ready", Status: "True", Reason: "Up", LastTransitionTime: metav1.Now()},
		},
		PowerState: "Off",
		Addresses:  []banlieue.MachineAddress{{Type: "Public", Address: "192.0.2.1"}},
		Scheduled:  &banlieue.ScheduledPlacement{Storage: []banlieue.StorageResolution{{Name: "root"}, {Name: "root"}}},
	}
	check(t, ValidateVirtualMachineStatusUpdate(vm, old),
		want{field.ErrorTypeInvalid, "status.observedGeneration"},
		want{field.ErrorTypeNotSupported, "status.conditions[0].status"},
		want{field.ErrorTypeDuplicate, "status.conditions[1].type"},
		want{field.ErrorTypeNotSupported, "status.powerState"},
		want{field.ErrorTypeNotSupported, "status.addresses[0].type"},
		want{field.ErrorTypeRequired, "status.scheduled.provider"},
		want{field.ErrorTypeDuplicate, "status.scheduled.storage[1].name"},
	)
}

func validClass() *banlieue.VMClass {
	return &banlieue.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "db-prod-large"},
		Spec: banlieue.VMClassSpec{
			Hardware: banlieue.VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []banlieue.DiskSpec{
				{Name: "root", SizeGiB: 80, StorageClass: "gold", Provisioning: banlieue.DiskProvisioningThin},
				{Name: "data", SizeGiB: 500, StorageClass: "gold", Provisioning: banlieue.DiskProvisioningEagerZeroed},
			}},
			Network:  &banlieue.VMClassNetwork{Interfaces: []banlieue.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
			Firmware: banlieue.FirmwareEFISecure,
			Features: []string{"hotAddCPU", "efiSecureBoot"},
		},
	}
}

func TestValidateVMClass(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*banlieue.VMClass)
		want   []want
	}{
		{"valid", func(*banlieue.VMClass) {}, nil},
		{"namespaced", func(c *banlieue.VMClass) { c.Namespace = "ns" }, []want{{field.ErrorTypeForbidden, "metadata.namespace"}}},
		{"cpus zero", func(c *banlieue.VMClass) { c.Spec.Hardware.CPUs = 0 }, []want{{field.ErrorTypeInvalid, "spec.hardware.cpus"}}},
		{"memory zero", func(c *banlieue.VMClass) { c.Spec.Hardware.MemoryMiB = 0 }, []want{{field.ErrorTypeInvalid, "spec.hardware.memoryMiB"}}},
		{"disk size negative", func(c *banlieue.VMClass) { c.Spec.Hardware.Disks[1].SizeGiB = -5 }, []want{{field.ErrorTypeInvalid, "spec.hardware.disks[1].sizeGiB"}}},
		{"duplicate disk", func(c *banlieue.VMClass) { c.Spec.Hardware.Disks[1].Name = "root" }, []want{{field.ErrorTypeDuplicate, "spec.hardware.disks[1].name"}}},
		{"bad disk name", func(c *banlieue.VMClass) { c.Spec.Hardware.Disks[1].Name = "Data Disk" }, []want{{field.ErrorTypeInvalid, "spec.hardware.disks[1].name"}}},
		{"unknown provisioning", func(c *banlieue.VMClass) { c.Spec.Hardware.Disks[0].Provisioning = "lazy" }, []want{{field.ErrorTypeNotSupported, "spec.hardware.disks[0].provisioning"}}},
		{"bad storage class", func(c *banlieue.VMClass) { c.Spec.Hardware.Disks[0].StorageClass = "Gold!" }, []want{{field.ErrorTypeInvalid, "spec.hardware.disks[0].storageClass"}}},
		{"too many disks", func(c *banlieue.VMClass) {
			c.Spec.Hardware.Disks = nil
			for i := 0; i <= MaxDisks; i++ {
				c.Spec.Hardware.Disks = append(c.Spec.Hardware.Disks, banlieue.DiskSpec{Name: fmt.Sprintf("d%d", i), SizeGiB: 1, Provisioning: "thin"})
			}
		}, []want{{field.ErrorTypeTooMany, "spec.hardware.disks"}}},
		{"duplicate interface", func(c *banlieue.VMClass) {
			c.Spec.Network.Interfaces = append(c.Spec.Network.Interfaces, c.Spec.Network.Interfaces[0])
		}, []want{{field.ErrorTypeDuplicate, "spec.network.interfaces[1].name"}}},
		{"static and pool", func(c *banlieue.VMClass) {
			c.Spec.Network.Interfaces[0].IPAM = banlieue.IPAMConfig{
				Static: &banlieue.StaticIPConfig{Address: "10.0.0.5", Prefix: ptr.To[int32](24)},
				Pool:   &banlieue.IPPoolReference{Name: "pool-a"},
			}
		}, []want{{field.ErrorTypeInvalid, "spec.network.interfaces[0].ipam"}}},
		{"class static gateway outside", func(c *banlieue.VMClass) {
			c.Spec.Network.Interfaces[0].IPAM.Static = &banlieue.StaticIPConfig{Address: "10.0.0.5", Prefix: ptr.To[int32](24), Gateway: "10.0.1.1"}
		}, []want{{field.ErrorTypeInvalid, "spec.network.interfaces[0].ipam.static.gateway"}}},
		{"unknown firmware", func(c *banlieue.VMClass) { c.Spec.Firmware = "uefi" }, []want{{field.ErrorTypeNotSupported, "spec.firmware"}}},
		{"duplicate feature", func(c *banlieue.VMClass) { c.Spec.Features = []string{"vtpm", "vtpm"} }, []want{{field.ErrorTypeDuplicate, "spec.features[1]"}}},
		{"bad feature", func(c *banlieue.VMClass) { c.Spec.Features = []string{"hot add"} }, []want{{field.ErrorTypeInvalid, "spec.features[0]"}}},
		{"tpm needs efi", func(c *banlieue.VMClass) { c.Spec.TPMEnabled = true; c.Spec.Firmware = banlieue.FirmwareBIOS }, []want{{field.ErrorTypeInvalid, "spec.tpmEnabled"}}},
		{"tpm needs firmware set", func(c *banlieue.VMClass) { c.Spec.TPMEnabled = true; c.Spec.Firmware = "" }, []want{{field.ErrorTypeInvalid, "spec.tpmEnabled"}}},
		{"tpm with efi", func(c *banlieue.VMClass) { c.Spec.TPMEnabled = true; c.Spec.Firmware = banlieue.FirmwareEFI }, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := validClass()
			tc.mutate(c)
			check(t, ValidateVMClass(c), tc.want...)
		})
	}
}

func validImage() *banlieue.VMImage {
	return &banlieue.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec: banlieue.VMImageSpec{
			OSFamily: "linux", OSVersion: "22.04",
			Sources:      []banlieue.ImageSource{{ProviderClass: "vsphere", Kind: banlieue.ImageSourceTemplate, Ref: "ubuntu-22.04-cloudinit"}},
			Template:     &banlieue.ImageTemplate{Firmware: banlieue.FirmwareEFI, InstallMode: banlieue.InstallModeDeferred},
			CloudConfigs: []banlieue.CloudConfigSource{{SecretRef: banlieue.LocalObjectReference{Name: "cc"}}},
		},
	}
}

func validImport() *banlieue.ImageImport {
	return &banlieue.ImageImport{URL: "https://mirror.example/ubuntu-22.04.qcow2", Checksum: "sha256:" + strings.Repeat("0123456789abcdef", 4),
		Format: banlieue.ImageFormatQCOW2}
}

func TestValidateVMImage(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*banlieue.VMImage)
		want   []want
	}{
		{"valid", func(*banlieue.VMImage) {}, nil},
		{"duplicate provider class", func(i *banlieue.VMImage) { i.Spec.Sources = append(i.Spec.Sources, i.Spec.Sources[0]) }, []want{{field.ErrorTypeDuplicate, "spec.sources[1].providerClass"}}},
		{"unknown source kind", func(i *banlieue.VMImage) { i.Spec.Sources[0].Kind = "ISO" }, []want{{field.ErrorTypeNotSupported, "spec.sources[0].kind"}}},
		{"missing ref", func(i *banlieue.VMImage) { i.Spec.Sources[0].Ref = "" }, []want{{field.ErrorTypeRequired, "spec.sources[0].ref"}}},
		{"libvirt volume source", func(i *banlieue.VMImage) {
			i.Spec.Sources = append(i.Spec.Sources, banlieue.ImageSource{ProviderClass: "libvirt", Kind: "Volume", Ref: "images/debian-12.qcow2"})
		}, nil},
		{"libvirt template source", func(i *banlieue.VMImage) {
			i.Spec.Sources = append(i.Spec.Sources, banlieue.ImageSource{ProviderClass: "libvirt", Kind: "Template", Ref: "images/debian-12.qcow2"})
		}, []want{{field.ErrorTypeNotSupported, "spec.sources[1].kind"}}},
		{"libvirt ref without pool", func(i *banlieue.VMImage) {
			i.Spec.Sources = append(i.Spec.Sources, banlieue.ImageSource{ProviderClass: "libvirt", Kind: "Volume", Ref: "debian-12.qcow2"})
		}, []want{{field.ErrorTypeInvalid, "spec.sources[1].ref"}}},
		{"vsphere volume source", func(i *banlieue.VMImage) {
			i.Spec.Sources = []banlieue.ImageSource{{ProviderClass: "vsphere", Kind: "Volume", Ref: "x"}}
		}, []want{{field.ErrorTypeNotSupported, "spec.sources[0].kind"}}},
		{"unknown install mode", func(i *banlieue.VMImage) { i.Spec.Template.InstallMode = "later" }, []want{{field.ErrorTypeNotSupported, "spec.template.installMode"}}},
		{"bad cloud config ref", func(i *banlieue.VMImage) { i.Spec.CloudConfigs[0].SecretRef.Name = "" }, []want{{field.ErrorTypeRequired, "spec.cloudConfigs[0].secretRef.name"}}},
		{"no sources", func(i *banlieue.VMImage) { i.Spec.Sources = nil }, []want{{field.ErrorTypeRequired, "spec.sources"}}},
		{"ignition", func(i *banlieue.VMImage) { i.Spec.GuestAgent, i.Spec.CloudConfigs = "ignition", nil }, nil},
		{"sysprep refused", func(i *banlieue.VMImage) { i.Spec.GuestAgent = "sysprep" }, []want{{field.ErrorTypeInvalid, "spec.guestAgent"}}},
		{"unknown guest agent", func(i *banlieue.VMImage) { i.Spec.GuestAgent = "puppet" }, []want{{field.ErrorTypeNotSupported, "spec.guestAgent"}}},
		{"cloud configs with ignition", func(i *banlieue.VMImage) { i.Spec.GuestAgent = "ignition" }, []want{{field.ErrorTypeForbidden, "spec.cloudConfigs"}}},
		{"overlong os version", func(i *banlieue.VMImage) { i.Spec.OSVersion = strings.Repeat("9", MaxFreeTextLength+1) }, []want{{field.ErrorTypeTooLong, "spec.osVersion"}}},
		{"architecture amd64", func(i *banlieue.VMImage) { i.Spec.Architecture = "amd64" }, nil},
		{"architecture as the kernel names it", func(i *banlieue.VMImage) { i.Spec.Architecture = "AArch64" }, nil},
		{"unknown architecture", func(i *banlieue.VMImage) { i.Spec.Architecture = "sparc64" }, []want{{field.ErrorTypeNotSupported, "spec.architecture"}}},
		{"import alone", func(i *banlieue.VMImage) { i.Spec.Sources, i.Spec.Template, i.Spec.Import = nil, nil, validImport() }, nil},
		{"import beside another class's source", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.ProviderClasses = []string{"libvirt", "proxmox"}
		}, nil},
		{"import and source for one class", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.ProviderClasses = []string{"vsphere"}
		}, []want{{field.ErrorTypeInvalid, "spec.import.providerClasses[0]"}}},
		{"checksum too short", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.Checksum = "sha256:" + strings.Repeat("a", 63)
		}, []want{{field.ErrorTypeInvalid, "spec.import.checksum"}}},
		{"sha512 checksum", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.Checksum = "sha512:" + strings.Repeat("0", 128)
		}, nil},
		{"md5 checksum", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.Checksum = "md5:" + strings.Repeat("0", 32)
		}, []want{{field.ErrorTypeInvalid, "spec.import.checksum"}}},
		{"no checksum", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.Checksum = ""
		},
			[]want{{field.ErrorTypeRequired, "spec.import.checksum"}}},
		{"iso without template", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.Format = banlieue.ImageFormatISO
		}, []want{{field.ErrorTypeRequired, "spec.template"}}},
		{"deferred disk image", func(i *banlieue.VMImage) { i.Spec.Import = validImport() },
			[]want{{field.ErrorTypeInvalid, "spec.template.installMode"}}},
		{"deferred installer", func(i *banlieue.VMImage) {
			i.Spec.Import = validImport()
			i.Spec.Import.Format = banlieue.ImageFormatISO
		}, nil},
		{"unknown format", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.Format = "vhdx"
		},
			[]want{{field.ErrorTypeNotSupported, "spec.import.format"}}},
		{"ftp url", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.URL = "ftp://mirror/x.qcow2"
		},
			[]want{{field.ErrorTypeNotSupported, "spec.import.url"}}},
		{"credentials in the url", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.URL = "https://me:secret@mirror.example/x.qcow2"
		}, []want{{field.ErrorTypeInvalid, "spec.import.url"}}},
		{"install timeout on a disk image", func(i *banlieue.VMImage) {
			i.Spec.Template, i.Spec.Import = nil, validImport()
			i.Spec.Import.InstallTimeoutSeconds = ptr.To[int32](600)
		}, []want{{field.ErrorTypeForbidden, "spec.import.installTimeoutSeconds"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			i := validImage()
			tc.mutate(i)
			check(t, ValidateVMImage(i), tc.want...)
		})
	}

	old := validImage()
	old.ResourceVersion = "1"
	img := old.DeepCopy()
	img.Status.PerProvider = []banlieue.ImageProviderStatus{{Provider: "ns/p", Ready: true}, {Provider: "ns/p", Ready: true}, {Provider: "ns/q"}}
	check(t, ValidateVMImageStatusUpdate(img, old),
		want{field.ErrorTypeDuplicate, "status.perProvider[1].provider"},
		want{field.ErrorTypeRequired, "status.perProvider[2].reason"})

	// An architecture stored before it was checked stays until edited.
	old.Spec.Architecture = "sparc64"
	img = old.DeepCopy()
	img.Spec.OSVersion = "24.04"
	check(t, ValidateVMImageUpdate(img, old))
	img.Spec.Architecture = "mips"
	check(t, ValidateVMImageUpdate(img, old), want{field.ErrorTypeNotSupported, "spec.architecture"})
	img.Spec.Architecture = "x86_64"
	check(t, ValidateVMImageUpdate(img, old))
}

func validProvider() *banlieue.Provider {
	return &banlieue.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "prod-vsphere", Namespace: "banlieue-system"},
		Spec: banlieue.ProviderSpec{
			ProviderClassRef: banlieue.LocalObjectReference{Name: "vsphere"},
			Connection: banlieue.ProviderConnection{
				Endpoint:       "https://vcenter.example.com/sdk",
				CredentialsRef: banlieue.LocalObjectReference{Name: "vsphere-creds"},
				CABundle:       &banlieue.CABundleSource{ConfigMapRef: &banlieue.KeySelector{Name: "corp-ca", Key: "ca.crt"}},
			},
			Capabilities: banlieue.ProviderCapabilities{
				StorageClasses: []banlieue.StorageClassCapability{{Name: "gold", Target: banlieue.StorageTarget{Datastore: "ds-fast-01"}}},
				NetworkClasses: []banlieue.NetworkClassCapability{{Name: "prod", Target: banlieue.NetworkTarget{PortGroup: "vmnet-prod"}}},
				Features:       []string{"hotAddCPU", "vtpm"},
			},
			FailureDomainNameOverrides: []banlieue.FailureDomainNameOverride{{Datacenter: "DC-East", Cluster: "Compute-Cluster-A", Name: "cluster-01"}},
		},
	}
}

func TestValidateProvider(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(*banlieue.Provider)
		want   []want
	}{
		{"valid", func(*banlieue.Provider) {}, nil},
		{"name must be a DNS label", func(p *banlieue.Provider) { p.Name = "prod.vsphere" }, []want{{field.ErrorTypeInvalid, "metadata.name"}}},
		{"missing class", func(p *banlieue.Provider) { p.Spec.ProviderClassRef.Name = "" }, []want{{field.ErrorTypeRequired, "spec.providerClassRef.name"}}},
		{"http endpoint", func(p *banlieue.Provider) { p.Spec.Connection.Endpoint = "http://vcenter/sdk" }, []want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"endpoint without host", func(p *banlieue.Provider) { p.Spec.Connection.Endpoint = "https:///sdk" }, []want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"endpoint with credentials", func(p *banlieue.Provider) { p.Spec.Connection.Endpoint = "https://u:p@vcenter/sdk" }, []want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"missing endpoint", func(p *banlieue.Provider) { p.Spec.Connection.Endpoint = "" }, []want{{field.ErrorTypeRequired, "spec.connection.endpoint"}}},
		{"missing credentials", func(p *banlieue.Provider) { p.Spec.Connection.CredentialsRef.Name = "" }, []want{{field.ErrorTypeRequired, "spec.connection.credentialsRef.name"}}},
		{"caBundle two sources", func(p *banlieue.Provider) { p.Spec.Connection.CABundle.Inline = "pem" }, []want{{field.ErrorTypeInvalid, "spec.connection.caBundle"}}},
		{"caBundle no source", func(p *banlieue.Provider) { p.Spec.Connection.CABundle = &banlieue.CABundleSource{} }, []want{{field.ErrorTypeRequired, "spec.connection.caBundle"}}},
		{"caBundle with insecure", func(p *banlieue.Provider) { p.Spec.Connection.InsecureSkipTLSVerify = true }, []want{{field.ErrorTypeInvalid, "spec.connection.insecureSkipTLSVerify"}}},
		{"caBundle key missing", func(p *banlieue.Provider) { p.Spec.Connection.CABundle.ConfigMapRef.Key = "" }, []want{{field.ErrorTypeRequired, "spec.connection.caBundle.configMapRef.key"}}},
		{"duplicate storage class", func(p *banlieue.Provider) {
			c := &p.Spec.Capabilities
			c.StorageClasses = append(c.StorageClasses, c.StorageClasses[0])
		}, []want{{field.ErrorTypeDuplicate, "spec.capabilities.storageClasses[1].name"}}},
		{"storage class without datastore", func(p *banlieue.Provider) { p.Spec.Capabilities.StorageClasses[0].Target.Datastore = "" }, []want{{field.ErrorTypeRequired, "spec.capabilities.storageClasses[0].target.datastore"}}},
		{"duplicate network class", func(p *banlieue.Provider) {
			c := &p.Spec.Capabilities
			c.NetworkClasses = append(c.NetworkClasses, c.NetworkClasses[0])
		}, []want{{field.ErrorTypeDuplicate, "spec.capabilities.networkClasses[1].name"}}},
		{"duplicate feature", func(p *banlieue.Provider) { p.Spec.Capabilities.Features = []string{"vtpm", "vtpm"} }, []want{{field.ErrorTypeDuplicate, "spec.capabilities.features[1]"}}},
		{"duplicate override name", func(p *banlieue.Provider) {
			p.Spec.FailureDomainNameOverrides = append(p.Spec.FailureDomainNameOverrides,
				banlieue.FailureDomainNameOverride{Datacenter: "DC-West", Cluster: "B", Name: "cluster-01"})
		}, []want{{field.ErrorTypeDuplicate, "spec.failureDomainNameOverrides[1].name"}}},
		{"duplicate override pair", func(p *banlieue.Provider) {
			p.Spec.FailureDomainNameOverrides = append(p.Spec.FailureDomainNameOverrides,
				banlieue.FailureDomainNameOverride{Datacenter: "DC-East", Cluster: "Compute-Cluster-A", Name: "cluster-02"})
		}, []want{{field.ErrorTypeDuplicate, "spec.failureDomainNameOverrides[1]"}}},
		{"override name not a label", func(p *banlieue.Provider) { p.Spec.FailureDomainNameOverrides[0].Name = "Cluster_01" }, []want{{field.ErrorTypeInvalid, "spec.failureDomainNameOverrides[0].name"}}},
		{"override without datacenter", func(p *banlieue.Provider) { p.Spec.FailureDomainNameOverrides[0].Datacenter = "" }, []want{{field.ErrorTypeRequired, "spec.failureDomainNameOverrides[0].datacenter"}}},
		{"vsphere storage pool", func(p *banlieue.Provider) { p.Spec.Capabilities.StorageClasses[0].Target.Pool = "default" }, []want{{field.ErrorTypeForbidden, "spec.capabilities.storageClasses[0].target.pool"}}},
		{"vsphere network bridge", func(p *banlieue.Provider) { p.Spec.Capabilities.NetworkClasses[0].Target.Bridge = "br0" }, []want{{field.ErrorTypeForbidden, "spec.capabilities.networkClasses[0].target.bridge"}}},
		{"vsphere override by host", func(p *banlieue.Provider) { p.Spec.FailureDomainNameOverrides[0].Host = "kvm-01" }, []want{{field.ErrorTypeForbidden, "spec.failureDomainNameOverrides[0].host"}}},

		// libvirt: its endpoints, pools, networks or bridges, and hosts.
		{"libvirt valid", toLibvirt, nil},
		{"override labels", func(p *banlieue.Provider) {
			p.Spec.FailureDomainNameOverrides[0].Labels = map[string]string{"controlPlane": "false", "zone": "a"}
		}, nil},
		{"override labels: bad and reserved", func(p *banlieue.Provider) {
			p.Spec.FailureDomainNameOverrides[0].Labels = map[string]string{"name": "x", "bad key!": "v"}
		}, []want{{field.ErrorTypeInvalid, "spec.failureDomainNameOverrides[0].labels"}, {field.ErrorTypeForbidden, "spec.failureDomainNameOverrides[0].labels[name]"}}},
		{"libvirt hot add", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Capabilities.Features = []string{"vtpm", "hotAddMemory"}
		}, []want{{field.ErrorTypeInvalid, "spec.capabilities.features[1]"}}},
		{"libvirt unix socket without credentials", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint, p.Spec.Connection.CredentialsRef.Name = "qemu+unix:///system?socket=/run/libvirt/libvirt-sock", ""
			p.Spec.Connection.CABundle = nil
		}, nil},
		{"libvirt unix socket with a CA bundle and insecure", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint, p.Spec.Connection.CredentialsRef.Name = "qemu+unix:///system?socket=/run/libvirt/libvirt-sock", ""
			p.Spec.Connection.InsecureSkipTLSVerify = true
		}, []want{{field.ErrorTypeForbidden, "spec.connection.caBundle"}, {field.ErrorTypeForbidden, "spec.connection.insecureSkipTLSVerify"}, {field.ErrorTypeInvalid, "spec.connection.insecureSkipTLSVerify"}}},
		{"libvirt unix socket with credentials", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint = "qemu+unix:///system?socket=/run/libvirt/libvirt-sock"
			p.Spec.Connection.CABundle = nil
		}, []want{{field.ErrorTypeForbidden, "spec.connection.credentialsRef.name"}}},
		{"libvirt https endpoint", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint = "https://kvm-01.lab/sdk"
		}, []want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"libvirt session endpoint", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint = "qemu+tls://kvm-01.lab/session"
		}, []want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"libvirt tls without credentials", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.CredentialsRef.Name = ""
		}, []want{{field.ErrorTypeRequired, "spec.connection.credentialsRef.name"}}},
		{"libvirt datastore", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Capabilities.StorageClasses[0].Target.Datastore = "ds-1"
		}, []want{{field.ErrorTypeForbidden, "spec.capabilities.storageClasses[0].target.datastore"}}},
		{"libvirt network and bridge", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Capabilities.NetworkClasses[0].Target.Bridge = "br0"
		}, []want{{field.ErrorTypeInvalid, "spec.capabilities.networkClasses[0].target"}}},
		{"libvirt no network target", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Capabilities.NetworkClasses[0].Target.Network = ""
		}, []want{{field.ErrorTypeRequired, "spec.capabilities.networkClasses[0].target"}}},
		{"libvirt override by datacenter", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.FailureDomainNameOverrides[0].Datacenter = "DC-East"
		}, []want{{field.ErrorTypeForbidden, "spec.failureDomainNameOverrides[0].datacenter"}}},
		{"libvirt hosts", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint = ""
			p.Spec.Connection.Hosts = []banlieue.ProviderHost{{Name: "kvm-01", Endpoint: "qemu+tls://kvm-01.lab/system"}, {Name: "kvm-02", Endpoint: "qemu+tls://kvm-02.lab/system"}}
		}, nil},
		{"libvirt hosts and endpoint", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Hosts = []banlieue.ProviderHost{{Name: "kvm-01", Endpoint: "qemu+tls://kvm-01.lab/system"}}
		}, []want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"libvirt duplicate host", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint = ""
			p.Spec.Connection.Hosts = []banlieue.ProviderHost{{Name: "kvm-01", Endpoint: "qemu+tls://a/system"}, {Name: "kvm-01", Endpoint: "qemu+tls://b/system"}}
		}, []want{{field.ErrorTypeDuplicate, "spec.connection.hosts[1].name"}}},
		{"libvirt host with a bad endpoint", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.Connection.Endpoint = ""
			p.Spec.Connection.Hosts = []banlieue.ProviderHost{{Name: "kvm-01", Endpoint: "https://kvm-01/sdk"}}
		}, []want{{field.ErrorTypeInvalid, "spec.connection.hosts[0].endpoint"}}},
		{"vsphere hosts", func(p *banlieue.Provider) {
			p.Spec.Connection.Hosts = []banlieue.ProviderHost{{Name: "esx-01", Endpoint: "https://esx-01/sdk"}}
		}, []want{{field.ErrorTypeForbidden, "spec.connection.hosts"}}},
		{"libvirt duplicate host override", func(p *banlieue.Provider) {
			toLibvirt(p)
			p.Spec.FailureDomainNameOverrides = append(p.Spec.FailureDomainNameOverrides, banlieue.FailureDomainNameOverride{Host: "kvm-01.lab", Name: "other"})
		}, []want{{field.ErrorTypeDuplicate, "spec.failureDomainNameOverrides[1]"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := validProvider()
			tc.mutate(p)
			check(t, ValidateProvider(p), tc.want...)
		})
	}

	t.Run("provider class immutable", func(t *testing.T) {
		old := validProvider()
		old.ResourceVersion = "1"
		p := old.DeepCopy()
		p.Spec.ProviderClassRef.Name = "hyperv"
		check(t, ValidateProviderUpdate(p, old), want{field.ErrorTypeInvalid, "spec.providerClassRef"})
	})
	t.Run("status", func(t *testing.T) {
		old := validProvider()
		old.ResourceVersion = "1"
		p := old.DeepCopy()
		p.Status.FailureDomains = []banlieue.FailureDomain{
			{Name: "fd-a", Labels: map[string]string{"name": "fd-a"}},
			{Name: "fd-a"},
			{Name: "fd-b", Labels: map[string]string{"bad key!": "x"}},
		}
		check(t, ValidateProviderStatusUpdate(p, old),
			want{field.ErrorTypeDuplicate, "status.failureDomains[1].name"},
			want{field.ErrorTypeInvalid, "status.failureDomains[2].labels"})
	})
}

// toLibvirt turns validProvider into a valid libvirt Provider.
func toLibvirt(p *banlieue.Provider) {
	p.Spec.ProviderClassRef.Name = "libvirt"
	p.Spec.Connection.Endpoint = "qemu+tls://kvm-01.lab/system"
	for i := range p.Spec.Capabilities.StorageClasses {
		p.Spec.Capabilities.StorageClasses[i].Target = banlieue.StorageTarget{Pool: "default"}
	}
	for i := range p.Spec.Capabilities.NetworkClasses {
		p.Spec.Capabilities.NetworkClasses[i].Target = banlieue.NetworkTarget{Network: "banlieue"}
	}
	p.Spec.FailureDomainNameOverrides = []banlieue.FailureDomainNameOverride{{Host: "kvm-01.lab", Name: "kvm-01"}}
	p.Spec.Capabilities.Features = []string{"vtpm"}
}
