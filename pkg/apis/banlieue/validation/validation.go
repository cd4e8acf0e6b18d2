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

// Package validation checks banlieue.io objects (internal versions). Every
// problem is reported as a field.Error carrying the exact field path, so a
// rejected request tells the user which field to fix.
//
// Update rules, chosen so that controllers can honour every accepted change:
//   - VirtualMachine: classRef, imageRef and userData are immutable (a new
//     shape, image or first-boot payload means a new VM); placement and
//     networkOverrides are immutable once status.scheduled is set; a disk
//     override may grow but may not shrink or be removed.
//   - Provider: providerClassRef is immutable.
//   - VMClass and VMImage are mutable; VMs already placed keep what they got.
package validation

import (
	"fmt"
	"net/netip"
	"regexp"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// Bounds on list sizes and free-form strings. They keep a single object well
// below etcd's request limit and the scheduler's work per VM bounded.
const (
	MaxDisks            = 32
	MaxInterfaces       = 16
	MaxNameservers      = 8
	MaxFeatures         = 64
	MaxSources          = 32
	MaxCloudConfigs     = 16
	MaxCapabilityItems  = 256
	MaxFailureDomains   = 1024
	MaxNameOverrides    = 1024
	MaxAddresses        = 64
	MaxPerProvider      = 1024
	MaxFreeTextLength   = 256
	MaxInlineCABytes    = 256 * 1024
	MaxStatusConditions = 32
)

var featureNameRE = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9-]{0,62}$`)

// ValidateVirtualMachine validates a new VirtualMachine.
func ValidateVirtualMachine(vm *banlieue.VirtualMachine) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&vm.ObjectMeta, true, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	allErrs = append(allErrs, validateVirtualMachineSpec(&vm.Spec, field.NewPath("spec"))...)
	return allErrs
}

func validateVirtualMachineSpec(spec *banlieue.VirtualMachineSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateRefName(spec.ClassRef.Name, p.Child("classRef", "name"))...)
	allErrs = append(allErrs, validateRefName(spec.ImageRef.Name, p.Child("imageRef", "name"))...)
	allErrs = append(allErrs, validateEnum(spec.MigrationPolicy, migrationPolicies, false, p.Child("migrationPolicy"))...)
	if t := spec.MigrationTimeoutSeconds; t != nil && *t < 1 {
		allErrs = append(allErrs, field.Invalid(p.Child("migrationTimeoutSeconds"), *t, "must be at least 1"))
	}
	if spec.Placement != nil {
		allErrs = append(allErrs, validateSelector(spec.Placement.ProviderSelector, p.Child("placement", "providerSelector"))...)
		allErrs = append(allErrs, validateSelector(spec.Placement.FailureDomainSelector, p.Child("placement", "failureDomainSelector"))...)
		allErrs = append(allErrs, validateAntiAffinity(spec.Placement.AntiAffinity, p.Child("placement", "antiAffinity"))...)
	}
	allErrs = append(allErrs, validatePowerState(spec.DesiredPowerState, true, p.Child("desiredPowerState"))...)
	allErrs = append(allErrs, validateEnum(spec.PowerOffMode, powerOffModes, false, p.Child("powerOffMode"))...)
	if g := spec.PowerOffGraceSeconds; g != nil && (*g < 0 || *g > maxPowerOffGraceSeconds) {
		allErrs = append(allErrs, field.Invalid(p.Child("powerOffGraceSeconds"), *g, fmt.Sprintf("must be between 0 and %d", maxPowerOffGraceSeconds)))
	}
	if spec.UserData != nil {
		allErrs = append(allErrs, validateUserData(spec.UserData, p.Child("userData"))...)
	}
	if o := spec.HardwareOverride; o != nil {
		hp := p.Child("hardwareOverride")
		if o.CPUs != nil && *o.CPUs < 1 {
			allErrs = append(allErrs, field.Invalid(hp.Child("cpus"), *o.CPUs, "must be at least 1"))
		}
		if o.MemoryMiB != nil && *o.MemoryMiB < 1 {
			allErrs = append(allErrs, field.Invalid(hp.Child("memoryMiB"), *o.MemoryMiB, "must be at least 1"))
		}
		dp := hp.Child("diskOverrides")
		allErrs = append(allErrs, tooMany(len(o.DiskOverrides), MaxDisks, dp)...)
		names := sets.New[string]()
		for i, d := range o.DiskOverrides {
			ip := dp.Index(i)
			allErrs = append(allErrs, validateUniqueLabel(d.Name, names, ip.Child("name"))...)
			if d.SizeGiB == nil {
				allErrs = append(allErrs, field.Required(ip.Child("sizeGiB"), "an override must set sizeGiB"))
			} else if *d.SizeGiB < 1 {
				allErrs = append(allErrs, field.Invalid(ip.Child("sizeGiB"), *d.SizeGiB, "must be at least 1"))
			}
		}
	}
	np := p.Child("networkOverrides")
	allErrs = append(allErrs, tooMany(len(spec.NetworkOverrides), MaxInterfaces, np)...)
	names := sets.New[string]()
	for i, n := range spec.NetworkOverrides {
		ip := np.Index(i)
		allErrs = append(allErrs, validateUniqueLabel(n.Name, names, ip.Child("name"))...)
		allErrs = append(allErrs, exactlyOne(ip, map[string]bool{"static": n.Static != nil, "dhcp": n.DHCP, "pool": n.Pool != nil})...)
		if n.Static != nil {
			allErrs = append(allErrs, validateStaticIP(n.Static, ip.Child("static"))...)
		}
		if n.Pool != nil {
			allErrs = append(allErrs, validatePoolRef(n.Pool, ip.Child("pool"))...)
		}
	}
	return allErrs
}

// ValidateVirtualMachineUpdate validates a spec update of a VirtualMachine.
func ValidateVirtualMachineUpdate(vm, old *banlieue.VirtualMachine) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&vm.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateVirtualMachineSpec(&vm.Spec, field.NewPath("spec"))...)
	p := field.NewPath("spec")
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(vm.Spec.ClassRef, old.Spec.ClassRef, p.Child("classRef"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(vm.Spec.ImageRef, old.Spec.ImageRef, p.Child("imageRef"))...)
	allErrs = append(allErrs, apimachineryvalidation.ValidateImmutableField(vm.Spec.UserData, old.Spec.UserData, p.Child("userData"))...)
	if old.Status.Scheduled != nil {
		// placement may change: a placement the VM no longer meets is
		// a migration (spec.migrationPolicy).
		if !apiequality.Semantic.DeepEqual(vm.Spec.NetworkOverrides, old.Spec.NetworkOverrides) {
			allErrs = append(allErrs, field.Forbidden(p.Child("networkOverrides"), "may not change once the VM is scheduled (status.scheduled is set)"))
		}
	}
	allErrs = append(allErrs, validateDiskOverridesGrowOnly(vm.Spec.HardwareOverride, old.Spec.HardwareOverride, p.Child("hardwareOverride", "diskOverrides"))...)
	return allErrs
}

// validateDiskOverridesGrowOnly keeps disks from shrinking: no backend can
// shrink a disk in place, so an accepted shrink could never be honoured.
func validateDiskOverridesGrowOnly(o, old *banlieue.HardwareOverride, p *field.Path) field.ErrorList {
	if old == nil {
		return nil
	}
	current := map[string]int64{}
	if o != nil {
		for _, d := range o.DiskOverrides {
			if d.SizeGiB != nil {
				current[d.Name] = *d.SizeGiB
			}
		}
	}
	var allErrs field.ErrorList
	for _, d := range old.DiskOverrides {
		if d.SizeGiB == nil {
			continue
		}
		size, ok := current[d.Name]
		switch {
		case !ok:
			allErrs = append(allErrs, field.Forbidden(p, fmt.Sprintf("the override of disk %q may not be removed: disks cannot shrink", d.Name)))
		case size < *d.SizeGiB:
			allErrs = append(allErrs, field.Forbidden(p.Key(d.Name).Child("sizeGiB"), fmt.Sprintf("may not shrink from %d to %d", *d.SizeGiB, size)))
		}
	}
	return allErrs
}

// ValidateVirtualMachineStatusUpdate validates an update of the status subresource.
func ValidateVirtualMachineStatusUpdate(vm, old *banlieue.VirtualMachine) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&vm.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	s := vm.Status
	p := field.NewPath("status")
	if s.ObservedGeneration < 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("observedGeneration"), s.ObservedGeneration, "must not be negative"))
	}
	allErrs = append(allErrs, validateConditions(s.Conditions, p.Child("conditions"))...)
	allErrs = append(allErrs, validatePowerState(s.PowerState, false, p.Child("powerState"))...)
	if sc := s.Scheduled; sc != nil {
		sp := p.Child("scheduled")
		if sc.Provider == "" {
			allErrs = append(allErrs, field.Required(sp.Child("provider"), ""))
		}
		names := sets.New[string]()
		for i, r := range sc.Storage {
			allErrs = append(allErrs, validateUniqueLabel(r.Name, names, sp.Child("storage").Index(i).Child("name"))...)
		}
		names = sets.New[string]()
		for i, r := range sc.Network {
			allErrs = append(allErrs, validateUniqueLabel(r.Name, names, sp.Child("network").Index(i).Child("name"))...)
		}
	}
	if r := s.InfrastructureRef; r != nil {
		rp := p.Child("infrastructureRef")
		if r.Kind == "" {
			allErrs = append(allErrs, field.Required(rp.Child("kind"), ""))
		}
		allErrs = append(allErrs, validateRefName(r.Name, rp.Child("name"))...)
	}
	ap := p.Child("addresses")
	allErrs = append(allErrs, tooMany(len(s.Addresses), MaxAddresses, ap)...)
	for i, a := range s.Addresses {
		allErrs = append(allErrs, validateEnum(a.Type, addressTypes, true, ap.Index(i).Child("type"))...)
		if a.Address == "" {
			allErrs = append(allErrs, field.Required(ap.Index(i).Child("address"), ""))
		}
	}
	return allErrs
}

// ValidateVMClass validates a new VMClass.
func ValidateVMClass(c *banlieue.VMClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&c.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	return append(allErrs, validateVMClassSpec(&c.Spec, field.NewPath("spec"))...)
}

// ValidateVMClassUpdate validates an update of a VMClass. Classes are mutable.
func ValidateVMClassUpdate(c, old *banlieue.VMClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	return append(allErrs, validateVMClassSpec(&c.Spec, field.NewPath("spec"))...)
}

func validateVMClassSpec(spec *banlieue.VMClassSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	hp := p.Child("hardware")
	if spec.Hardware.CPUs < 1 {
		allErrs = append(allErrs, field.Invalid(hp.Child("cpus"), spec.Hardware.CPUs, "must be at least 1"))
	}
	if spec.Hardware.MemoryMiB < 1 {
		allErrs = append(allErrs, field.Invalid(hp.Child("memoryMiB"), spec.Hardware.MemoryMiB, "must be at least 1"))
	}
	dp := hp.Child("disks")
	allErrs = append(allErrs, tooMany(len(spec.Hardware.Disks), MaxDisks, dp)...)
	names := sets.New[string]()
	for i, d := range spec.Hardware.Disks {
		ip := dp.Index(i)
		allErrs = append(allErrs, validateUniqueLabel(d.Name, names, ip.Child("name"))...)
		if d.SizeGiB < 1 {
			allErrs = append(allErrs, field.Invalid(ip.Child("sizeGiB"), d.SizeGiB, "must be at least 1"))
		}
		if d.StorageClass != "" {
			allErrs = append(allErrs, validateLabel(d.StorageClass, ip.Child("storageClass"))...)
		}
		allErrs = append(allErrs, validateEnum(d.Provisioning, provisionings, true, ip.Child("provisioning"))...)
	}
	if spec.Network != nil {
		np := p.Child("network", "interfaces")
		allErrs = append(allErrs, tooMany(len(spec.Network.Interfaces), MaxInterfaces, np)...)
		names := sets.New[string]()
		for i, n := range spec.Network.Interfaces {
			ip := np.Index(i)
			allErrs = append(allErrs, validateUniqueLabel(n.Name, names, ip.Child("name"))...)
			if n.NetworkClass != "" {
				allErrs = append(allErrs, validateLabel(n.NetworkClass, ip.Child("networkClass"))...)
			}
			allErrs = append(allErrs, validateIPAM(&n.IPAM, ip.Child("ipam"))...)
		}
	}
	allErrs = append(allErrs, validateEnum(spec.Firmware, firmwares, false, p.Child("firmware"))...)
	allErrs = append(allErrs, validateFeatures(spec.Features, p.Child("features"))...)
	if spec.TPMEnabled && spec.Firmware != banlieue.FirmwareEFI && spec.Firmware != banlieue.FirmwareEFISecure {
		allErrs = append(allErrs, field.Invalid(p.Child("tpmEnabled"), spec.TPMEnabled, "requires spec.firmware efi or efi-secure"))
	}
	return allErrs
}

func validateIPAM(ipam *banlieue.IPAMConfig, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	if ipam.Static != nil && ipam.Pool != nil {
		allErrs = append(allErrs, field.Invalid(p, "static, pool", "at most one of static or pool may be set (neither means DHCP)"))
	}
	if ipam.Static != nil {
		allErrs = append(allErrs, validateStaticIP(ipam.Static, p.Child("static"))...)
	}
	if ipam.Pool != nil {
		allErrs = append(allErrs, validatePoolRef(ipam.Pool, p.Child("pool"))...)
	}
	return allErrs
}

func validatePoolRef(r *banlieue.IPPoolReference, p *field.Path) field.ErrorList {
	allErrs := validateRefName(r.Name, p.Child("name"))
	if r.APIGroup != "" {
		for _, msg := range utilvalidation.IsDNS1123Subdomain(r.APIGroup) {
			allErrs = append(allErrs, field.Invalid(p.Child("apiGroup"), r.APIGroup, msg))
		}
	}
	if r.Kind != "" && !kindPattern.MatchString(r.Kind) {
		allErrs = append(allErrs, field.Invalid(p.Child("kind"), r.Kind, "must be a kind, e.g. InClusterIPPool"))
	}
	return allErrs
}

var kindPattern = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)

// ValidateVMImage validates a new VMImage.
func ValidateVMImage(img *banlieue.VMImage) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&img.ObjectMeta, false, apimachineryvalidation.NameIsDNSSubdomain, field.NewPath("metadata"))
	allErrs = append(allErrs, validateArchitecture(img.Spec.Architecture, field.NewPath("spec", "architecture"))...)
	return append(allErrs, validateVMImageSpec(&img.Spec, field.NewPath("spec"))...)
}

// ValidateVMImageUpdate validates an update of a VMImage. Images are
// mutable. An architecture is checked when it changes: one an image was
// stored with before it was checked stays until it is edited (every
// backend refuses it when a VM is placed).
func ValidateVMImageUpdate(img, old *banlieue.VMImage) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&img.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	if img.Spec.Architecture != old.Spec.Architecture {
		allErrs = append(allErrs, validateArchitecture(img.Spec.Architecture, field.NewPath("spec", "architecture"))...)
	}
	return append(allErrs, validateVMImageSpec(&img.Spec, field.NewPath("spec"))...)
}

// architectures are the names an image's architecture may have, in any
// case: Go's and Kubernetes' (kubernetes.io/arch) and the kernel's for
// the same.
var architectures = sets.New("amd64", "x86_64", "x86-64", "x64", "arm64", "aarch64", "ppc64le", "s390x", "riscv64")

func validateArchitecture(a string, p *field.Path) field.ErrorList {
	if a == "" || architectures.Has(strings.ToLower(strings.TrimSpace(a))) {
		return nil
	}
	return field.ErrorList{field.NotSupported(p, a, []string{"amd64 (or x86_64)", "arm64 (or aarch64)", "ppc64le", "s390x", "riscv64"})}
}

func validateVMImageSpec(spec *banlieue.VMImageSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for name, v := range map[string]string{
		"osFamily": spec.OSFamily, "osDistribution": spec.OSDistribution, "osVersion": spec.OSVersion,
		"architecture": spec.Architecture,
	} {
		if len(v) > MaxFreeTextLength {
			allErrs = append(allErrs, field.TooLong(p.Child(name), "", MaxFreeTextLength))
		}
	}
	allErrs = append(allErrs, validateGuestAgent(spec.GuestAgent, p.Child("guestAgent"))...)
	sp := p.Child("sources")
	if len(spec.Sources) == 0 && spec.Import == nil {
		allErrs = append(allErrs, field.Required(sp, "an image needs spec.import (a URL banlieue fetches) or at least one source: the template or volume it is built from on some provider class"))
	}
	if spec.Import != nil {
		allErrs = append(allErrs, validateImageImport(spec, p.Child("import"))...)
	}
	allErrs = append(allErrs, tooMany(len(spec.Sources), MaxSources, sp)...)
	classes := sets.New[string]()
	for i, s := range spec.Sources {
		ip := sp.Index(i)
		allErrs = append(allErrs, validateUniqueLabel(s.ProviderClass, classes, ip.Child("providerClass"))...)
		allErrs = append(allErrs, validateEnum(s.Kind, sourceKinds, true, ip.Child("kind"))...)
		allErrs = append(allErrs, validateFreeText(s.Ref, true, ip.Child("ref"))...)
		allErrs = append(allErrs, validateSource(s, ip)...)
	}
	if t := spec.Template; t != nil {
		allErrs = append(allErrs, validateEnum(t.Firmware, firmwares, false, p.Child("template", "firmware"))...)
		allErrs = append(allErrs, validateEnum(t.InstallMode, installModes, true, p.Child("template", "installMode"))...)
	}
	cp := p.Child("cloudConfigs")
	if len(spec.CloudConfigs) > 0 && spec.GuestAgent == banlieue.GuestAgentIgnition {
		allErrs = append(allErrs, field.Forbidden(cp, "cloud-config documents are for cloud-init; an ignition image's whole config is the VM's user data"))
	}
	allErrs = append(allErrs, tooMany(len(spec.CloudConfigs), MaxCloudConfigs, cp)...)
	for i, c := range spec.CloudConfigs {
		allErrs = append(allErrs, validateRefName(c.SecretRef.Name, cp.Index(i).Child("secretRef", "name"))...)
	}
	return allErrs
}

// MaxAntiAffinityTerms bounds a VM's anti-affinity terms.
const MaxAntiAffinityTerms = 16

func validateAntiAffinity(terms []banlieue.AntiAffinityTerm, p *field.Path) field.ErrorList {
	allErrs := tooMany(len(terms), MaxAntiAffinityTerms, p)
	for i, t := range terms {
		ip := p.Index(i)
		allErrs = append(allErrs, validateEnum(t.TopologyKey, topologyKeys, true, ip.Child("topologyKey"))...)
		allErrs = append(allErrs, validateEnum(t.Mode, antiAffinityModes, false, ip.Child("mode"))...)
		if t.LabelSelector == nil {
			allErrs = append(allErrs, field.Required(ip.Child("labelSelector"), "a term keeps the VM apart from the VMs it selects"))
			continue
		}
		allErrs = append(allErrs, validateSelector(t.LabelSelector, ip.Child("labelSelector"))...)
	}
	return allErrs
}

// validateGuestAgent accepts the agents whose user data every backend
// delivers, and refuses sysprep by name.
func validateGuestAgent(a banlieue.GuestAgent, p *field.Path) field.ErrorList {
	if a == banlieue.GuestAgentSysprep {
		return field.ErrorList{field.Invalid(p, a, "sysprep is not supported yet: no backend delivers Windows answer files; use cloud-init (cloudbase-init on Windows) or ignition")}
	}
	return validateEnum(a, guestAgents, false, p)
}

// ValidateVMImageStatusUpdate validates an update of a VMImage's status.
func ValidateVMImageStatusUpdate(img, old *banlieue.VMImage) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&img.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	pp := field.NewPath("status", "perProvider")
	allErrs = append(allErrs, tooMany(len(img.Status.PerProvider), MaxPerProvider, pp)...)
	seen := sets.New[string]()
	for i, s := range img.Status.PerProvider {
		ip := pp.Index(i)
		switch {
		case s.Provider == "":
			allErrs = append(allErrs, field.Required(ip.Child("provider"), ""))
		case seen.Has(s.Provider):
			allErrs = append(allErrs, field.Duplicate(ip.Child("provider"), s.Provider))
		}
		seen.Insert(s.Provider)
		if !s.Ready && s.Reason == "" {
			allErrs = append(allErrs, field.Required(ip.Child("reason"), "a provider that is not ready needs a reason"))
		}
		allErrs = append(allErrs, validateImageFailureDomains(s.FailureDomains, ip.Child("failureDomains"))...)
	}
	return allErrs
}

// ValidateVMImageFinalizersUpdate validates a write of a VMImage's finalizers.
func ValidateVMImageFinalizersUpdate(img, old *banlieue.VMImage) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMetaUpdate(&img.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
}

// ValidateProvider validates a new Provider.
func ValidateProvider(pr *banlieue.Provider) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&pr.ObjectMeta, true, apimachineryvalidation.NameIsDNSLabel, field.NewPath("metadata"))
	return append(allErrs, validateProviderSpec(&pr.Spec, field.NewPath("spec"))...)
}

// ValidateProviderUpdate validates a spec update of a Provider.
func ValidateProviderUpdate(pr, old *banlieue.Provider) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&pr.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateProviderSpec(&pr.Spec, field.NewPath("spec"))...)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(pr.Spec.ProviderClassRef, old.Spec.ProviderClassRef, field.NewPath("spec", "providerClassRef"))...)
}

func validateProviderSpec(spec *banlieue.ProviderSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateLabel(spec.ProviderClassRef.Name, p.Child("providerClassRef", "name"))...)
	cp := p.Child("connection")
	class := spec.ProviderClassRef.Name
	allErrs = append(allErrs, validateConnection(class, &spec.Connection, cp)...)
	if ca := spec.Connection.CABundle; ca != nil {
		bp := cp.Child("caBundle")
		allErrs = append(allErrs, exactlyOne(bp, map[string]bool{
			"inline": ca.Inline != "", "configMapRef": ca.ConfigMapRef != nil, "secretRef": ca.SecretRef != nil,
		})...)
		if len(ca.Inline) > MaxInlineCABytes {
			allErrs = append(allErrs, field.TooLong(bp.Child("inline"), "", MaxInlineCABytes))
		}
		allErrs = append(allErrs, validateKeySelector(ca.ConfigMapRef, bp.Child("configMapRef"))...)
		allErrs = append(allErrs, validateKeySelector(ca.SecretRef, bp.Child("secretRef"))...)
		if spec.Connection.InsecureSkipTLSVerify {
			allErrs = append(allErrs, field.Invalid(cp.Child("insecureSkipTLSVerify"), true, "may not be combined with caBundle"))
		}
	}

	capp := p.Child("capabilities")
	sp := capp.Child("storageClasses")
	allErrs = append(allErrs, tooMany(len(spec.Capabilities.StorageClasses), MaxCapabilityItems, sp)...)
	names := sets.New[string]()
	for i, s := range spec.Capabilities.StorageClasses {
		allErrs = append(allErrs, validateUniqueLabel(s.Name, names, sp.Index(i).Child("name"))...)
		allErrs = append(allErrs, validateTarget(class, "storage", map[string]string{"datastore": s.Target.Datastore, "pool": s.Target.Pool, "storage": s.Target.Storage}, sp.Index(i).Child("target"))...)
	}
	np := capp.Child("networkClasses")
	allErrs = append(allErrs, tooMany(len(spec.Capabilities.NetworkClasses), MaxCapabilityItems, np)...)
	names = sets.New[string]()
	for i, n := range spec.Capabilities.NetworkClasses {
		allErrs = append(allErrs, validateUniqueLabel(n.Name, names, np.Index(i).Child("name"))...)
		allErrs = append(allErrs, validateTarget(class, "network", map[string]string{"portGroup": n.Target.PortGroup, "network": n.Target.Network, "bridge": n.Target.Bridge}, np.Index(i).Child("target"))...)
		allErrs = append(allErrs, validateVLAN(class, n.Target.VLAN, np.Index(i).Child("target", "vlan"))...)
	}
	allErrs = append(allErrs, validateFeatures(spec.Capabilities.Features, capp.Child("features"))...)
	allErrs = append(allErrs, validateClassFeatures(class, spec.Capabilities.Features, capp.Child("features"))...)
	allErrs = append(allErrs, validateMaxSnapshots(spec.Capabilities.MaxSnapshotsPerVM, capp.Child("maxSnapshotsPerVM"))...)

	op := p.Child("failureDomainNameOverrides")
	allErrs = append(allErrs, tooMany(len(spec.FailureDomainNameOverrides), MaxNameOverrides, op)...)
	pairs := sets.New[[3]string]()
	names = sets.New[string]()
	for i := range spec.FailureDomainNameOverrides {
		o := &spec.FailureDomainNameOverrides[i]
		ip := op.Index(i)
		allErrs = append(allErrs, validateOverrideLocation(class, o, ip)...)
		if pairs.Has([3]string{o.Datacenter, o.Cluster, o.Host}) {
			allErrs = append(allErrs, field.Duplicate(ip, overrideLocation(o)))
		}
		pairs.Insert([3]string{o.Datacenter, o.Cluster, o.Host})
		allErrs = append(allErrs, validateUniqueLabel(o.Name, names, ip.Child("name"))...)
		allErrs = append(allErrs, metav1validation.ValidateLabels(o.Labels, ip.Child("labels"))...)
		if _, ok := o.Labels["name"]; ok {
			allErrs = append(allErrs, field.Forbidden(ip.Child("labels").Key("name"), "the \"name\" label is always the failure domain's name"))
		}
	}
	return allErrs
}

// ValidateProviderFinalizersUpdate validates a write to /finalizers, whose
// strategy already kept everything else of the stored Provider.
func ValidateProviderFinalizersUpdate(pr, old *banlieue.Provider) field.ErrorList {
	return apimachineryvalidation.ValidateObjectMetaUpdate(&pr.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
}

// ValidateProviderStatusUpdate validates an update of a Provider's status.
func ValidateProviderStatusUpdate(pr, old *banlieue.Provider) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&pr.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	p := field.NewPath("status")
	allErrs = append(allErrs, validateConditions(pr.Status.Conditions, p.Child("conditions"))...)
	fp := p.Child("failureDomains")
	allErrs = append(allErrs, tooMany(len(pr.Status.FailureDomains), MaxFailureDomains, fp)...)
	names := sets.New[string]()
	for i, fd := range pr.Status.FailureDomains {
		ip := fp.Index(i)
		allErrs = append(allErrs, validateUniqueLabel(fd.Name, names, ip.Child("name"))...)
		allErrs = append(allErrs, metav1validation.ValidateLabels(fd.Labels, ip.Child("labels"))...)
	}
	return append(allErrs, validateWorkload(pr.Status.Workload, p.Child("workload"))...)
}

// ---------------------------------------------------------------------------
// helpers

var (
	powerStates       = sets.New(banlieue.PowerStatePoweredOn, banlieue.PowerStatePoweredOff, banlieue.PowerStateSuspended)
	powerOffModes     = sets.New(banlieue.PowerOffModeHard, banlieue.PowerOffModeSoft, banlieue.PowerOffModeTrySoft)
	firmwares         = sets.New(banlieue.FirmwareBIOS, banlieue.FirmwareEFI, banlieue.FirmwareEFISecure)
	provisionings     = sets.New(banlieue.DiskProvisioningThin, banlieue.DiskProvisioningThick, banlieue.DiskProvisioningEagerZeroed)
	installModes      = sets.New(banlieue.InstallModeImmediate, banlieue.InstallModeDeferred)
	guestAgents       = sets.New(banlieue.GuestAgentCloudInit, banlieue.GuestAgentIgnition)
	migrationPolicies = sets.New(banlieue.MigrationAutomatic, banlieue.MigrationManual, banlieue.MigrationNever)
	topologyKeys      = sets.New(banlieue.AntiAffinityProvider, banlieue.AntiAffinityFailureDomain)
	antiAffinityModes = sets.New(banlieue.AntiAffinityRequired, banlieue.AntiAffinityPreferred)
	sourceKinds       = sets.New(banlieue.ImageSourceTemplate, banlieue.ImageSourceVolume)
	addressTypes      = sets.New(banlieue.MachineHostName, banlieue.MachineExternalIP, banlieue.MachineInternalIP,
		banlieue.MachineExternalDNS, banlieue.MachineInternalDNS)
)

// maxPowerOffGraceSeconds bounds a TrySoft grace period as the infra
// machines' CRDs do: a guest not down within an hour is not shutting down.
const maxPowerOffGraceSeconds = 3600

func validatePowerState(s banlieue.PowerState, required bool, p *field.Path) field.ErrorList {
	return validateEnum(s, powerStates, required, p)
}

func validateEnum[T ~string](v T, allowed sets.Set[T], required bool, p *field.Path) field.ErrorList {
	if v == "" {
		if required {
			return field.ErrorList{field.Required(p, "")}
		}
		return nil
	}
	if !allowed.Has(v) {
		return field.ErrorList{field.NotSupported(p, v, sets.List(allowed))}
	}
	return nil
}

// validateRefName checks the name of a referenced object (DNS-1123 subdomain).
func validateRefName(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Subdomain(name) {
		allErrs = append(allErrs, field.Invalid(p, name, msg))
	}
	return allErrs
}

// validateLabel checks a name that must be a DNS-1123 label.
func validateLabel(name string, p *field.Path) field.ErrorList {
	if name == "" {
		return field.ErrorList{field.Required(p, "")}
	}
	var allErrs field.ErrorList
	for _, msg := range utilvalidation.IsDNS1123Label(name) {
		allErrs = append(allErrs, field.Invalid(p, name, msg))
	}
	return allErrs
}

// validateUniqueLabel checks a list-map key: a DNS-1123 label, unique in its list.
func validateUniqueLabel(name string, seen sets.Set[string], p *field.Path) field.ErrorList {
	allErrs := validateLabel(name, p)
	if name != "" && seen.Has(name) {
		allErrs = append(allErrs, field.Duplicate(p, name))
	}
	seen.Insert(name)
	return allErrs
}

func validateFreeText(s string, required bool, p *field.Path) field.ErrorList {
	switch {
	case s == "" && required:
		return field.ErrorList{field.Required(p, "")}
	case len(s) > MaxFreeTextLength:
		return field.ErrorList{field.TooLong(p, "", MaxFreeTextLength)}
	}
	return nil
}

func validateFeatures(features []string, p *field.Path) field.ErrorList {
	allErrs := tooMany(len(features), MaxFeatures, p)
	seen := sets.New[string]()
	for i, f := range features {
		switch {
		case !featureNameRE.MatchString(f):
			allErrs = append(allErrs, field.Invalid(p.Index(i), f, "must start with a letter and contain only letters, digits and '-' (at most 63 characters)"))
		case seen.Has(f):
			allErrs = append(allErrs, field.Duplicate(p.Index(i), f))
		}
		seen.Insert(f)
	}
	return allErrs
}

func validateSelector(sel *metav1.LabelSelector, p *field.Path) field.ErrorList {
	if sel == nil {
		return nil
	}
	return metav1validation.ValidateLabelSelector(sel, metav1validation.LabelSelectorValidationOptions{}, p)
}

func validateUserData(u *banlieue.UserData, p *field.Path) field.ErrorList {
	allErrs := exactlyOne(p, map[string]bool{"secretRef": u.SecretRef != nil, "configMapRef": u.ConfigMapRef != nil})
	allErrs = append(allErrs, validateKeySelector(u.SecretRef, p.Child("secretRef"))...)
	return append(allErrs, validateKeySelector(u.ConfigMapRef, p.Child("configMapRef"))...)
}

func validateKeySelector(ref *banlieue.KeySelector, p *field.Path) field.ErrorList {
	if ref == nil {
		return nil
	}
	allErrs := validateRefName(ref.Name, p.Child("name"))
	if ref.Key == "" {
		return append(allErrs, field.Required(p.Child("key"), ""))
	}
	for _, msg := range utilvalidation.IsConfigMapKey(ref.Key) {
		allErrs = append(allErrs, field.Invalid(p.Child("key"), ref.Key, msg))
	}
	return allErrs
}

// exactlyOne reports unless exactly one of the named members is set.
func exactlyOne(p *field.Path, set map[string]bool) field.ErrorList {
	var names, given []string
	for _, n := range sets.List(sets.KeySet(set)) {
		names = append(names, n)
		if set[n] {
			given = append(given, n)
		}
	}
	switch len(given) {
	case 1:
		return nil
	case 0:
		return field.ErrorList{field.Required(p, fmt.Sprintf("exactly one of %v must be set", names))}
	default:
		return field.ErrorList{field.Invalid(p, given, fmt.Sprintf("exactly one of %v must be set", names))}
	}
}

// validateStaticIP checks address, prefix range per family, gateway inside
// the prefix and nameserver addresses.
func validateStaticIP(s *banlieue.StaticIPConfig, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	addr, err := netip.ParseAddr(s.Address)
	switch {
	case s.Address == "":
		allErrs = append(allErrs, field.Required(p.Child("address"), ""))
	case err != nil || addr.Zone() != "":
		allErrs = append(allErrs, field.Invalid(p.Child("address"), s.Address, "must be an IPv4 or IPv6 address (or CIDR when prefix is omitted)"))
	}
	valid := err == nil && addr.Zone() == ""
	if s.Prefix == nil {
		allErrs = append(allErrs, field.Required(p.Child("prefix"), "give the prefix, or the address in CIDR form"))
	} else if valid {
		maxBits := int32(addr.BitLen())
		if *s.Prefix < 0 || *s.Prefix > maxBits {
			allErrs = append(allErrs, field.Invalid(p.Child("prefix"), *s.Prefix, fmt.Sprintf("must be between 0 and %d for this address family", maxBits)))
			valid = false
		}
	}
	if s.Gateway != "" {
		gw, gerr := netip.ParseAddr(s.Gateway)
		switch {
		case gerr != nil || gw.Zone() != "":
			allErrs = append(allErrs, field.Invalid(p.Child("gateway"), s.Gateway, "must be an IPv4 or IPv6 address"))
		case valid && s.Prefix != nil:
			network := netip.PrefixFrom(addr, int(*s.Prefix)).Masked()
			if gw.Is4() != addr.Is4() || !network.Contains(gw) {
				allErrs = append(allErrs, field.Invalid(p.Child("gateway"), s.Gateway, fmt.Sprintf("must lie inside %s", network)))
			}
		}
	}
	np := p.Child("nameservers")
	allErrs = append(allErrs, tooMany(len(s.Nameservers), MaxNameservers, np)...)
	for i, ns := range s.Nameservers {
		if a, err := netip.ParseAddr(ns); err != nil || a.Zone() != "" {
			allErrs = append(allErrs, field.Invalid(np.Index(i), ns, "must be an IPv4 or IPv6 address"))
		}
	}
	return allErrs
}

func validateConditions(conds []metav1.Condition, p *field.Path) field.ErrorList {
	allErrs := tooMany(len(conds), MaxStatusConditions, p)
	seen := sets.New[string]()
	for i, c := range conds {
		allErrs = append(allErrs, metav1validation.ValidateCondition(c, p.Index(i))...)
		if seen.Has(c.Type) {
			allErrs = append(allErrs, field.Duplicate(p.Index(i).Child("type"), c.Type))
		}
		seen.Insert(c.Type)
	}
	return allErrs
}

func tooMany(n, maxItems int, p *field.Path) field.ErrorList {
	if n > maxItems {
		return field.ErrorList{field.TooMany(p, n, maxItems)}
	}
	return nil
}

// overrideLocation is the failure domain an override names, as a user wrote it.
func overrideLocation(o *banlieue.FailureDomainNameOverride) string {
	if o.Host != "" {
		return "host=" + o.Host
	}
	return fmt.Sprintf("datacenter=%s, cluster=%s", o.Datacenter, o.Cluster)
}
