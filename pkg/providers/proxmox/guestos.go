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

package proxmox

import (
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// OSType is the Proxmox VE ostype of a guest running g, "" for none (the
// template's is kept): l26 for any linux (2.6 to 6.x kernels), Windows by
// version as qemu-server groups them (win11: 11, Server 2022 and 2025,
// and a version it does not know; win10: 10, Server 2016 and 2019; win8:
// 8, Server 2012; win7: 7; w2k8: Server 2008), solaris for Solaris and
// its descendants, other for anything else.
func OSType(g *infrav1.GuestOS) string {
	if g == nil {
		return ""
	}
	switch g.Family {
	case infrav1.GuestOSFamilyLinux:
		return "l26"
	case infrav1.GuestOSFamilyWindows:
		switch v := g.Major(); {
		case v == 10 || v == 2016 || v == 2019:
			return "win10"
		case v == 8 || v == 2012:
			return "win8"
		case v == 7:
			return "win7"
		case v == 2008:
			return "w2k8"
		}
		return "win11"
	}
	switch g.Distribution {
	case "solaris", "illumos", "openindiana", "omnios":
		return "solaris"
	}
	return "other"
}
