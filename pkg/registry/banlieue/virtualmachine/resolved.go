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
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// ResolvedREST serves GET .../virtualmachines/NAME/resolved: the VM's class
// merged with its override deltas, computed on read by pkg/resolve (the
// same merge the controllers use), never stored.
type ResolvedREST struct {
	scheme  *runtime.Scheme
	vms     rest.Getter
	classes rest.Getter
	images  rest.Getter
}

var _ rest.Getter = &ResolvedREST{}

func (r *ResolvedREST) New() runtime.Object { return &banlieue.ResolvedVirtualMachine{} }

func (r *ResolvedREST) Destroy() {}

// Get resolves the named VirtualMachine.
func (r *ResolvedREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	obj, err := r.vms.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	vm := &v1alpha1.VirtualMachine{}
	if err := r.scheme.Convert(obj, vm, nil); err != nil {
		return nil, err
	}
	// VMClass and VMImage are cluster-scoped.
	clusterCtx := genericapirequest.WithNamespace(ctx, metav1.NamespaceNone)
	class := &v1alpha1.VMClass{}
	if err := r.getConverted(clusterCtx, r.classes, banlieue.Resource("vmclasses"), vm.Spec.ClassRef.Name, class); err != nil {
		return nil, err
	}
	image := &v1alpha1.VMImage{}
	if err := r.getConverted(clusterCtx, r.images, banlieue.Resource("vmimages"), vm.Spec.ImageRef.Name, image); err != nil {
		return nil, err
	}
	resolved, err := resolve.Resolve(vm, class, image)
	var overrideErr *resolve.OverrideError
	if errors.As(err, &overrideErr) {
		return nil, apierrors.NewConflict(banlieue.Resource("virtualmachines"), name,
			fmt.Errorf("cannot resolve: %w", overrideErr.Errors.ToAggregate()))
	}
	if err != nil {
		return nil, err
	}
	out := &banlieue.ResolvedVirtualMachine{}
	if err := r.scheme.Convert(resolved, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}

// getConverted reads a referenced object. A missing one is reported under
// its own resource: the store would name the resource of the request
// (virtualmachines), which would send the user looking in the wrong place.
func (r *ResolvedREST) getConverted(ctx context.Context, getter rest.Getter, resource schema.GroupResource, name string, into runtime.Object) error {
	obj, err := getter.Get(ctx, name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(resource, name)
	}
	if err != nil {
		return err
	}
	return r.scheme.Convert(obj, into, nil)
}
