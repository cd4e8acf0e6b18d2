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
// Package providerclass is the registry of ProviderClasses (cluster-scoped,
// no status): how "banlieue operator" runs a backend's providers.
package providerclass

import (
	"context"
	"fmt"
	"strconv"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/names"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/validation"
	"github.com/firestoned/banlieue/pkg/registry/table"
)

// Strategy governs writes to ProviderClasses.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the ProviderClass strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{typer, names.SimpleNameGenerator}
}

func (Strategy) NamespaceScoped() bool { return false }

func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*banlieue.ProviderClass).Generation = 1
}

func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, oldC := obj.(*banlieue.ProviderClass), old.(*banlieue.ProviderClass)
	if !apiequality.Semantic.DeepEqual(c.Spec, oldC.Spec) {
		c.Generation = oldC.Generation + 1
	}
}

func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateProviderClass(obj.(*banlieue.ProviderClass))
}

func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateProviderClassUpdate(obj.(*banlieue.ProviderClass), old.(*banlieue.ProviderClass))
}

func (Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

func (Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

func (Strategy) AllowCreateOnUpdate(context.Context) bool { return false }

func (Strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (Strategy) Canonicalize(runtime.Object) {}

// GetAttrs returns labels and fields of a ProviderClass for filtering.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	c, ok := obj.(*banlieue.ProviderClass)
	if !ok {
		return nil, nil, fmt.Errorf("not a ProviderClass: %T", obj)
	}
	return c.Labels, generic.ObjectMetaFieldsSet(&c.ObjectMeta, false), nil
}

// Match is the filter used by list and watch.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}

// REST is the providerclasses endpoint.
type REST struct {
	*genericregistry.Store
}

var _ rest.CategoriesProvider = &REST{}

// Categories puts ProviderClasses in "kubectl get banlieue".
func (*REST) Categories() []string { return []string{"banlieue"} }

// NewREST builds the etcd-backed storage of ProviderClasses.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*REST, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.ProviderClass{} },
		NewListFunc:               func() runtime.Object { return &banlieue.ProviderClassList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  banlieue.Resource("providerclasses"),
		SingularQualifiedResource: banlieue.Resource("providerclass"),
		CreateStrategy:            strategy,
		UpdateStrategy:            strategy,
		DeleteStrategy:            strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return nil, err
	}
	return &REST{store}, nil
}

var tableConvertor = table.New(func(obj runtime.Object) ([]interface{}, error) {
	c, ok := obj.(*banlieue.ProviderClass)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	replicas := ""
	if c.Spec.Replicas != nil {
		replicas = strconv.Itoa(int(*c.Spec.Replicas))
	}
	return []interface{}{c.Spec.Backend, string(c.Spec.DeploymentStrategy), c.Spec.Namespace, replicas, c.Spec.Paused, c.Spec.Image}, nil
},
	table.Column{Name: "Backend", Type: "string", Description: "The backend its providers drive."},
	table.Column{Name: "Strategy", Type: "string", Description: "PerProvider or Shared workloads."},
	table.Column{Name: "Namespace", Type: "string", Description: "Where the workloads run."},
	table.Column{Name: "Replicas", Type: "string", Description: "Replicas of each workload."},
	table.Column{Name: "Paused", Type: "boolean", Description: "Whether the operator leaves the workloads as they are."},
	table.Column{Name: "Image", Type: "string", Priority: 1, Description: "The provider image."},
)
