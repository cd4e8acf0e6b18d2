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
// Package vmclass is the registry of VMClasses (cluster-scoped, no status).
package vmclass

import (
	"context"
	"fmt"
	"strconv"

	"github.com/firestoned/banlieue/pkg/resolve"

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

// Strategy governs writes to VMClasses.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
}

// NewStrategy returns the VMClass strategy.
func NewStrategy(typer runtime.ObjectTyper) Strategy {
	return Strategy{typer, names.SimpleNameGenerator}
}

func (Strategy) NamespaceScoped() bool { return false }

func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	obj.(*banlieue.VMClass).Generation = 1
}

func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	c, oldC := obj.(*banlieue.VMClass), old.(*banlieue.VMClass)
	if !apiequality.Semantic.DeepEqual(c.Spec, oldC.Spec) {
		c.Generation = oldC.Generation + 1
	}
}

func (Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	return validation.ValidateVMClass(obj.(*banlieue.VMClass))
}

func (Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVMClassUpdate(obj.(*banlieue.VMClass), old.(*banlieue.VMClass))
}

func (Strategy) WarningsOnCreate(context.Context, runtime.Object) []string { return nil }

func (Strategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return []string{"changing a VMClass does not reconfigure VirtualMachines already placed with it: they show ClassOutOfDate until annotated " + resolve.UpdateClassAnnotation + "=true"}
}

func (Strategy) AllowCreateOnUpdate(context.Context) bool { return false }

func (Strategy) AllowUnconditionalUpdate(context.Context) bool { return true }

func (Strategy) Canonicalize(runtime.Object) {}

// GetAttrs returns labels and fields of a VMClass for filtering.
func GetAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	c, ok := obj.(*banlieue.VMClass)
	if !ok {
		return nil, nil, fmt.Errorf("not a VMClass: %T", obj)
	}
	return c.Labels, generic.ObjectMetaFieldsSet(&c.ObjectMeta, false), nil
}

// Match is the filter used by list and watch.
func Match(label labels.Selector, field fields.Selector) storage.SelectionPredicate {
	return storage.SelectionPredicate{Label: label, Field: field, GetAttrs: GetAttrs}
}

// REST is the vmclasses endpoint.
type REST struct {
	*genericregistry.Store
}

var _ rest.CategoriesProvider = &REST{}

// Categories puts VMClasses in "kubectl get banlieue".
func (*REST) Categories() []string { return []string{"banlieue"} }

// NewREST builds the etcd-backed storage of VMClasses.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter) (*REST, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.VMClass{} },
		NewListFunc:               func() runtime.Object { return &banlieue.VMClassList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  banlieue.Resource("vmclasses"),
		SingularQualifiedResource: banlieue.Resource("vmclass"),
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
	c, ok := obj.(*banlieue.VMClass)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	firmware := string(c.Spec.Firmware)
	if firmware == "" {
		firmware = "<default>"
	}
	return []interface{}{int64(c.Spec.Hardware.CPUs), strconv.FormatInt(c.Spec.Hardware.MemoryMiB, 10) + "Mi", firmware, c.Spec.TPMEnabled}, nil
},
	table.Column{Name: "CPUs", Type: "integer", Description: "Virtual CPUs."},
	table.Column{Name: "Memory", Type: "string", Description: "Memory in MiB."},
	table.Column{Name: "Firmware", Type: "string", Description: "Boot firmware."},
	table.Column{Name: "TPM", Type: "boolean", Priority: 1, Description: "Whether a virtual TPM is attached."},
)
