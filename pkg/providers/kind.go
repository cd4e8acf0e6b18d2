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

package providers

import (
	"fmt"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// MachineKind is one backend's infrastructure machine type, as the
// generic reconcilers (pkg/controllers/provider) drive it: everything they need that
// differs between VSphereMachine, LibvirtMachine and the kinds to come.
type MachineKind struct {
	// Name is the kind's lower-case name (vspheremachine), the controller's.
	Name string
	// New returns an empty object of the kind; NewList an empty list.
	New     func() infrav1.Machine
	NewList func() client.ObjectList
	// Items are a list's machines.
	Items func(client.ObjectList) []infrav1.Machine
	// Finalizer holds a machine until its VM is destroyed.
	Finalizer string
	// CreatedReason is the Event reason when the backend made a VM (Cloned).
	CreatedReason string
	// ProviderIDScheme is the scheme of the providerID the backend gives
	// a VM it builds: SCHEME://UID, the object's UID as the VM's BIOS
	// UUID. Known before the VM exists, it is written with the finalizer
	// (one request instead of two); "" for a backend whose IDs are known
	// only once built.
	ProviderIDScheme string
	// Spec is what the backend builds for m in location (the failure
	// domain's place; user data aside), with the spec field each part came
	// from, so a refusal names the field.
	Spec func(m infrav1.Machine, location v1alpha1.FailureDomain) (MachineSpec, Fields)
	// Admit is what the backend cannot build of m on provider: its one
	// admission point (the infrastructure.Kind's Admit, which the
	// scheduler asks of VMs), asked of a machine however it was written,
	// before any backend call, naming the machine's field (nil: the
	// backend builds whatever its CRD takes).
	Admit func(m infrav1.Machine, provider *v1alpha1.Provider) *field.Error
	// Observe writes the kind's own status fields from what the backend saw.
	Observe func(m infrav1.Machine, st MachineStatus)
}

// Fields are the spec fields a machine's backend references came from,
// and what the backend calls them, for admission's refusals.
type Fields struct {
	// Location is the field(s) naming the place ("spec.datacenter,
	// spec.cluster"); empty when the failure domain alone says it.
	Location string
	// LocationOptions are the MachineSpec.Options that say where the VM
	// is besides its Location (vSphere's resource pool and folder), each
	// with its spec field: recorded with the location before the VM is
	// built, and taken from that record ever after.
	LocationOptions map[string]string
	// Disk and NIC are the field of disk or NIC i's target.
	Disk func(i int) string
	NIC  func(i int) string
	// Image is the field of the image ref.
	Image string
	// Storage, Network and ImageWord name the targets in reasons
	// (Datastore → DatastoreNotPublished).
	Storage, Network, ImageWord string
	// Features are the Provider features the spec uses besides a vTPM
	// (vSphere's hotAddCPU), each with the field asking for it: admission
	// refuses one the Provider's capabilities.features lack.
	Features map[string]string
	// Invalid is what the backend refuses in the spec by itself, before
	// any call: a value it could resolve outside the failure domain (a
	// vSphere absolute inventory path), with its field and why.
	Invalid []FieldError
}

// FieldError is a spec field a backend refuses, and why (a sentence
// about the value, after the field: "is an absolute inventory path").
type FieldError struct {
	Field, Reason, Message string
}

// ReasonArchitectureUnsupported: a machine for an architecture its
// backend does not run.
const ReasonArchitectureUnsupported = "ArchitectureUnsupported"

// ArchitectureError refuses, on spec.architecture, a machine for an
// architecture other than those its backend runs (why says why); none
// named is the backend's own. nil when it runs it.
func ArchitectureError(arch infrav1.Architecture, runs []infrav1.Architecture, why string) []FieldError {
	if arch == "" || slices.Contains(runs, arch) {
		return nil
	}
	names := make([]string, 0, len(runs))
	for _, a := range runs {
		names = append(names, string(a))
	}
	return []FieldError{{Field: "spec.architecture", Reason: ReasonArchitectureUnsupported,
		Message: fmt.Sprintf("%q: the backend runs %s only (%s)", arch, strings.Join(names, ", "), why)}}
}

// ImageKind is how one backend's image sources are checked and reported.
type ImageKind struct {
	// Word is what the backend calls a source (template, volume).
	Word string
	// NotFoundReason and NoSourceReason are the reasons of a missing
	// source and of an image without a source for the class.
	NotFoundReason, NoSourceReason string
	// Scope is where a location finds its images (its datacenter, its
	// host): each scope is checked once; ScopeWord names it.
	Scope     func(failuredomain.Location) failuredomain.Location
	ScopeWord string
	// ImportScope is where a location's imported images are built, when
	// not its Scope (a Proxmox VE node: a template is found cluster-wide,
	// an import is built on each node, no node depending on another's).
	ImportScope func(failuredomain.Location) failuredomain.Location
	// ImportFormats are the spec.import formats the backend builds
	// (ImageImporter); others are refused (FormatUnsupported) before a
	// byte is fetched. None: the backend imports nothing.
	ImportFormats []v1alpha1.ImageFormat
}

// MachineItems are a typed list's items as Machines (MachineKind.Items).
func MachineItems[T any, PT interface {
	*T
	infrav1.Machine
}](items []T) []infrav1.Machine {
	out := make([]infrav1.Machine, 0, len(items))
	for i := range items {
		out = append(out, PT(&items[i]))
	}
	return out
}
