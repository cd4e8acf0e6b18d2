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
// Package vmimage is the registry of VMImages (cluster-scoped, with status).
package vmimage

import (
	"context"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/validation"
	statusrest "github.com/firestoned/banlieue/pkg/registry/status"
	"github.com/firestoned/banlieue/pkg/registry/table"
)

// Strategy governs writes to the main VMImage endpoint.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the VMImage strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{typer, names.SimpleNameGenerator}
}

func (Strategy) NamespaceScoped() bool { return false }

func (Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	img := obj.(*banlieue.VMImage)
	img.Status = banlieue.VMImageStatus{}
	img.Generation = 1
}

func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	img, oldImg := obj.(*banlieue.VMImage), old.(*banlieue.VMImage)
	img.Status = oldImg.Status
	if !apiequality.Semantic.DeepEqual(img.Spec, oldImg.Spec) {
		img.Generation = oldImg.Generation + 1
	}
}

func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateVMImage(obj.(*banlieue.VMImage))
}

func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVMImageUpdate(obj.(*banlieue.VMImage), old.(*banlieue.VMImage))
}

func (Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

func (Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (Strategy) AllowCreateOnUpdate(context.Context) bool { return false }

func (Strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (Strategy) Canonicalize(runtime.Object) {}

// StatusStrategy governs writes to /status.
type StatusStrategy struct{ Strategy }

func (StatusStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return statusrest.ResetFields()
}

func (StatusStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	obj.(*banlieue.VMImage).Spec = old.(*banlieue.VMImage).Spec
	metav1.ResetObjectMetaForStatus(obj.(*banlieue.VMImage), old.(*banlieue.VMImage))
}

func (StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVMImageStatusUpdate(obj.(*banlieue.VMImage), old.(*banlieue.VMImage))
}

// GetAttrs returns labels and fields of a VMImage for filtering.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	img, ok := obj.(*banlieue.VMImage)
	if !ok {
		return nil, nil, fmt.Errorf("not a VMImage: %T", obj)
	}
	return img.Labels, generic.ObjectMetaFieldsSet(&img.ObjectMeta, false), nil
}

// Match is the filter used by list and watch.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}

// REST is the vmimages endpoint.
type REST struct {
	*genericregistry.Store
}

var _ rest.CategoriesProvider = &REST{}

// Categories puts VMImages in "kubectl get banlieue".
func (*REST) Categories() []string { return []string{"banlieue"} }

// NewREST builds the etcd-backed storage of VMImages and its status subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*REST, *statusrest.REST, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.VMImage{} },
		NewListFunc:               func() runtime.Object { return &banlieue.VMImageList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  banlieue.Resource("vmimages"),
		SingularQualifiedResource: banlieue.Resource("vmimage"),
		CreateStrategy:            strategy,
		UpdateStrategy:            strategy,
		DeleteStrategy:            strategy,
		ResetFieldsStrategy:       strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return nil, nil, err
	}
	return &REST{store}, statusrest.NewREST(store, StatusStrategy{strategy}), nil
}

var tableConvertor = table.New(func(obj runtime.Object) ([]interface{}, error) {
	img, ok := obj.(*banlieue.VMImage)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	os := img.Spec.OSDistribution
	if os == "" {
		os = img.Spec.OSFamily
	}
	ready := 0
	for _, p := range img.Status.PerProvider {
		if p.Ready {
			ready++
		}
	}
	return []interface{}{os, img.Spec.OSVersion, img.Spec.Architecture, fmt.Sprintf("%d/%d", ready, len(img.Status.PerProvider))}, nil
},
	table.Column{Name: "OS", Type: "string", Description: "OS distribution (or family)."},
	table.Column{Name: "Version", Type: "string", Description: "OS version."},
	table.Column{Name: "Arch", Type: "string", Description: "CPU architecture."},
	table.Column{Name: "Ready-Providers", Type: "string", Priority: 1, Description: "Providers on which the image is ready, of those reporting."},
)
