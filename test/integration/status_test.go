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

package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"
)

// TestStatusWritesKeepMetadata: a /status update, merge patch or
// server-side apply that changes labels, annotations, finalizers or owner
// references leaves them as stored (as Kubernetes' own status strategies
// do), for each of the three status subresources, while the status change
// itself is written. Labels drive providerSelector: a status writer must
// not be able to relabel a Provider.
func TestStatusWritesKeepMetadata(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	rc := s.Client.BanlieueV1alpha1().RESTClient()
	kinds := []struct {
		resource, namespace, example string
		// status is a status change the strategy accepts.
		status map[string]interface{}
	}{
		{"virtualmachines", ns, "virtualmachine.yaml", map[string]interface{}{"observedGeneration": 1}},
		{"providers", ns, "provider.yaml", map[string]interface{}{"observedGeneration": 1}},
		{"vmimages", "", "vmimage.yaml", map[string]interface{}{"perProvider": []interface{}{map[string]interface{}{"provider": "banlieue-system/x", "ready": true}}}},
	}
	stored := map[string]interface{}{
		"labels":          map[string]interface{}{"dc": "dc1"},
		"annotations":     map[string]interface{}{"note": "kept"},
		"finalizers":      []interface{}{"example.com/keep"},
		"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "name": "owner", "uid": "00000000-0000-0000-0000-000000000001"}},
	}
	forged := map[string]interface{}{
		"labels":          map[string]interface{}{"dc": "dc2", "forged": "yes"},
		"annotations":     map[string]interface{}{"note": "forged"},
		"finalizers":      []interface{}{"example.com/forged"},
		"ownerReferences": []interface{}{map[string]interface{}{"apiVersion": "v1", "kind": "ConfigMap", "name": "forged", "uid": "00000000-0000-0000-0000-000000000002"}},
	}
	for _, k := range kinds {
		for _, how := range []string{"update", "merge-patch", "apply"} {
			t.Run(k.resource+"/"+how, func(t *testing.T) {
				var obj map[string]interface{}
				readExample(t, k.example, &obj)
				name := fmt.Sprintf("status-meta-%s", how)
				md := obj["metadata"].(map[string]interface{})
				md["name"] = name
				for f, v := range stored {
					md[f] = v
				}
				at := func(r *restclient.Request) *restclient.Request {
					if k.namespace != "" {
						md["namespace"] = k.namespace
						r = r.Namespace(k.namespace)
					}
					return r.Resource(k.resource)
				}
				body, _ := json.Marshal(obj)
				created := map[string]interface{}{}
				raw, err := at(rc.Post()).Body(body).DoRaw(ctx)
				if err == nil {
					err = json.Unmarshal(raw, &created)
				}
				if err != nil {
					t.Fatalf("create: %v: %s", err, raw)
				}
				status := func(r *restclient.Request) *restclient.Request { return at(r).Name(name).SubResource("status") }
				var out []byte
				switch how {
				case "update":
					cmd := created["metadata"].(map[string]interface{})
					for f, v := range forged {
						cmd[f] = v
					}
					created["status"] = k.status
					b, _ := json.Marshal(created)
					out, err = status(rc.Put()).Body(b).DoRaw(ctx)
				case "merge-patch":
					b, _ := json.Marshal(map[string]interface{}{"metadata": forged, "status": k.status})
					out, err = status(rc.Patch(types.MergePatchType)).Body(b).DoRaw(ctx)
				case "apply":
					b, _ := json.Marshal(map[string]interface{}{
						"apiVersion": "banlieue.io/v1alpha1", "kind": created["kind"],
						"metadata": mergeMaps(map[string]interface{}{"name": name}, forged), "status": k.status,
					})
					out, err = status(rc.Patch(types.ApplyPatchType)).Param("fieldManager", "status-writer").Param("force", "true").Body(b).DoRaw(ctx)
				}
				if err != nil {
					t.Fatalf("status %s: %v: %s", how, err, out)
				}
				var got map[string]interface{}
				if err := json.Unmarshal(out, &got); err != nil {
					t.Fatal(err)
				}
				gotMD := got["metadata"].(map[string]interface{})
				for f, want := range stored {
					if !reflect.DeepEqual(gotMD[f], want) {
						t.Errorf("metadata.%s after a status %s = %v, want it kept as %v", f, how, gotMD[f], want)
					}
				}
				st, _ := got["status"].(map[string]interface{})
				for f, want := range k.status {
					if fmt.Sprint(st[f]) != fmt.Sprint(want) {
						t.Errorf("status.%s after a status %s = %v, want %v (the status part must be written)", f, how, st[f], want)
					}
				}
			})
		}
	}
}

func mergeMaps(a, b map[string]interface{}) map[string]interface{} {
	out := map[string]interface{}{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}
