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

// Package resolve merges a VirtualMachine's override deltas onto its VMClass
// (class ⊕ override). It is the one place that knows the merge rules: the
// API server's "resolved" subresource, the admission plugin and the
// controllers all call it, so what a user sees is what a backend gets.
//
// The package is pure: no I/O, no clocks; callers fetch the objects.
package resolve

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
)

// firmware is the class's, else the image template's, else none: the
// backend then keeps the firmware of the template it clones, as forcing
// BIOS would switch an EFI template to a firmware it cannot boot with.
func firmware(class *v1alpha1.VMClass, image *v1alpha1.VMImage) (v1alpha1.Firmware, v1alpha1.Provenance) {
	if class.Spec.Firmware != "" {
		return class.Spec.Firmware, v1alpha1.ProvenanceClass
	}
	if t := image.Spec.Template; t != nil && t.Firmware != "" {
		return t.Firmware, v1alpha1.ProvenanceImage
	}
	return "", v1alpha1.ProvenanceDefault
}

// CheckOverrides reports every override that names a disk or interface the
// class does not define. The paths are those of the VirtualMachine's spec.
func CheckOverrides(spec *v1alpha1.VirtualMachineSpec, class *v1alpha1.VMClass) field.ErrorList {
	var allErrs field.ErrorList
	disks := sets.New[string]()
	for _, d := range class.Spec.Hardware.Disks {
		disks.Insert(d.Name)
	}
	if o := spec.HardwareOverride; o != nil {
		p := field.NewPath("spec", "hardwareOverride", "diskOverrides")
		for i, d := range o.DiskOverrides {
			if !disks.Has(d.Name) {
				allErrs = append(allErrs, field.NotFound(p.Index(i).Child("name"),
					fmt.Sprintf("%s (VMClass %q defines disks %v)", d.Name, class.Name, sets.List(disks))))
			}
		}
	}
	ifaces := sets.New[string]()
	if class.Spec.Network != nil {
		for _, n := range class.Spec.Network.Interfaces {
			ifaces.Insert(n.Name)
		}
	}
	p := field.NewPath("spec", "networkOverrides")
	for i, n := range spec.NetworkOverrides {
		if !ifaces.Has(n.Name) {
			allErrs = append(allErrs, field.NotFound(p.Index(i).Child("name"),
				fmt.Sprintf("%s (VMClass %q defines interfaces %v)", n.Name, class.Name, sets.List(ifaces))))
		}
	}
	return allErrs
}

// OverrideError is returned by Resolve when overrides name parts the class
// lacks. It carries the field errors so callers can report exact paths.
type OverrideError struct {
	Class  string
	Errors field.ErrorList
}

func (e *OverrideError) Error() string {
	return fmt.Sprintf("overrides do not match VMClass %q: %v", e.Class, e.Errors.ToAggregate())
}

// Resolve merges vm's overrides onto class and describes image. class and
// image must be the objects vm.spec.classRef and vm.spec.imageRef name.
// Inputs are not modified; the result shares no memory with them.
func Resolve(vm *v1alpha1.VirtualMachine, class *v1alpha1.VMClass, image *v1alpha1.VMImage) (*v1alpha1.ResolvedVirtualMachine, error) {
	if errs := CheckOverrides(&vm.Spec, class); len(errs) > 0 {
		return nil, &OverrideError{Class: class.Name, Errors: errs}
	}
	vm = vm.DeepCopy()
	class = class.DeepCopy()
	image = image.DeepCopy()

	out := &v1alpha1.ResolvedVirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "ResolvedVirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{
			Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, Generation: vm.Generation,
			ResourceVersion: vm.ResourceVersion, CreationTimestamp: vm.CreationTimestamp,
			Labels: vm.Labels,
		},
	}
	spec := &out.Spec
	spec.Class, spec.ClassGeneration = class.Name, class.Generation
	hw := class.Spec.Hardware
	override := vm.Spec.HardwareOverride
	if override == nil {
		override = &v1alpha1.HardwareOverride{}
	}

	spec.CPUs = v1alpha1.ResolvedInt32{Value: hw.CPUs, From: v1alpha1.ProvenanceClass}
	if override.CPUs != nil {
		spec.CPUs = v1alpha1.ResolvedInt32{Value: *override.CPUs, From: v1alpha1.ProvenanceOverride}
	}
	spec.MemoryMiB = v1alpha1.ResolvedInt64{Value: hw.MemoryMiB, From: v1alpha1.ProvenanceClass}
	if override.MemoryMiB != nil {
		spec.MemoryMiB = v1alpha1.ResolvedInt64{Value: *override.MemoryMiB, From: v1alpha1.ProvenanceOverride}
	}

	diskSizes := map[string]int64{}
	for _, d := range override.DiskOverrides {
		if d.SizeGiB != nil {
			diskSizes[d.Name] = *d.SizeGiB
		}
	}
	for _, d := range hw.Disks {
		rd := v1alpha1.ResolvedDisk{
			Name:         d.Name,
			SizeGiB:      v1alpha1.ResolvedInt64{Value: d.SizeGiB, From: v1alpha1.ProvenanceClass},
			StorageClass: d.StorageClass,
			Provisioning: d.Provisioning,
		}
		if rd.Provisioning == "" {
			rd.Provisioning = v1alpha1.DefaultDiskProvisioning
		}
		if size, ok := diskSizes[d.Name]; ok {
			rd.SizeGiB = v1alpha1.ResolvedInt64{Value: size, From: v1alpha1.ProvenanceOverride}
		}
		spec.Disks = append(spec.Disks, rd)
	}

	overrides := map[string]*v1alpha1.NetworkOverride{}
	for i := range vm.Spec.NetworkOverrides {
		overrides[vm.Spec.NetworkOverrides[i].Name] = &vm.Spec.NetworkOverrides[i]
	}
	if class.Spec.Network != nil {
		for _, n := range class.Spec.Network.Interfaces {
			spec.Interfaces = append(spec.Interfaces, resolveInterface(n, overrides[n.Name]))
		}
	}

	spec.Firmware, spec.FirmwareFrom = firmware(class, image)
	spec.Features = class.Spec.Features
	spec.TPMEnabled = class.Spec.TPMEnabled

	spec.Image = v1alpha1.ResolvedImage{
		Name:           image.Name,
		OSFamily:       image.Spec.OSFamily,
		OSDistribution: image.Spec.OSDistribution,
		OSVersion:      image.Spec.OSVersion,
		Architecture:   image.Spec.Architecture,
		Sources:        image.Spec.Sources,
		InstallMode:    v1alpha1.DefaultInstallMode,
		GuestAgent:     image.Spec.GuestAgent,
		CloudConfigs:   image.Spec.CloudConfigs,
		Imported:       images.ResolvedAt(image, ImageRevision(vm, image)),
	}
	if spec.Image.GuestAgent == "" {
		spec.Image.GuestAgent = v1alpha1.GuestAgentCloudInit
	}
	if t := image.Spec.Template; t != nil && t.InstallMode != "" {
		spec.Image.InstallMode = t.InstallMode
	}

	spec.Placement = vm.Spec.Placement
	spec.PowerState = vm.Spec.DesiredPowerState
	if spec.PowerState == "" {
		spec.PowerState = v1alpha1.DefaultPowerState
	}
	spec.UserData = vm.Spec.UserData
	return out, nil
}

func resolveInterface(n v1alpha1.NetworkInterfaceSpec, override *v1alpha1.NetworkOverride) v1alpha1.ResolvedInterface {
	ri := v1alpha1.ResolvedInterface{Name: n.Name, NetworkClass: n.NetworkClass}
	switch {
	case override != nil && override.Static != nil:
		ri.Mode, ri.Static, ri.From = v1alpha1.IPAMStatic, override.Static, v1alpha1.ProvenanceOverride
	case override != nil && override.Pool != nil:
		ri.Mode, ri.Pool, ri.From = v1alpha1.IPAMPool, PoolRef(override.Pool), v1alpha1.ProvenanceOverride
	case override != nil && override.DHCP:
		ri.Mode, ri.From = v1alpha1.IPAMDHCP, v1alpha1.ProvenanceOverride
	case n.IPAM.Static != nil:
		ri.Mode, ri.Static, ri.From = v1alpha1.IPAMStatic, n.IPAM.Static, v1alpha1.ProvenanceClass
	case n.IPAM.Pool != nil:
		ri.Mode, ri.Pool, ri.From = v1alpha1.IPAMPool, PoolRef(n.IPAM.Pool), v1alpha1.ProvenanceClass
	default:
		ri.Mode, ri.From = v1alpha1.IPAMDHCP, v1alpha1.ProvenanceDefault
	}
	return ri
}

// The pool kind an IPPoolReference names when it names none: banlieue's.
const (
	DefaultPoolAPIGroup = "infrastructure.banlieue.io"
	DefaultPoolKind     = "IPPool"
)

// PoolRef is r with its group and kind filled in.
func PoolRef(r *v1alpha1.IPPoolReference) *v1alpha1.IPPoolReference {
	out := *r
	if out.APIGroup == "" {
		out.APIGroup = DefaultPoolAPIGroup
	}
	if out.Kind == "" {
		out.Kind = DefaultPoolKind
	}
	return &out
}
