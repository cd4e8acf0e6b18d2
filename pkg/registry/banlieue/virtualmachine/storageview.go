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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// storageView reads what the computed subresources (resolved, placement)
// need from the server's own storage, as v1alpha1 objects: the form
// pkg/resolve and pkg/placement take, shared with the controllers.
type storageView struct {
	scheme  *runtime.Scheme
	vms     rest.Getter
	classes rest.Getter
	images  rest.Getter
}

// virtualMachine reads the named VM of the request's namespace.
func (v storageView) virtualMachine(ctx context.Context, name string, options *metav1.GetOptions) (*v1alpha1.VirtualMachine, error) {
	obj, err := v.vms.Get(ctx, name, options)
	if err != nil {
		return nil, err
	}
	vm := &v1alpha1.VirtualMachine{}
	return vm, v.scheme.Convert(obj, vm, nil)
}

// class reads a VMClass; a missing one is reported as NotFound under its
// own resource (the store would name the resource of the request,
// virtualmachines, and send the user looking in the wrong place).
func (v storageView) class(ctx context.Context, name string) (*v1alpha1.VMClass, error) {
	out := &v1alpha1.VMClass{}
	return out, v.clusterScoped(ctx, v.classes, banlieue.Resource("vmclasses"), name, out)
}

// image reads a VMImage, like class.
func (v storageView) image(ctx context.Context, name string) (*v1alpha1.VMImage, error) {
	out := &v1alpha1.VMImage{}
	return out, v.clusterScoped(ctx, v.images, banlieue.Resource("vmimages"), name, out)
}

// fromCache reads what the watch cache holds (resourceVersion "0"): the
// class, image and Providers a view combines with the VM are read there,
// never from etcd per request, so /resolved costs what a GET costs.
var fromCache = metav1.GetOptions{ResourceVersion: "0"}

func (v storageView) clusterScoped(ctx context.Context, getter rest.Getter, resource schema.GroupResource, name string, into runtime.Object) error {
	opts := fromCache
	obj, err := getter.Get(genericapirequest.WithNamespace(ctx, metav1.NamespaceNone), name, &opts)
	if apierrors.IsNotFound(err) {
		return apierrors.NewNotFound(resource, name)
	}
	if err != nil {
		return err
	}
	return v.scheme.Convert(obj, into, nil)
}
