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
// Package status provides the REST endpoint of a status subresource over a
// generic store whose update strategy keeps everything but status.
package status

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// REST is a status subresource. Build it from a copy of the main store with
// the status strategy as UpdateStrategy and ResetFieldsStrategy.
type REST struct {
	store *genericregistry.Store
}

// NewREST wraps a copy of main whose updates go through strategy.
func NewREST(main *genericregistry.Store, strategy interface {
	rest.RESTUpdateStrategy
	rest.ResetFieldsStrategy
}) *REST {
	s := *main
	s.UpdateStrategy = strategy
	s.ResetFieldsStrategy = strategy
	return &REST{store: &s}
}

// ResetFields are what a /status write never changes, for server-side
// apply: the spec, and the metadata Kubernetes' own status strategies keep
// from the stored object (metav1.ResetObjectMetaForStatus), so a status
// writer cannot relabel an object (labels drive providerSelector), drop a
// finalizer or re-own it.
func ResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(
		fieldpath.MakePathOrDie("spec"),
		fieldpath.MakePathOrDie("metadata", "labels"),
		fieldpath.MakePathOrDie("metadata", "annotations"),
		fieldpath.MakePathOrDie("metadata", "finalizers"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences"),
	)}
}

// FinalizersResetFields are what a /finalizers subresource write cannot
// change: everything but metadata.finalizers.
func FinalizersResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(
		fieldpath.MakePathOrDie("spec"),
		fieldpath.MakePathOrDie("status"),
		fieldpath.MakePathOrDie("metadata", "labels"),
		fieldpath.MakePathOrDie("metadata", "annotations"),
		fieldpath.MakePathOrDie("metadata", "ownerReferences"),
	)}
}

var (
	_ rest.Patcher        = &REST{}
	_ rest.TableConvertor = &REST{}
)

func (r *REST) New() runtime.Object { return r.store.New() }

func (r *REST) Destroy() {}

func (r *REST) Get(ctx context.Context, name string, options *metav1.GetOptions) (runtime.Object, error) {
	return r.store.Get(ctx, name, options)
}

// Update updates status only; a subresource never creates its parent.
func (r *REST) Update(ctx context.Context, name string, objInfo rest.UpdatedObjectInfo, createValidation rest.ValidateObjectFunc, updateValidation rest.ValidateObjectUpdateFunc, _ bool, options *metav1.UpdateOptions) (runtime.Object, bool, error) {
	return r.store.Update(ctx, name, objInfo, createValidation, updateValidation, false, options)
}

func (r *REST) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return r.store.GetResetFields()
}

func (r *REST) ConvertToTable(ctx context.Context, object runtime.Object, tableOptions runtime.Object) (*metav1.Table, error) {
	return r.store.ConvertToTable(ctx, object, tableOptions)
}
