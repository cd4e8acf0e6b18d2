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
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// ResolvedREST serves GET .../virtualmachines/NAME/resolved: the VM's class
// merged with its override deltas, computed on read by pkg/resolve (the
// same merge the controllers use), never stored.
type ResolvedREST struct {
	storageView
}

var _ rest.Getter = &ResolvedREST{}

func (r *ResolvedREST) New() runtime.Object { return &banlieue.ResolvedVirtualMachine{} }

func (r *ResolvedREST) Destroy() {}

// Get resolves the named VirtualMachine.
func (r *ResolvedREST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	vm, err := r.virtualMachine(ctx, name, options)
	if err != nil {
		return nil, err
	}
	// A placed VM is resolved with the class it pinned, deleted or not;
	// the class as it is now is shown beside it when it differs.
	live, err := r.class(ctx, vm.Spec.ClassRef.Name)
	pinned := resolve.PinnedClass(vm)
	switch {
	case apierrors.IsNotFound(err) && pinned != nil:
		live = nil
	case err != nil:
		return nil, err
	}
	class := pinned
	if class == nil {
		class = live
	}
	image, err := r.image(ctx, vm.Spec.ImageRef.Name)
	if err != nil {
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
	if pinned != nil && live != nil && live.Generation != pinned.Generation {
		// The current class may not take the VM's overrides any more:
		// then there is nothing to show it would become.
		if current, err := resolve.Resolve(vm, live, image); err == nil {
			resolved.Current = &current.Spec
		}
	}
	out := &banlieue.ResolvedVirtualMachine{}
	if err := r.scheme.Convert(resolved, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
