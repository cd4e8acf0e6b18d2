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

package vsphere

import (
	"fmt"
	"slices"

	"github.com/vmware/govmomi/vim25/types"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// GuestID is the vSphere guestId (a VirtualMachineGuestOsIdentifier) of a
// 64-bit guest running g, "" for none (the template's is kept): linux
// distributions by name and major version (the newest identifier vSphere
// has at or below it: debian 14 is debian13_64Guest until there is a
// debian14_64Guest), otherLinux64Guest for any other linux; Windows by
// version (8, 10, 11; Server 2012, 2016, 2019, 2022, 2025), none for a Windows
// version it does not know; FreeBSD, or otherGuest64 for any other family.
func GuestID(g *infrav1.GuestOS) string {
	if g == nil {
		return ""
	}
	major := g.Major()
	// newest is the newest identifier of pattern for a version in
	// [oldest, major]; fallback when there is none.
	newest := func(pattern string, oldest int, fallback types.VirtualMachineGuestOsIdentifier) string {
		for v := major; v >= oldest; v-- {
			if id := fmt.Sprintf(pattern, v); isGuestID(id) {
				return id
			}
		}
		return string(fallback)
	}
	const otherLinux = types.VirtualMachineGuestOsIdentifierOtherLinux64Guest
	switch g.Family {
	case infrav1.GuestOSFamilyLinux:
		switch g.Distribution {
		case "ubuntu":
			return string(types.VirtualMachineGuestOsIdentifierUbuntu64Guest)
		case "debian":
			return newest("debian%d_64Guest", 4, otherLinux)
		case "rhel":
			return newest("rhel%d_64Guest", 3, otherLinux)
		case "centos", "centos-stream":
			return newest("centos%d_64Guest", 6, types.VirtualMachineGuestOsIdentifierCentos64Guest)
		case "rocky":
			return string(types.VirtualMachineGuestOsIdentifierRockylinux_64Guest)
		case "almalinux":
			return string(types.VirtualMachineGuestOsIdentifierAlmalinux_64Guest)
		case "oraclelinux":
			return newest("oracleLinux%d_64Guest", 6, types.VirtualMachineGuestOsIdentifierOracleLinux64Guest)
		case "sles":
			return newest("sles%d_64Guest", 10, types.VirtualMachineGuestOsIdentifierSles64Guest)
		case "opensuse":
			return string(types.VirtualMachineGuestOsIdentifierOpensuse64Guest)
		case "fedora":
			return string(types.VirtualMachineGuestOsIdentifierFedora64Guest)
		case "flatcar", "fedora-coreos":
			return string(types.VirtualMachineGuestOsIdentifierCoreos64Guest)
		case "photon":
			return string(types.VirtualMachineGuestOsIdentifierVmwarePhoton64Guest)
		case "amazonlinux":
			return newest("amazonlinux%d_64Guest", 2, otherLinux)
		}
		return string(otherLinux)
	case infrav1.GuestOSFamilyWindows:
		switch major {
		case 8:
			return string(types.VirtualMachineGuestOsIdentifierWindows8_64Guest)
		case 2012:
			return string(types.VirtualMachineGuestOsIdentifierWindows8Server64Guest)
		case 10:
			return string(types.VirtualMachineGuestOsIdentifierWindows9_64Guest)
		case 11:
			return string(types.VirtualMachineGuestOsIdentifierWindows11_64Guest)
		case 2016:
			return string(types.VirtualMachineGuestOsIdentifierWindows9Server64Guest)
		case 2019:
			return string(types.VirtualMachineGuestOsIdentifierWindows2019srv_64Guest)
		case 2022:
			return string(types.VirtualMachineGuestOsIdentifierWindows2019srvNext_64Guest)
		case 2025:
			return string(types.VirtualMachineGuestOsIdentifierWindows2022srvNext_64Guest)
		}
		return ""
	}
	if g.Distribution == "freebsd" {
		return newest("freebsd%d_64Guest", 11, types.VirtualMachineGuestOsIdentifierFreebsd64Guest)
	}
	return string(types.VirtualMachineGuestOsIdentifierOtherGuest64)
}

// guestIDs are the identifiers this vSphere API version knows.
var guestIDs = types.VirtualMachineGuestOsIdentifier("").Values()

func isGuestID(id string) bool {
	return slices.Contains(guestIDs, types.VirtualMachineGuestOsIdentifier(id))
}
