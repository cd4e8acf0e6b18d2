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

// Package infrastructure is the core's view of the backends' machine
// kinds: a registry from a Provider's class to the kind of infrastructure
// object a VM becomes there and the function that builds its spec, and a
// reader of such objects through the Cluster API v1beta2 InfraMachine
// contract only (spec.providerID, status.initialization.provisioned,
// status.addresses, status.conditions, status.powerState), as Cluster
// API's Machine controller reads any infrastructure. The VirtualMachine
// controller knows no backend: each one registers itself (pkg/backends).
package infrastructure

import (
	"fmt"
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// SpecBuilder makes the spec of a VM's infrastructure object (as JSON-like
// data) from the VM, its resolved class and the Provider it was placed on.
// It is pure: what a VM becomes can be tested without a cluster.
type SpecBuilder func(vm *v1alpha1.VirtualMachine, resolved *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (map[string]interface{}, error)

// Admitter tells what a backend cannot build of a resolved VM on a
// Provider, from those alone: nil when it can build it. The scheduler asks
// it of every candidate before placing, and the backend's BuildSpec asks it
// again, so a backend refusal never comes after scheduling.
type Admitter func(resolved *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) *field.Error

// Kind is one backend's infrastructure machine.
type Kind struct {
	// ProviderClass is the Provider's providerClassRef.name ("vsphere").
	ProviderClass string
	// ImportFormats are the VMImage spec.import formats the backend builds.
	ImportFormats []v1alpha1.ImageFormat
	// GroupVersionKind of the infrastructure machine.
	GroupVersionKind schema.GroupVersionKind
	// BuildSpec builds its spec.
	BuildSpec SpecBuilder
	// Admit is what the backend cannot build (nil: everything
	// BuildSpec takes).
	Admit Admitter
	// Limits are the bounds of the kind's CRD (LimitsFromCRD): the
	// registry checks them before Admit.
	Limits Limits
	// OwnedFields are spec fields the backend's provider writes (e.g.
	// providerID): the core keeps them when it updates the spec.
	OwnedFields []string
	// QuietStatusFields are status fields whose changes alone tell the core
	// nothing (a task in flight): such updates do not requeue the VM.
	QuietStatusFields []string
	// Snapshots are what the backend's snapshots can do (nil: it takes
	// none), answered here once for the API server's checks and the
	// controllers; the backend's own SnapshotLimits returns the same.
	Snapshots *providers.SnapshotLimits
	// Cluster is the backend's Cluster API InfraCluster kind (zero: it has
	// none). Its type embeds infrastructure.banlieue.io's
	// CommonClusterSpec and CommonClusterStatus, so the core's generic
	// cluster controller (pkg/controllers/infracluster) serves it,
	// aggregating the failure domains of ProviderClass's Providers.
	Cluster schema.GroupVersionKind
}

// Registry maps provider classes to their machine kinds.
type Registry struct {
	kinds map[string]Kind
}

// NewRegistry returns a registry of kinds; a class registered twice, or a
// kind without a builder, is an error.
func NewRegistry(kinds ...Kind) (*Registry, error) {
	r := &Registry{kinds: map[string]Kind{}}
	for _, k := range kinds {
		if k.ProviderClass == "" || k.GroupVersionKind.Kind == "" || k.BuildSpec == nil {
			return nil, fmt.Errorf("infrastructure kind %+v needs a provider class, a kind and a spec builder", k.GroupVersionKind)
		}
		if _, dup := r.kinds[k.ProviderClass]; dup {
			return nil, fmt.Errorf("provider class %q registered twice", k.ProviderClass)
		}
		r.kinds[k.ProviderClass] = k
	}
	return r, nil
}

// For returns the kind of providerClass.
// ImportFormats are the spec.import formats providerClass's backend
// builds; false when no backend serves the class.
func (r *Registry) ImportFormats(providerClass string) ([]string, bool) {
	k, ok := r.kinds[providerClass]
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(k.ImportFormats))
	for _, f := range k.ImportFormats {
		out = append(out, string(f))
	}
	return out, true
}

// SnapshotLimits are what providerClass's backend snapshots can do; false
// when no backend serves the class or it takes no snapshots.
func (r *Registry) SnapshotLimits(providerClass string) (providers.SnapshotLimits, bool) {
	k, ok := r.kinds[providerClass]
	if !ok || k.Snapshots == nil {
		return providers.SnapshotLimits{}, false
	}
	return *k.Snapshots, true
}

func (r *Registry) For(providerClass string) (Kind, bool) {
	k, ok := r.kinds[providerClass]
	return k, ok
}

// Admit asks the backend of provider's class whether it can build
// resolved there: within its CRD's limits, then its own Admit. Nil when it
// can, or when no backend of that class is registered (the scheduler says
// so by itself).
func (r *Registry) Admit(resolved *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) *field.Error {
	k, ok := r.kinds[provider.Spec.ProviderClassRef.Name]
	if !ok {
		return nil
	}
	if err := k.Limits.Admit(resolved); err != nil {
		return err
	}
	if k.Admit == nil {
		return nil
	}
	return k.Admit(resolved, provider)
}

// Kinds are every registered kind, by provider class.
func (r *Registry) Kinds() []Kind {
	out := make([]Kind, 0, len(r.kinds))
	for _, k := range r.kinds {
		out = append(out, k)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ProviderClass < out[j].ProviderClass })
	return out
}

// ProviderAnnotation on an infrastructure machine names the Provider
// (namespace/name) that serves it (infrastructure.banlieue.io's
// ProviderAnnotation; a test keeps the two equal).
const ProviderAnnotation = "banlieue.io/provider"

// ClusterNameLabel is the label Cluster API puts on the objects of a Cluster.
const ClusterNameLabel = "cluster.x-k8s.io/cluster-name"

// MachineOwner is the Cluster API Machine owning o, or nil.
func MachineOwner(o metav1.Object) *metav1.OwnerReference {
	owners := o.GetOwnerReferences()
	for i := range owners {
		if owners[i].Kind == "Machine" && strings.HasPrefix(owners[i].APIVersion, capiGroup+"/") {
			return &owners[i]
		}
	}
	return nil
}

// CAPIOwned tells whether Cluster API manages o: it carries the
// cluster-name label or a Cluster API owner.
func CAPIOwned(o metav1.Object) bool {
	if _, ok := o.GetLabels()[ClusterNameLabel]; ok {
		return true
	}
	for _, ref := range o.GetOwnerReferences() {
		if strings.HasPrefix(ref.APIVersion, capiGroup+"/") {
			return true
		}
	}
	return false
}

const capiGroup = "cluster.x-k8s.io"

// PausedAnnotation is Cluster API's pause: an infrastructure machine
// carrying it is left alone by its provider (the contract's own name).
const PausedAnnotation = "cluster.x-k8s.io/paused"

// Typed is a SpecBuilder from one that builds a kind's typed spec: the
// spec is converted to the JSON-like data the core writes.
func Typed[S any](build func(*v1alpha1.VirtualMachine, *v1alpha1.ResolvedVirtualMachine, *v1alpha1.Provider) (S, error)) SpecBuilder {
	return func(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, p *v1alpha1.Provider) (map[string]interface{}, error) {
		spec, err := build(vm, r, p)
		if err != nil {
			return nil, err
		}
		return runtime.DefaultUnstructuredConverter.ToUnstructured(&spec)
	}
}

// NewObject is an empty object of kind (the scheme's type for it), named
// namespace/name: the core reads and writes machines through it without
// naming their types.
func NewObject(scheme *runtime.Scheme, kind Kind, namespace, name string) (client.Object, error) {
	o, err := scheme.New(kind.GroupVersionKind)
	if err != nil {
		return nil, fmt.Errorf("infrastructure kind %s: %w", kind.GroupVersionKind, err)
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("infrastructure kind %s is not an object", kind.GroupVersionKind)
	}
	obj.GetObjectKind().SetGroupVersionKind(kind.GroupVersionKind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj, nil
}

// KindOf is the registered kind of machine group/kind; false when no
// backend registered it.
func (r *Registry) KindOf(group, kind string) (Kind, bool) {
	for _, k := range r.kinds {
		if k.GroupVersionKind.Group == group && k.GroupVersionKind.Kind == kind {
			return k, true
		}
	}
	return Kind{}, false
}
