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

package libvirt

import (
	"fmt"
	"regexp"
	"strings"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// OSInfoID is the libosinfo id (osinfo-query os's id column) of g, the
// guest OS the domain's metadata names for virt-manager, virt-install and
// other libosinfo users; "" for none. Linux distributions by name and
// version as libosinfo writes them (ubuntu 22.04, debian 12, rhel 9.4,
// fedora 40, ...); a linux it cannot name, or one without a version, is
// libosinfo's generic linux (2022); Windows by version (10, 11; Server
// 2016, 2019, 2022, 2025), none for a version it does not know; freebsd
// by version; nothing for any other family.
func OSInfoID(g *infrav1.GuestOS) string {
	if g == nil {
		return ""
	}
	// Only a version of numbers and dots is written into an id as it is.
	v, major := g.Version, g.Major()
	dotted := numeric.MatchString(v) && strings.Contains(v, ".")
	if major > 0 {
		// With its minor where libosinfo names each minor release (rhel,
		// opensuse leap, freebsd): 9 is 9.0.
		minor := func() string {
			if dotted {
				return v
			}
			return fmt.Sprintf("%d.0", major)
		}
		switch {
		case g.Family == infrav1.GuestOSFamilyWindows:
			switch major {
			case 10, 11:
				return fmt.Sprintf("http://microsoft.com/win/%d", major)
			case 2016, 2019, 2022, 2025:
				return fmt.Sprintf("http://microsoft.com/win/2k%d", major%100)
			}
			return ""
		case g.Distribution == "freebsd":
			return "http://freebsd.org/freebsd/" + minor()
		case g.Family != infrav1.GuestOSFamilyLinux:
			return ""
		}
		switch g.Distribution {
		case "ubuntu":
			if dotted {
				return "http://ubuntu.com/ubuntu/" + v
			}
		case "debian":
			return fmt.Sprintf("http://debian.org/debian/%d", major)
		case "rhel":
			return "http://redhat.com/rhel/" + minor()
		case "centos-stream":
			return fmt.Sprintf("http://centos.org/centos-stream/%d", major)
		case "rocky":
			return fmt.Sprintf("http://rockylinux.org/rocky/%d", major)
		case "almalinux":
			return fmt.Sprintf("http://almalinux.org/almalinux/%d", major)
		case "fedora":
			return fmt.Sprintf("http://fedoraproject.org/fedora/%d", major)
		case "opensuse":
			return "http://opensuse.org/opensuse/" + minor()
		}
	}
	if g.Family == infrav1.GuestOSFamilyLinux {
		return "http://libosinfo.org/linux/2022"
	}
	return ""
}

// Arch is the libvirt (QEMU) name of an architecture: x86_64 for amd64
// and for none named.
func Arch(a infrav1.Architecture) string {
	switch a {
	case infrav1.ArchitectureARM64:
		return "aarch64"
	case infrav1.ArchitecturePPC64LE, infrav1.ArchitectureS390X, infrav1.ArchitectureRISCV64:
		return string(a)
	}
	return "x86_64"
}

// numeric is a version of numbers and dots.
var numeric = regexp.MustCompile(`^[0-9]+(\.[0-9]+)*$`)
