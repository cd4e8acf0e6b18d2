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

package ignition

import (
	"testing"

	"github.com/firestoned/banlieue/pkg/providers"
)

func TestNetworkKargs(t *testing.T) {
	static := &providers.StaticIP{Address: "192.0.2.10", Prefix: 24, Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53", "192.0.2.54", "192.0.2.55"}}
	for _, tc := range []struct {
		name    string
		nics    []providers.NIC
		macs    []string
		want    string
		wantErr bool
	}{
		{"all DHCP", []providers.NIC{{Name: "eth0"}}, []string{"00:50:56:00:00:01"}, "", false},
		{"static, two nameservers kept", []providers.NIC{{Name: "eth0", Static: static}}, []string{"00:50:56:AA:00:01"},
			"ifname=eth0:00:50:56:aa:00:01 ip=192.0.2.10::192.0.2.1:255.255.255.0:vm1:eth0:none:192.0.2.53:192.0.2.54", false},
		{"static and DHCP, unnamed", []providers.NIC{{Static: &providers.StaticIP{Address: "10.0.0.5", Prefix: 8}}, {Name: "eth1"}},
			[]string{"00:50:56:00:00:01", "00:50:56:00:00:02"},
			"ifname=nic0:00:50:56:00:00:01 ip=10.0.0.5:::255.0.0.0:vm1:nic0:none ifname=eth1:00:50:56:00:00:02 ip=eth1:dhcp", false},
		{"IPv6 in brackets, with its prefix", []providers.NIC{{Name: "eth0", Static: &providers.StaticIP{Address: "2001:db8::5", Prefix: 64}}}, []string{"00:50:56:00:00:01"},
			"ifname=eth0:00:50:56:00:00:01 ip=[2001:db8::5]:::64:vm1:eth0:none", false},
		{"NIC without MAC yet", []providers.NIC{{Name: "eth0", Static: static}}, nil, "", true},
		{"bad address", []providers.NIC{{Name: "eth0", Static: &providers.StaticIP{Address: "nope", Prefix: 24}}}, []string{"00:50:56:00:00:01"}, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := NetworkKargs(tc.nics, tc.macs, "vm1")
			if (err != nil) != tc.wantErr || got != tc.want {
				t.Errorf("got %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
