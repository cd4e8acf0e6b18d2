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

package infrastructure

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// CommonSpec is the part of every backend's machine spec that comes
// straight from the resolved VM: failure domain, the guest's host name
// (the VM's, whatever the machine is named: a migration's target keeps
// it), size, firmware, vTPM and power (state, and how to power off). Spec
// builders start from it.
func CommonSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine) infrav1.CommonMachineSpec {
	spec := infrav1.CommonMachineSpec{
		FailureDomain: vm.Status.Scheduled.FailureDomain,
		HostName:      providers.HostName(vm.Name),
		CPUs:          r.Spec.CPUs.Value,
		MemoryMiB:     r.Spec.MemoryMiB.Value,
		Firmware:      infrav1.Firmware(r.Spec.Firmware),
		TPMEnabled:    r.Spec.TPMEnabled,
		PowerState:    infrav1.PowerState(r.Spec.PowerState),
		// How to power off is the VM's own choice, not the class's: it
		// comes from its spec as it is.
		PowerOffMode:         infrav1.PowerOffMode(vm.Spec.PowerOffMode),
		PowerOffGraceSeconds: vm.Spec.PowerOffGraceSeconds,
		RestartRequestID:     RestartRequestID(vm),
	}
	spec.GuestOS = GuestOS(r.Spec.Image)
	// An architecture no backend knows stays unset: every backend's Admit
	// refuses it before this is built.
	spec.Architecture, _ = Architecture(r.Spec.Image.Architecture)
	if r.Spec.Image.GuestAgent == v1alpha1.GuestAgentIgnition {
		spec.UserDataFormat = infrav1.UserDataIgnition
	}
	for _, c := range r.Spec.Image.CloudConfigs {
		spec.CloudConfigs = append(spec.CloudConfigs, c.SecretRef.Name)
	}
	if u := r.Spec.UserData; u != nil {
		if u.SecretRef != nil {
			spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: u.SecretRef.Name, Key: u.SecretRef.Key}
		}
		if u.ConfigMapRef != nil {
			spec.UserDataConfigMapRef = &infrav1.ConfigMapKeyReference{Name: u.ConfigMapRef.Name, Key: u.ConfigMapRef.Key}
		}
	}
	return spec
}

// RestartRequestID is the restart the VM's machine is asked for: the
// VM's recorded restart while it is not settled, none once it is (a
// machine built later, by a migration, is not restarted by an old
// request).
func RestartRequestID(vm *v1alpha1.VirtualMachine) string {
	if r := vm.Status.Restart; r != nil && (r.Phase == v1alpha1.RestartPending || r.Phase == v1alpha1.RestartSending) {
		return r.ID
	}
	return ""
}

// StaticIP is an interface's static address in the machine's shape (its
// own, or the one its pool gave); nil for DHCP.
func StaticIP(n v1alpha1.ResolvedInterface) *infrav1.StaticIP {
	if n.Static == nil { // DHCP, or a pool address not claimed yet
		return nil
	}
	return &infrav1.StaticIP{Address: n.Static.Address, Prefix: ptr.Deref(n.Static.Prefix, 0), Gateway: n.Static.Gateway, Nameservers: n.Static.Nameservers}
}

// Targets maps each disk or interface name of a scheduled VM to its
// backend target (status.scheduled.storage or .network).
func Targets[T v1alpha1.StorageResolution | v1alpha1.NetworkResolution](rs []T) map[string]string {
	out := map[string]string{}
	for _, r := range rs {
		switch r := any(r).(type) {
		case v1alpha1.StorageResolution:
			out[r.Name] = r.Target
		case v1alpha1.NetworkResolution:
			out[r.Name] = r.Target
		}
	}
	return out
}

// Interface is a resolved interface with the backend target its network
// class maps to on the Provider (zero when it names none: the image's
// network) and its static address (nil for DHCP).
type Interface struct {
	Name   string
	Target v1alpha1.NetworkTarget
	Static *infrav1.StaticIP
}

// Interfaces resolves each interface of r against provider's network
// classes; a class the Provider does not offer is an error.
func Interfaces(r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) ([]Interface, error) {
	targets := map[string]v1alpha1.NetworkTarget{}
	for _, n := range provider.Spec.Capabilities.NetworkClasses {
		targets[n.Name] = n.Target
	}
	var out []Interface
	for _, n := range r.Spec.Interfaces {
		t, ok := targets[n.NetworkClass]
		if !ok && n.NetworkClass != "" {
			return nil, fmt.Errorf("interface %s: Provider %s has no network class %q", n.Name, provider.Name, n.NetworkClass)
		}
		out = append(out, Interface{Name: n.Name, Target: t, Static: StaticIP(n)})
	}
	return out, nil
}

// ImageRef is the ref of the resolved image's source for provider's class.
func ImageRef(r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (string, error) {
	class := provider.Spec.ProviderClassRef.Name
	for _, src := range r.Spec.Image.Sources {
		if src.ProviderClass == class {
			return src.Ref, nil
		}
	}
	if im := r.Spec.Image.Imported; im != nil && (len(im.ProviderClasses) == 0 || slices.Contains(im.ProviderClasses, class)) {
		// What the provider built of the import: the backend's kind
		// places it (a libvirt pool, a vSphere template folder).
		return im.Name, nil
	}
	return "", fmt.Errorf("VMImage %s has no source for provider class %q", r.Spec.Image.Name, class)
}

// FailureDomain is the failure domain of provider named name, if published.
func FailureDomain(provider *v1alpha1.Provider, name string) (v1alpha1.FailureDomain, bool) {
	for _, fd := range provider.Status.FailureDomains {
		if fd.Name == name {
			return fd, true
		}
	}
	return v1alpha1.FailureDomain{}, false
}

// ThinDisks refuses a disk of resolved provisioned other than thin, for a
// backend that cannot allocate disks otherwise: why says what it does
// instead.
func ThinDisks(resolved *v1alpha1.ResolvedVirtualMachine, why string) *field.Error {
	for i, d := range resolved.Spec.Disks {
		if d.Provisioning != "" && d.Provisioning != v1alpha1.DiskProvisioningThin {
			return field.NotSupported(field.NewPath("spec", "disks").Index(i).Child("provisioning"), d.Provisioning,
				[]string{string(v1alpha1.DiskProvisioningThin) + " (" + why + ")"})
		}
	}
	return nil
}

// GuestOS is the guest operating system of a resolved image in the
// machine's terms, nil when the image names none: the family in lower
// case (linux and windows as they are, any other named family other;
// none named, the distribution's: windows for windows and
// windows-server, linux for the distributions the backends know), the
// distribution in lower case under its usual name (rocky for Rocky
// Linux, rhel for Red Hat) and the version as the image writes them.
func GuestOS(img v1alpha1.ResolvedImage) *infrav1.GuestOS {
	family := strings.ToLower(strings.TrimSpace(img.OSFamily))
	g := &infrav1.GuestOS{
		Distribution: strings.ToLower(strings.TrimSpace(img.OSDistribution)),
		Version:      strings.TrimSpace(img.OSVersion),
	}
	if d, ok := distributionAliases[g.Distribution]; ok {
		g.Distribution = d
	}
	if family == "" && g.Distribution == "" && g.Version == "" {
		return nil
	}
	switch {
	case family == string(infrav1.GuestOSFamilyLinux), family == string(infrav1.GuestOSFamilyWindows):
		g.Family = infrav1.GuestOSFamily(family)
	case family != "":
		g.Family = infrav1.GuestOSFamilyOther
	case g.Distribution == "windows", g.Distribution == "windows-server":
		g.Family = infrav1.GuestOSFamilyWindows
	case slices.Contains(LinuxDistributions, g.Distribution):
		g.Family = infrav1.GuestOSFamilyLinux
	default:
		g.Family = infrav1.GuestOSFamilyOther
	}
	return g
}

// LinuxDistributions are the distribution names (VMImage osDistribution,
// in lower case) that make an image linux when it names no osFamily, and
// that at least one backend maps to its own guest OS identifier.
var LinuxDistributions = []string{
	"ubuntu", "debian", "rhel", "centos", "centos-stream", "rocky", "almalinux", "oraclelinux",
	"fedora", "sles", "opensuse", "flatcar", "fedora-coreos", "photon", "amazonlinux",
}

// distributionAliases are other names of LinuxDistributions' (and
// Windows Server's), in lower case.
var distributionAliases = map[string]string{
	"redhat": "rhel", "red hat": "rhel", "red hat enterprise linux": "rhel",
	"centos stream": "centos-stream", "centosstream": "centos-stream",
	"rockylinux": "rocky", "rocky linux": "rocky", "alma": "almalinux", "alma linux": "almalinux",
	"oracle": "oraclelinux", "oracle linux": "oraclelinux", "ol": "oraclelinux",
	"suse": "sles", "opensuse-leap": "opensuse", "opensuse leap": "opensuse",
	"fcos": "fedora-coreos", "flatcar container linux": "flatcar", "photon os": "photon",
	"amazon": "amazonlinux", "amazon linux": "amazonlinux", "amzn": "amazonlinux",
	"windows server": "windows-server", "windowsserver": "windows-server",
}

// Architecture is an image's architecture (VMImage architecture) in the
// machine's terms, accepting the kernel's names too (x86_64, aarch64);
// "" and true when the image names none, false when it names one no
// backend knows.
func Architecture(s string) (infrav1.Architecture, bool) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "":
		return "", true
	case "amd64", "x86_64", "x86-64", "x64":
		return infrav1.ArchitectureAMD64, true
	case "arm64", "aarch64":
		return infrav1.ArchitectureARM64, true
	case "ppc64le":
		return infrav1.ArchitecturePPC64LE, true
	case "s390x":
		return infrav1.ArchitectureS390X, true
	case "riscv64":
		return infrav1.ArchitectureRISCV64, true
	}
	return "", false
}

// ImageArchitecture refuses, on spec.image.architecture, an image built
// for an architecture other than those a backend runs (why says why): an
// image naming none is taken to be for the backend's own.
func ImageArchitecture(resolved *v1alpha1.ResolvedVirtualMachine, runs []infrav1.Architecture, why string) *field.Error {
	named := resolved.Spec.Image.Architecture
	arch, known := Architecture(named)
	if named == "" || known && slices.Contains(runs, arch) {
		return nil
	}
	allowed := make([]string, 0, len(runs))
	for _, a := range runs {
		allowed = append(allowed, string(a))
	}
	if len(allowed) > 0 {
		allowed[len(allowed)-1] += " (" + why + ")"
	}
	return field.NotSupported(field.NewPath("spec", "image", "architecture"), named, allowed)
}
