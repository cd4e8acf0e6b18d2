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

package redact

import "testing"

func TestMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`connecting: logging in to vc.corp.example:443 as administrator@vsphere.local: ServerFaultCode: Cannot complete login`,
			`connecting: logging in to <address> as <user>: ServerFaultCode: Cannot complete login`},
		{`Post "https://vc.corp.example/sdk": dial tcp 10.1.2.3:443: connect: connection refused`,
			`Post "<endpoint>": dial tcp <address>: connect: connection refused`},
		{`dial qemu+tls://kvm-7.lab/system: x509: certificate signed by unknown authority`,
			`dial <endpoint>: x509: certificate signed by unknown authority`},
		{`token banlieue@pve!ci was refused by [fd00::1]:8006`, `token <user> was refused by <address>`},
		{`no route to fe80:0:0:0:1:2:3:4`, `no route to <address>`},
		{`tokenID "banlieue" is not USER@REALM!TOKENID`, `tokenID "banlieue" is not USER@REALM!TOKENID`},
		{`tokenID "root@pam!ci" was refused`, `tokenID "<user>" was refused`},
		{`spec.network[0].bridge: vlan 99 names no bridge`, `spec.network[0].bridge: vlan 99 names no bridge`},
		{`spec.disks[12].sizeGiB too large; at [::1]:6443 and [fe80::2]`, `spec.disks[12].sizeGiB too large; at <address> and <address>`},
		{`dial unix qemu+unix:///system?socket=/run/x/libvirt-sock, then gave up`, `dial unix <endpoint>, then gave up`},
		{`template "ubuntu-22.04" not found in datacenter(s) DC0, DC1`, `template "ubuntu-22.04" not found in datacenter(s) DC0, DC1`},
		{`VM banlieue-system.db-prod-01 is poweredOn; 3 of 4 disks`, `VM banlieue-system.db-prod-01 is poweredOn; 3 of 4 disks`},
		{`clone of 20:ab needs 2 GiB (version 1.2.3)`, `clone of 20:ab needs 2 GiB (version 1.2.3)`},
	} {
		if got := Message(tc.in); got != tc.want {
			t.Errorf("Message(%q)\n = %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
