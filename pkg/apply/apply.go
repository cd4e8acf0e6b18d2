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
// Package apply server-side-applies decoded manifests, as "kubectl apply
// --server-side" does: "banlieue bootstrap" installs with it, and the local
// environment sets its cluster up with it.
package apply

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
)

// Applier applies objects with one field manager.
type Applier struct {
	FieldManager string
	// DryRun asks the server to validate and admit without persisting.
	DryRun bool
	// Applied, when set, is told of each object once applied.
	Applied func(obj *unstructured.Unstructured)

	mapper *restmapper.DeferredDiscoveryRESTMapper
	client *dynamic.DynamicClient
}

// New returns an Applier for the cluster of cfg.
func New(cfg *restclient.Config, fieldManager string) (*Applier, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &Applier{FieldManager: fieldManager, client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))}, nil
}

// Apply applies objects in order, forcing the manager's ownership of the
// fields it sets.
func (a *Applier) Apply(ctx context.Context, objs ...*unstructured.Unstructured) error {
	for _, obj := range objs {
		ri, err := a.resource(ctx, obj)
		if err != nil {
			return err
		}
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		opts := metav1.PatchOptions{FieldManager: a.FieldManager, Force: new(true)}
		if a.DryRun {
			opts.DryRun = []string{metav1.DryRunAll}
		}
		if _, err := ri.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, opts); err != nil {
			return fmt.Errorf("applying %s %s: %w", obj.GetKind(), Name(obj), err)
		}
		if a.Applied != nil {
			a.Applied(obj)
		}
	}
	return nil
}

// Get reads the live object obj names, nil when there is none.
func (a *Applier) Get(ctx context.Context, obj *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	ri, err := a.resource(ctx, obj)
	if err != nil {
		return nil, err
	}
	live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, err
	}
	return live, nil
}

// resource is obj's endpoint. A just-registered API (an APIService that
// has become Available, a CRD just established) reaches discovery a moment
// later: the cached discovery is forgotten and asked again until it shows
// up, for a minute.
func (a *Applier) resource(ctx context.Context, obj *unstructured.Unstructured) (dynamic.ResourceInterface, error) {
	gvk := obj.GroupVersionKind()
	var mapping *meta.RESTMapping
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		var err error
		mapping, err = a.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if meta.IsNoMatchError(err) {
			a.mapper.Reset()
			return false, nil
		}
		return err == nil, err
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", gvk.Kind, obj.GetName(), err)
	}
	if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
		return a.client.Resource(mapping.Resource).Namespace(obj.GetNamespace()), nil
	}
	return a.client.Resource(mapping.Resource), nil
}

// Name is "namespace/name", or the name of a cluster-scoped object.
func Name(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}

// Decode splits YAML (or JSON) documents into objects, skipping empty ones.
func Decode(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}
