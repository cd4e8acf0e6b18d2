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

// Package fuzzer fills banlieue.io objects with random values for round-trip
// tests. Decoding applies defaults, so every object it makes is already in
// defaulted, normalised form: otherwise a round trip would differ by exactly
// the defaults and the test would prove nothing.
package fuzzer

import (
	runtimeserializer "k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// Funcs returns the fuzzer functions of the banlieue.io API group.
var Funcs = func(codecs runtimeserializer.CodecFactory) []interface{} {
	return []interface{}{
		func(s *banlieue.VirtualMachineSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			powerStates := []banlieue.PowerState{banlieue.PowerStatePoweredOn, banlieue.PowerStatePoweredOff, banlieue.PowerStateSuspended}
			s.DesiredPowerState = powerStates[c.Intn(len(powerStates))]
			if s.MigrationTimeoutSeconds == nil {
				t := int32(1800) // v1alpha1's default
				s.MigrationTimeoutSeconds = &t
			}
			if s.Placement != nil && s.Placement.ProviderSelector == nil && s.Placement.FailureDomainSelector == nil && len(s.Placement.AntiAffinity) == 0 {
				s.Placement = nil
			}
			if o := s.HardwareOverride; o != nil {
				var disks []banlieue.DiskOverride
				for _, d := range o.DiskOverrides {
					if d.SizeGiB != nil {
						disks = append(disks, d)
					}
				}
				o.DiskOverrides = disks
				if o.CPUs == nil && o.MemoryMiB == nil && len(o.DiskOverrides) == 0 {
					s.HardwareOverride = nil
				}
			}
			var nets []banlieue.NetworkOverride
			for _, n := range s.NetworkOverrides {
				if n.Static != nil || n.DHCP || n.Pool != nil {
					nets = append(nets, n)
				}
			}
			s.NetworkOverrides = nets
		},
		func(k *banlieue.KeySelector, c randfill.Continue) {
			c.FillNoCustom(k)
			if k.Key == "" {
				k.Key = "key"
			}
		},
		func(s *banlieue.StaticIPConfig, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Prefix == nil {
				prefix := int32(c.Intn(33))
				s.Prefix = &prefix
			}
		},
		func(d *banlieue.DiskSpec, c randfill.Continue) {
			c.FillNoCustom(d)
			if d.Provisioning == "" {
				d.Provisioning = banlieue.DiskProvisioningThin
			}
		},
		func(t *banlieue.ImageTemplate, c randfill.Continue) {
			c.FillNoCustom(t)
			if t.InstallMode == "" {
				t.InstallMode = banlieue.InstallModeImmediate
			}
		},
		func(t *banlieue.AntiAffinityTerm, c randfill.Continue) {
			c.FillNoCustom(t)
			if t.Mode == "" {
				t.Mode = banlieue.AntiAffinityRequired
			}
		},
		func(s *banlieue.VMImageSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.GuestAgent == "" {
				s.GuestAgent = banlieue.GuestAgentCloudInit
			}
		},
		// Defaulted fields are set, as after defaulting.
		func(s *banlieue.ProviderClassSpec, c randfill.Continue) {
			c.FillNoCustom(s)
			if s.Namespace == "" {
				s.Namespace = "banlieue-system"
			}
			if s.DeploymentStrategy == "" {
				s.DeploymentStrategy = banlieue.ProviderDeploymentPerProvider
			}
			if s.Replicas == nil {
				s.Replicas = new(int32)
			}
			if s.LogLevel == nil {
				s.LogLevel = new(int32)
			}
			if s.Resources == nil {
				s.Resources = &banlieue.ProviderResources{}
			}
		},
	}
}
