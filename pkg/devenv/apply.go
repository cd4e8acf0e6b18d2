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
package devenv

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/apply"
)

// FieldManager is the server-side apply manager of objects devenv applies.
const FieldManager = "banlieue-dev"

// ApplyFiles server-side-applies every YAML document of the named files
// (sorted by name) in fsys, like "kubectl apply --server-side -f".
func ApplyFiles(ctx context.Context, cfg *restclient.Config, fsys fs.FS, names ...string) error {
	sort.Strings(names)
	var objs []*unstructured.Unstructured
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return err
		}
		docs, err := decodeYAML(data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		objs = append(objs, docs...)
	}
	return Apply(ctx, cfg, apply.Ordered(objs)...)
}

// YAMLFiles lists the .yaml files directly in dir of fsys.
func YAMLFiles(fsys fs.FS, dir string) ([]string, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() && path.Ext(e.Name()) == ".yaml" {
			out = append(out, path.Join(dir, e.Name()))
		}
	}
	return out, nil
}

// Apply server-side-applies objects in order.
func Apply(ctx context.Context, cfg *restclient.Config, objs ...*unstructured.Unstructured) error {
	a, err := apply.New(cfg, FieldManager)
	if err != nil {
		return err
	}
	return a.Apply(ctx, objs...)
}

func decodeYAML(data []byte) ([]*unstructured.Unstructured, error) { return apply.Decode(data) }
