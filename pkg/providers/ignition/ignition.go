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

// Package ignition hands an Ignition guest what cloud-init's metadata
// gives a cloud-init one: its network. Ignition configs themselves are the
// user's (the VM's user data), passed through untouched.
package ignition

import (
	"fmt"
	"net"
	"strings"

	"github.com/firestoned/banlieue/pkg/providers"
)

// NetworkKargs are the dracut network kernel arguments Afterburn applies
// in the initramfs on VMware (guestinfo.afterburn.initrd.network-kargs):
// each NIC named by its MAC (ifname=), then its static address or DHCP
// (ip=). "" when every NIC uses DHCP: the initramfs default.
func NetworkKargs(nics []providers.NIC, macs []string, hostName string) (string, error) {
	var args []string
	static := false
	for i, nic := range nics {
		if i >= len(macs) || macs[i] == "" {
			return "", fmt.Errorf("NIC %d does not exist yet", i)
		}
		name := nic.Name
		if name == "" {
			name = fmt.Sprintf("nic%d", i)
		}
		args = append(args, fmt.Sprintf("ifname=%s:%s", name, strings.ToLower(macs[i])))
		s := nic.Static
		if s == nil {
			args = append(args, fmt.Sprintf("ip=%s:dhcp", name))
			continue
		}
		static = true
		mask, err := netmask(s.Address, s.Prefix)
		if err != nil {
			return "", fmt.Errorf("NIC %s: %w", name, err)
		}
		ip := fmt.Sprintf("ip=%s::%s:%s:%s:%s:none", bracketed(s.Address), bracketed(s.Gateway), mask, hostName, name)
		for j, ns := range s.Nameservers {
			if j == 2 {
				break // dracut takes two
			}
			ip += ":" + ns
		}
		args = append(args, ip)
	}
	if !static {
		return "", nil
	}
	return strings.Join(args, " "), nil
}

// netmask is the dotted (IPv4) or prefix-length (IPv6) form of prefix
// dracut's ip= wants for address.
func netmask(address string, prefix int32) (string, error) {
	ip := net.ParseIP(address)
	if ip == nil {
		return "", fmt.Errorf("address %q is not an IP address", address)
	}
	if ip.To4() == nil {
		return fmt.Sprint(prefix), nil
	}
	if prefix < 0 || prefix > 32 {
		return "", fmt.Errorf("prefix %d out of range for %s", prefix, address)
	}
	return net.IP(net.CIDRMask(int(prefix), 32)).String(), nil
}

// bracketed writes an IPv6 address as dracut wants it, in brackets.
func bracketed(address string) string {
	if strings.Contains(address, ":") {
		return "[" + address + "]"
	}
	return address
}
