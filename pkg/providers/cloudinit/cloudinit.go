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

// Package cloudinit is what banlieue hands a guest's cloud-init, on every
// backend: the instance metadata, a network config (version 2, each NIC
// matched by its MAC address) and, for backends without a metadata
// channel of their own (libvirt), a NoCloud seed ISO carrying them with
// the user data.
package cloudinit

import (
	"fmt"

	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/providers"
)

// NetworkConfig is cloud-init's network config version 2 for nics, whose
// MAC addresses are macs (in order): static addresses from the spec,
// DHCP otherwise. A NIC without a MAC yet is an error.
func NetworkConfig(nics []providers.NIC, macs []string) (map[string]any, error) {
	type nameservers struct {
		Addresses []string `json:"addresses,omitempty"`
	}
	type route struct {
		To  string `json:"to"`
		Via string `json:"via"`
	}
	type ethernet struct {
		Match       map[string]string `json:"match"`
		SetName     string            `json:"set-name,omitempty"`
		DHCP4       bool              `json:"dhcp4"`
		Addresses   []string          `json:"addresses,omitempty"`
		Routes      []route           `json:"routes,omitempty"`
		Nameservers *nameservers      `json:"nameservers,omitempty"`
	}
	ethernets := map[string]ethernet{}
	for i, nic := range nics {
		if i >= len(macs) || macs[i] == "" {
			return nil, fmt.Errorf("NIC %d does not exist yet", i)
		}
		e := ethernet{Match: map[string]string{"macaddress": macs[i]}, SetName: nic.Name, DHCP4: nic.Static == nil}
		if s := nic.Static; s != nil {
			e.Addresses = []string{fmt.Sprintf("%s/%d", s.Address, s.Prefix)}
			if s.Gateway != "" {
				e.Routes = []route{{To: "default", Via: s.Gateway}}
			}
			if len(s.Nameservers) > 0 {
				e.Nameservers = &nameservers{Addresses: s.Nameservers}
			}
		}
		id := nic.Name
		if id == "" {
			id = fmt.Sprintf("nic%d", i)
		}
		ethernets[id] = e
	}
	return map[string]any{"version": 2, "ethernets": ethernets}, nil
}

// InstanceID is cloud-init's instance ID: the VM's identity, so cloud-init
// runs once per VM, not once per boot, and again for a new VM of the same
// name.
func InstanceID(spec providers.MachineSpec) string {
	if spec.InstanceUUID != "" {
		return spec.InstanceUUID
	}
	return spec.Name
}

// NoCloudSeed is the NoCloud seed ISO (label cidata) for spec, whose NICs
// have the MAC addresses macs: meta-data, network-config and user-data
// (empty when the spec has none).
func NoCloudSeed(spec providers.MachineSpec, macs []string) ([]byte, error) {
	meta, err := yaml.Marshal(map[string]string{"instance-id": InstanceID(spec), "local-hostname": spec.HostName})
	if err != nil {
		return nil, err
	}
	nc, err := NetworkConfig(spec.NICs, macs)
	if err != nil {
		return nil, err
	}
	network, err := yaml.Marshal(nc)
	if err != nil {
		return nil, err
	}
	return ISO("cidata", map[string][]byte{"meta-data": meta, "network-config": network, "user-data": spec.UserData})
}
