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
package virtualmachine

import (
	"context"
	"errors"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// PlacementREST serves GET .../virtualmachines/NAME/placement: the
// scheduler's placement logic (pkg/placement) run as a dry run over the
// server's own storage, with a verdict per Provider and failure domain.
type PlacementREST struct {
	storageView
	load      *schedulingLoad
	providers rest.Lister
	// shared is the install's shared-Provider namespace, whose Providers
	// are candidates for every VM, as the scheduler sees them.
	shared string
	// backends answers what each backend cannot build (pkg/backends).
	backends *infrastructure.Registry
}

var _ rest.Getter = &PlacementREST{}

func (r *PlacementREST) New() runtime.Object { return &banlieue.VirtualMachinePlacement{} }

func (r *PlacementREST) Destroy() { r.load.Stop() }

// Warm starts watching the scheduling load (from a post-start hook, once
// the storage serves), so the first /placement requests do not pay for
// the initial list of every VM.
func (r *PlacementREST) Warm() { r.load.start() }

// Warmed tells whether the scheduling load holds every VM: a readiness
// check, so no request reaches a server still listing them.
func (r *PlacementREST) Warmed() bool { return r.load.Synced() }

// Get explains the placement of the named VirtualMachine.
func (r *PlacementREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	vm, err := r.virtualMachine(ctx, name, options)
	if err != nil {
		return nil, err
	}
	out := &v1alpha1.VirtualMachinePlacement{ObjectMeta: metav1.ObjectMeta{
		Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, ResourceVersion: vm.ResourceVersion, Generation: vm.Generation,
	}}
	result, err := r.explain(ctx, vm)
	if err != nil {
		return nil, err
	}
	out.Result = *result
	out.Result.Current = vm.Status.Scheduled
	internal := &banlieue.VirtualMachinePlacement{}
	if err := r.scheme.Convert(out, internal, nil); err != nil {
		return nil, err
	}
	return internal, nil
}

func (r *PlacementREST) explain(ctx context.Context, vm *v1alpha1.VirtualMachine) (*v1alpha1.PlacementResult, error) {
	// A missing class or image is an answer here, not an error.
	class, err := r.class(ctx, vm.Spec.ClassRef.Name)
	if apierrors.IsNotFound(err) {
		return &v1alpha1.PlacementResult{Reason: placement.ReasonClassNotFound, Message: "VMClass " + vm.Spec.ClassRef.Name + " does not exist"}, nil
	} else if err != nil {
		return nil, err
	}
	image, err := r.image(ctx, vm.Spec.ImageRef.Name)
	if apierrors.IsNotFound(err) {
		return &v1alpha1.PlacementResult{Reason: placement.ReasonImageNotFound, Message: "VMImage " + vm.Spec.ImageRef.Name + " does not exist"}, nil
	} else if err != nil {
		return nil, err
	}
	resolved, err := resolve.Resolve(vm, class, image)
	var overrideErr *resolve.OverrideError
	if errors.As(err, &overrideErr) {
		return &v1alpha1.PlacementResult{Reason: placement.ReasonInvalidOverrides, Message: overrideErr.Error()}, nil
	}
	if err != nil {
		return nil, err
	}
	if mismatch := resolve.CheckImage(class, image); mismatch != nil {
		return &v1alpha1.PlacementResult{Reason: placement.ReasonImageClassMismatch, Message: mismatch.Error()}, nil
	}

	in := placement.Input{VM: vm, Resolved: resolved, Image: image}
	if r.backends != nil {
		in.Backend = func(p *v1alpha1.Provider) *field.Error { return r.backends.Admit(resolved, p) }
	}
	for _, ns := range placement.CandidateNamespaces(vm.Namespace, r.shared) {
		list, err := r.providers.List(genericapirequest.WithNamespace(ctx, ns), &metainternalversion.ListOptions{ResourceVersion: fromCache.ResourceVersion})
		if err != nil {
			return nil, err
		}
		var providers v1alpha1.ProviderList
		if err := r.scheme.Convert(list, &providers, nil); err != nil {
			return nil, err
		}
		in.Providers = append(in.Providers, providers.Items...)
	}
	if in.Load, err = r.load.Load(ctx, vm.UID); err != nil {
		return nil, err
	}
	if len(vm.Spec.Placement.AntiAffinityTerms()) > 0 {
		if in.Peers, err = r.load.Peers(ctx, vm.Namespace, vm.UID); err != nil {
			return nil, err
		}
	}
	return ToResult(placement.Decide(in)), nil
}

// ToResult turns a placement decision into its API form.
func ToResult(d placement.Decision) *v1alpha1.PlacementResult {
	out := &v1alpha1.PlacementResult{Fits: d.Fits, Reason: d.Reason, Message: d.Message, Choice: d.Scheduled}
	for _, p := range d.Providers {
		pp := v1alpha1.ProviderPlacement{Provider: p.Provider, Fits: p.Fits, Reason: p.Reason, Message: p.Message}
		for _, fd := range p.FailureDomains {
			pp.FailureDomains = append(pp.FailureDomains, v1alpha1.FailureDomainPlacement{Name: fd.Name, Fits: fd.Fits, Load: int32(fd.Load), Message: fd.Message})
		}
		out.Providers = append(out.Providers, pp)
	}
	return out
}
