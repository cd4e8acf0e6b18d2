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
// Package provider is the registry of Providers (namespaced, with status).
package provider

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

// Strategy governs writes to the main Provider endpoint.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the Provider strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{typer, names.SimpleNameGenerator}
}

func (Strategy) NamespaceScoped() bool { return true }

func (Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	p := obj.(*banlieue.Provider)
	p.Status = banlieue.ProviderStatus{}
	p.Generation = 1
}

func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, oldP := obj.(*banlieue.Provider), old.(*banlieue.Provider)
	p.Status = oldP.Status
	if !apiequality.Semantic.DeepEqual(p.Spec, oldP.Spec) {
		p.Generation = oldP.Generation + 1
	}
}

func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateProvider(obj.(*banlieue.Provider))
}

func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateProviderUpdate(obj.(*banlieue.Provider), old.(*banlieue.Provider))
}

func (Strategy) WarningsOnCreate(_ context.Context, obj runtime.Object) []string {
	return insecureWarning(obj.(*banlieue.Provider))
}

func (Strategy) WarningsOnUpdate(_ context.Context, obj, _ runtime.Object) []string {
	return insecureWarning(obj.(*banlieue.Provider))
}

func insecureWarning(p *banlieue.Provider) []string {
	if p.Spec.Connection.InsecureSkipTLSVerify {
		return []string{"spec.connection.insecureSkipTLSVerify: the endpoint's certificate will not be verified; prefer spec.connection.caBundle"}
	}
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
	obj.(*banlieue.Provider).Spec = old.(*banlieue.Provider).Spec
	metav1.ResetObjectMetaForStatus(obj.(*banlieue.Provider), old.(*banlieue.Provider))
}

func (StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateProviderStatusUpdate(obj.(*banlieue.Provider), old.(*banlieue.Provider))
}

func (StatusStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// FinalizersStrategy governs writes to /finalizers: a Provider's finalizers
// and nothing else. The identities that serve a Provider (its provider
// workload, the operator) hold update and patch on providers/finalizers and
// providers/status but not on providers, so none of them can change the
// spec fields that decide what they may read (spec.connection's
// credentialsRef and caBundle are what the operator grants by name), as
// NodeRestriction keeps a kubelet to its own Node's status.
type FinalizersStrategy struct{ Strategy }

// GetResetFields: everything but metadata.finalizers.
func (FinalizersStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return statusrest.FinalizersResetFields()
}

// PrepareForUpdate keeps the stored Provider and takes only its finalizers
// from the request.
func (FinalizersStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	p, oldP := obj.(*banlieue.Provider), old.(*banlieue.Provider)
	finalizers := p.Finalizers
	p.Spec, p.Status = oldP.Spec, oldP.Status
	metav1.ResetObjectMetaForStatus(p, oldP)
	p.Finalizers = finalizers
}

func (FinalizersStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateProviderFinalizersUpdate(obj.(*banlieue.Provider), old.(*banlieue.Provider))
}

func (FinalizersStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
}

// GetAttrs returns labels and fields of a Provider for filtering.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	p, ok := obj.(*banlieue.Provider)
	if !ok {
		return nil, nil, fmt.Errorf("not a Provider: %T", obj)
	}
	set := generic.ObjectMetaFieldsSet(&p.ObjectMeta, true)
	set["spec.providerClassRef.name"] = p.Spec.ProviderClassRef.Name
	return p.Labels, set, nil
}

// Match is the filter used by list and watch.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}

// REST is the providers endpoint.
type REST struct {
	*genericregistry.Store
}

var _ rest.CategoriesProvider = &REST{}

// Categories puts Providers in "kubectl get banlieue".
func (*REST) Categories() []string { return []string{"banlieue"} }

// Storage is the providers endpoint and its subresources.
type Storage struct {
	Provider   *REST
	Status     *statusrest.REST
	Finalizers *statusrest.REST
}

// NewREST builds the etcd-backed storage of Providers, its status
// subresource and its finalizers subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (Storage, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.Provider{} },
		NewListFunc:               func() runtime.Object { return &banlieue.ProviderList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  banlieue.Resource("providers"),
		SingularQualifiedResource: banlieue.Resource("provider"),
		CreateStrategy:            strategy,
		UpdateStrategy:            strategy,
		DeleteStrategy:            strategy,
		ResetFieldsStrategy:       strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return Storage{}, err
	}
	return Storage{Provider: &REST{store}, Status: statusrest.NewREST(store, StatusStrategy{strategy}),
		Finalizers: statusrest.NewREST(store, FinalizersStrategy{strategy})}, nil
}

var tableConvertor = table.New(func(obj runtime.Object) ([]interface{}, error) {
	p, ok := obj.(*banlieue.Provider)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	return []interface{}{p.Spec.ProviderClassRef.Name, table.ConditionStatus(p.Status.Conditions, banlieue.ProviderReady),
		int64(len(p.Status.FailureDomains)), p.Spec.Connection.Endpoint}, nil
},
	table.Column{Name: "Class", Type: "string", Description: "The provider class (backend implementation)."},
	table.Column{Name: "Ready", Type: "string", Description: "The status of the Ready condition."},
	table.Column{Name: "Failure-Domains", Type: "integer", Priority: 1, Description: "Number of failure domains discovered."},
	table.Column{Name: "Endpoint", Type: "string", Priority: 1, Description: "The backend endpoint."},
)
