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
package v1alpha1_test

import (
	"testing"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/diff"
	"k8s.io/utils/ptr"

	. "github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func defaulted(t *testing.T, obj runtime.Object) runtime.Object {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	obj = obj.DeepCopyObject()
	scheme.Default(obj)
	return obj
}

func TestVirtualMachineDefaults(t *testing.T) {
	cases := []struct {
		name string
		in   VirtualMachineSpec
		want VirtualMachineSpec
	}{
		{
			name: "power state and userData keys",
			in:   VirtualMachineSpec{UserData: &UserData{SecretRef: &KeySelector{Name: "s"}, ConfigMapRef: &KeySelector{Name: "c", Key: "custom"}}},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn, UserData: &UserData{SecretRef: &KeySelector{Name: "s", Key: "user-data"}, ConfigMapRef: &KeySelector{Name: "c", Key: "custom"}}},
		},
		{
			name: "explicit power state kept",
			in:   VirtualMachineSpec{DesiredPowerState: PowerStateSuspended},
			want: VirtualMachineSpec{DesiredPowerState: PowerStateSuspended},
		},
		{
			name: "empty overrides and placement are normalised away",
			in: VirtualMachineSpec{
				Placement:        &Placement{},
				HardwareOverride: &HardwareOverride{DiskOverrides: []DiskOverride{{Name: "data"}}},
				NetworkOverrides: []NetworkOverride{{Name: "eth0"}},
			},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn},
		},
		{
			name: "a placement with only anti-affinity is kept",
			in:   VirtualMachineSpec{Placement: &Placement{AntiAffinity: []AntiAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "provider"}}}},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn, Placement: &Placement{AntiAffinity: []AntiAffinityTerm{{LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "x"}}, TopologyKey: "provider", Mode: AntiAffinityRequired}}}},
		},
		{
			name: "omitted override fields stay omitted",
			in:   VirtualMachineSpec{HardwareOverride: &HardwareOverride{MemoryMiB: ptr.To[int64](65536), DiskOverrides: []DiskOverride{{Name: "root"}, {Name: "data", SizeGiB: ptr.To[int64](2000)}}}},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn, HardwareOverride: &HardwareOverride{MemoryMiB: ptr.To[int64](65536), DiskOverrides: []DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}}},
		},
		{
			name: "CIDR address is split",
			in:   VirtualMachineSpec{NetworkOverrides: []NetworkOverride{{Name: "eth0", Static: &StaticIPConfig{Address: "192.0.2.90/24"}}, {Name: "eth1", Static: &StaticIPConfig{Address: "2001:db8::5/64"}}}},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn, NetworkOverrides: []NetworkOverride{{Name: "eth0", Static: &StaticIPConfig{Address: "192.0.2.90", Prefix: ptr.To[int32](24)}}, {Name: "eth1", Static: &StaticIPConfig{Address: "2001:db8::5", Prefix: ptr.To[int32](64)}}}},
		},
		{
			name: "CIDR with an explicit prefix is left for validation",
			in:   VirtualMachineSpec{NetworkOverrides: []NetworkOverride{{Name: "eth0", Static: &StaticIPConfig{Address: "192.0.2.90/24", Prefix: ptr.To[int32](16)}}}},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn, NetworkOverrides: []NetworkOverride{{Name: "eth0", Static: &StaticIPConfig{Address: "192.0.2.90/24", Prefix: ptr.To[int32](16)}}}},
		},
		{
			name: "explicit migration timeout kept",
			in:   VirtualMachineSpec{MigrationTimeoutSeconds: ptr.To[int32](60)},
			want: VirtualMachineSpec{DesiredPowerState: PowerStatePoweredOn, MigrationTimeoutSeconds: ptr.To[int32](60)},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.want.MigrationTimeoutSeconds == nil {
				tc.want.MigrationTimeoutSeconds = ptr.To(DefaultMigrationTimeoutSeconds)
			}
			got := defaulted(t, &VirtualMachine{Spec: tc.in}).(*VirtualMachine).Spec
			if !apiequality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("defaults differ:\n%s", diff.Diff(tc.want, got))
			}
		})
	}
}

func TestClassImageProviderDefaults(t *testing.T) {
	class := defaulted(t, &VMClass{Spec: VMClassSpec{
		Hardware: VMClassHardware{Disks: []DiskSpec{{Name: "root"}, {Name: "data", Provisioning: DiskProvisioningThick}}},
		Network:  &VMClassNetwork{Interfaces: []NetworkInterfaceSpec{{Name: "eth0", IPAM: IPAMConfig{Static: &StaticIPConfig{Address: "10.0.0.5/8"}}}}},
	}}).(*VMClass)
	if p := class.Spec.Hardware.Disks; p[0].Provisioning != DiskProvisioningThin || p[1].Provisioning != DiskProvisioningThick {
		t.Errorf("provisioning = %q, %q; want thin, thick", p[0].Provisioning, p[1].Provisioning)
	}
	if s := class.Spec.Network.Interfaces[0].IPAM.Static; s.Address != "10.0.0.5" || *s.Prefix != 8 {
		t.Errorf("class static = %+v", s)
	}
	if class.Spec.Firmware != "" {
		t.Errorf("firmware was defaulted to %q; the default is applied by the resolver, with provenance", class.Spec.Firmware)
	}

	image := defaulted(t, &VMImage{Spec: VMImageSpec{Template: &ImageTemplate{}}}).(*VMImage)
	if image.Spec.Template.InstallMode != InstallModeImmediate {
		t.Errorf("installMode = %q", image.Spec.Template.InstallMode)
	}

	provider := defaulted(t, &Provider{Spec: ProviderSpec{Connection: ProviderConnection{
		CABundle: &CABundleSource{SecretRef: &KeySelector{Name: "ca"}},
	}}}).(*Provider)
	if k := provider.Spec.Connection.CABundle.SecretRef.Key; k != "ca.crt" {
		t.Errorf("caBundle key = %q, want ca.crt", k)
	}
}
