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
	"slices"
	"strings"

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

// ImportFormats answers which spec.import formats a provider class's
// backend builds (false: no backend serves the class).
type ImportFormats func(providerClass string) ([]string, bool)

// Strategy governs writes to the main VMImage endpoint.
type Strategy struct {
	runtime.ObjectTyper
	names.NameGenerator
	formats ImportFormats
}

// NewStrategy returns the VMImage strategy; formats may be nil (no
// backend known: nothing refused by format).
func NewStrategy(typer runtime.ObjectTyper, formats ImportFormats) Strategy {
	return Strategy{typer, names.SimpleNameGenerator, formats}
}

func (Strategy) NamespaceScoped() bool { return false }

func (Strategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return map[fieldpath.APIVersion]*fieldpath.Set{"banlieue.io/v1alpha1": fieldpath.NewSet(fieldpath.MakePathOrDie("status"))}
}

func (Strategy) PrepareForCreate(_ context.Context, obj runtime.Object) {
	img := obj.(*banlieue.VMImage)
	img.Status = banlieue.VMImageStatus{Revision: Revision(&img.Spec)}
	img.Generation = 1
	setReady(img)
}

func (Strategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	img, oldImg := obj.(*banlieue.VMImage), old.(*banlieue.VMImage)
	img.Status = oldImg.Status
	if !apiequality.Semantic.DeepEqual(img.Spec, oldImg.Spec) {
		img.Generation = oldImg.Generation + 1
		img.Status.Revision = Revision(&img.Spec)
		setReady(img)
	}
}

func (s Strategy) Validate(_ context.Context, obj runtime.Object) field.ErrorList {
	img := obj.(*banlieue.VMImage)
	return append(validation.ValidateVMImage(img), s.validateFormat(img)...)
}

func (s Strategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	img := obj.(*banlieue.VMImage)
	return append(validation.ValidateVMImageUpdate(img, old.(*banlieue.VMImage)), s.validateFormat(img)...)
}

// validateFormat refuses an import whose format a listed provider class's
// backend does not build: refused by name before anything is fetched,
// rather than every Provider of the class reporting FormatUnsupported.
func (s Strategy) validateFormat(img *banlieue.VMImage) field.ErrorList {
	im := img.Spec.Import
	if im == nil || s.formats == nil {
		return nil
	}
	var errs field.ErrorList
	for _, class := range im.ProviderClasses {
		formats, known := s.formats(class)
		if known && !slices.Contains(formats, string(im.Format)) {
			errs = append(errs, field.NotSupported(field.NewPath("spec", "import", "format"), im.Format,
				[]string{fmt.Sprintf("%s (what provider class %s imports)", strings.Join(formats, ", "), class)}))
		}
	}
	return errs
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
	img, oldImg := obj.(*banlieue.VMImage), old.(*banlieue.VMImage)
	img.Spec = oldImg.Spec
	metav1.ResetObjectMetaForStatus(img, oldImg)
	// The revision and the Ready condition are the server's: Providers
	// write perProvider and the other conditions (Deleting) only.
	img.Status.Revision = oldImg.Status.Revision
	img.Status.Conditions = keepReady(img.Status.Conditions, oldImg.Status.Conditions)
	setReady(img)
}

func (StatusStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVMImageStatusUpdate(obj.(*banlieue.VMImage), old.(*banlieue.VMImage))
}

// FinalizersStrategy governs writes to /finalizers: a VMImage's
// finalizers and nothing else. Each provider process holds a VMImage it
// imported until what it built is removed (its own finalizer); it holds
// update and patch on vmimages/finalizers and vmimages/status, never on
// vmimages, so it cannot change what any provider fetches.
type FinalizersStrategy struct{ Strategy }

// GetResetFields: everything but metadata.finalizers.
func (FinalizersStrategy) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return statusrest.FinalizersResetFields()
}

// PrepareForUpdate keeps the stored VMImage and takes only its
// finalizers from the request.
func (FinalizersStrategy) PrepareForUpdate(_ context.Context, obj, old runtime.Object) {
	img, oldImg := obj.(*banlieue.VMImage), old.(*banlieue.VMImage)
	finalizers := img.Finalizers
	img.Spec, img.Status = oldImg.Spec, oldImg.Status
	metav1.ResetObjectMetaForStatus(img, oldImg)
	img.Finalizers = finalizers
}

func (FinalizersStrategy) ValidateUpdate(_ context.Context, obj, old runtime.Object) field.ErrorList {
	return validation.ValidateVMImageFinalizersUpdate(obj.(*banlieue.VMImage), old.(*banlieue.VMImage))
}

func (FinalizersStrategy) WarningsOnUpdate(context.Context, runtime.Object, runtime.Object) []string {
	return nil
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

// NewREST builds the etcd-backed storage of VMImages, its status
// subresource and its finalizers subresource.
func NewREST(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, formats ImportFormats) (*REST, *statusrest.REST, *statusrest.REST, error) {
	strategy := NewStrategy(scheme, formats)
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
		return nil, nil, nil, err
	}
	return &REST{store}, statusrest.NewREST(store, StatusStrategy{strategy}), statusrest.NewREST(store, FinalizersStrategy{strategy}), nil
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
	return []interface{}{os, img.Spec.OSVersion, img.Spec.Architecture, readyColumn(img), progressColumn(img),
		fmt.Sprintf("%d/%d", readyProviders(img), len(img.Status.PerProvider)), img.Status.Revision}, nil
},
	table.Column{Name: "OS", Type: "string", Description: "OS distribution (or family)."},
	table.Column{Name: "Version", Type: "string", Description: "OS version."},
	table.Column{Name: "Arch", Type: "string", Description: "CPU architecture."},
	table.Column{Name: "Ready", Type: "string", Description: "The Ready condition's status."},
	table.Column{Name: "Progress", Type: "string", Description: "Imported failure domains of all reporting, and the bytes fetched of those still importing."},
	table.Column{Name: "Ready-Providers", Type: "string", Priority: 1, Description: "Providers on which the image is ready, of those reporting."},
	table.Column{Name: "Revision", Type: "string", Priority: 1, Description: "The revision of spec.import being built."},
)

func readyColumn(img *banlieue.VMImage) string {
	for _, c := range img.Status.Conditions {
		if c.Type == banlieue.ImageReady {
			return string(c.Status)
		}
	}
	return "Unknown"
}

func readyProviders(img *banlieue.VMImage) int {
	n := 0
	for _, p := range img.Status.PerProvider {
		if p.Ready {
			n++
		}
	}
	return n
}

// progressColumn is "READY/ALL" failure domains, and while some import,
// the share of their bytes fetched ("1/3 40%"); empty without an import.
func progressColumn(img *banlieue.VMImage) string {
	if img.Spec.Import == nil {
		return ""
	}
	var ready, all int
	var done, total int64
	for _, p := range img.Status.PerProvider {
		for _, fd := range p.FailureDomains {
			all++
			if fd.Phase == banlieue.ImagePhaseReady && fd.Revision == img.Status.Revision {
				ready++
				continue
			}
			done, total = done+fd.BytesDone, total+fd.BytesTotal
		}
	}
	out := fmt.Sprintf("%d/%d", ready, all)
	if total > 0 {
		out += fmt.Sprintf(" %d%%", done*100/total)
	}
	return out
}
