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
package v1alpha1

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/api/resource"

	"k8s.io/apimachinery/pkg/runtime"
)

// Default values. They are documented on the fields they apply to, so that
// kubectl explain shows them.
const (
	DefaultUserDataKey      = "user-data"
	DefaultCABundleKey      = "ca.crt"
	DefaultPowerState       = PowerStatePoweredOn
	DefaultDiskProvisioning = DiskProvisioningThin
	DefaultInstallMode      = InstallModeImmediate
	// DefaultMigrationTimeoutSeconds bounds a migration (30 minutes).
	DefaultMigrationTimeoutSeconds = int32(1800)
)

func addDefaultingFuncs(scheme *runtime.Scheme) error {
	return RegisterDefaults(scheme)
}

// SetDefaults_VirtualMachineSpec defaults the power state, the userData
// key and the migration timeout, and normalises the override deltas: a delta only ever carries what
// the user set, so empty overrides are dropped and nothing is copied from
// the class.
func SetDefaults_VirtualMachineSpec(obj *VirtualMachineSpec) {
	if obj.DesiredPowerState == "" {
		obj.DesiredPowerState = DefaultPowerState
	}
	if obj.MigrationTimeoutSeconds == nil {
		t := DefaultMigrationTimeoutSeconds
		obj.MigrationTimeoutSeconds = &t
	}
	if obj.UserData != nil {
		defaultKey(obj.UserData.SecretRef, DefaultUserDataKey)
		defaultKey(obj.UserData.ConfigMapRef, DefaultUserDataKey)
	}
	if p := obj.Placement; p != nil && p.ProviderSelector == nil && p.FailureDomainSelector == nil && len(p.AntiAffinity) == 0 {
		obj.Placement = nil
	}
	obj.HardwareOverride = normaliseHardwareOverride(obj.HardwareOverride)
	obj.NetworkOverrides = normaliseNetworkOverrides(obj.NetworkOverrides)
}

func normaliseHardwareOverride(o *HardwareOverride) *HardwareOverride {
	if o == nil {
		return nil
	}
	var disks []DiskOverride
	for _, d := range o.DiskOverrides {
		if d.SizeGiB != nil {
			disks = append(disks, d)
		}
	}
	o.DiskOverrides = disks
	if o.CPUs == nil && o.MemoryMiB == nil && len(o.DiskOverrides) == 0 {
		return nil
	}
	return o
}

func normaliseNetworkOverrides(in []NetworkOverride) []NetworkOverride {
	var out []NetworkOverride
	for _, n := range in {
		if n.Static == nil && !n.DHCP && n.Pool == nil {
			continue
		}
		if n.Static != nil {
			splitCIDR(n.Static)
		}
		out = append(out, n)
	}
	return out
}

// splitCIDR turns an address written as "192.0.2.90/24" into address and
// prefix, when the prefix was not given separately. Anything that is not a
// valid prefix is left for validation to report.
func splitCIDR(s *StaticIPConfig) {
	if s == nil || s.Prefix != nil {
		return
	}
	p, err := netip.ParsePrefix(s.Address)
	if err != nil {
		return
	}
	bits := int32(p.Bits())
	s.Address = p.Addr().String()
	s.Prefix = &bits
}

func defaultKey(ref *KeySelector, key string) {
	if ref != nil && ref.Key == "" {
		ref.Key = key
	}
}

// SetDefaults_DiskSpec defaults a class disk's provisioning to thin.
func SetDefaults_DiskSpec(obj *DiskSpec) {
	if obj.Provisioning == "" {
		obj.Provisioning = DefaultDiskProvisioning
	}
}

// SetDefaults_NetworkInterfaceSpec splits a CIDR-form static address of a
// class interface, like the VM-level overrides.
func SetDefaults_NetworkInterfaceSpec(obj *NetworkInterfaceSpec) {
	splitCIDR(obj.IPAM.Static)
}

// SetDefaults_ImageTemplate defaults the install mode to immediate.
func SetDefaults_ImageTemplate(obj *ImageTemplate) {
	if obj.InstallMode == "" {
		obj.InstallMode = DefaultInstallMode
	}
}

// SetDefaults_CABundleSource defaults the key of a CA bundle reference to ca.crt.
func SetDefaults_CABundleSource(obj *CABundleSource) {
	defaultKey(obj.ConfigMapRef, DefaultCABundleKey)
	defaultKey(obj.SecretRef, DefaultCABundleKey)
}

// Defaults of a ProviderClass's workloads.
const (
	DefaultProviderNamespace          = "banlieue-system"
	DefaultProviderDeploymentStrategy = ProviderDeploymentPerProvider
	DefaultProviderReplicas           = int32(1)
	DefaultProviderLogLevel           = int32(2)
)

// SetDefaults_ProviderClassSpec defaults the namespace, strategy, replicas,
// resources and log level of a class's workloads, so that the stored object
// shows what runs.
func SetDefaults_ProviderClassSpec(obj *ProviderClassSpec) {
	if obj.Namespace == "" {
		obj.Namespace = DefaultProviderNamespace
	}
	if obj.DeploymentStrategy == "" {
		obj.DeploymentStrategy = DefaultProviderDeploymentStrategy
	}
	if obj.Replicas == nil {
		r := DefaultProviderReplicas
		obj.Replicas = &r
	}
	if obj.LogLevel == nil {
		l := DefaultProviderLogLevel
		obj.LogLevel = &l
	}
	if obj.Resources == nil {
		obj.Resources = &ProviderResources{
			Requests: map[string]resource.Quantity{"cpu": resource.MustParse("50m"), "memory": resource.MustParse("64Mi")},
			Limits:   map[string]resource.Quantity{"memory": resource.MustParse("512Mi")},
		}
	}
}
