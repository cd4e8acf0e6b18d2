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
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestProviderFinalizersSubresource: a write to a Provider's /finalizers
// (update, merge patch or server-side apply) changes its finalizers and
// nothing else: a spec change (the Secrets its provider is granted),
// labels (providerSelector), annotations, owner references and status
// sent with it are dropped. The identities serving a Provider hold this
// and /status only, so neither can change what they may read.
func TestProviderFinalizersSubresource(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	rc := s.Client.BanlieueV1alpha1().RESTClient()
	for _, how := range []string{"update", "merge-patch", "apply"} {
		t.Run(how, func(t *testing.T) {
			var obj map[string]interface{}
			readExample(t, "provider.yaml", &obj)
			name := "finalizers-" + how
			md := obj["metadata"].(map[string]interface{})
			md["name"], md["namespace"] = name, ns
			md["labels"] = map[string]interface{}{"dc": "dc1"}
			md["finalizers"] = []interface{}{"example.com/kept"}
			body, _ := json.Marshal(obj)
			raw, err := rc.Post().Namespace(ns).Resource("providers").Body(body).DoRaw(ctx)
			created := map[string]interface{}{}
			if err == nil {
				err = json.Unmarshal(raw, &created)
			}
			if err != nil {
				t.Fatalf("create: %v: %s", err, raw)
			}
			// A copy: the update case edits created in place.
			var wantSpec interface{}
			specJSON, _ := json.Marshal(created["spec"])
			if err := json.Unmarshal(specJSON, &wantSpec); err != nil {
				t.Fatal(err)
			}
			finalizers := []interface{}{"example.com/kept", "banlieue.io/provider-protection"}
			forgedSpec := map[string]interface{}{"connection": map[string]interface{}{"credentialsRef": map[string]interface{}{"name": "another-backends-secret"}}}
			forgedMD := map[string]interface{}{"labels": map[string]interface{}{"dc": "dc2"}, "annotations": map[string]interface{}{"forged": "yes"}, "finalizers": finalizers}
			var out []byte
			switch how {
			case "update":
				cmd := created["metadata"].(map[string]interface{})
				for k, v := range forgedMD {
					cmd[k] = v
				}
				created["spec"].(map[string]interface{})["connection"].(map[string]interface{})["credentialsRef"] = forgedSpec["connection"].(map[string]interface{})["credentialsRef"]
				created["status"] = map[string]interface{}{"observedGeneration": 7}
				b, _ := json.Marshal(created)
				out, err = rc.Put().Namespace(ns).Resource("providers").Name(name).SubResource("finalizers").Body(b).DoRaw(ctx)
			case "merge-patch":
				b, _ := json.Marshal(map[string]interface{}{"metadata": forgedMD, "spec": forgedSpec, "status": map[string]interface{}{"observedGeneration": 7}})
				out, err = rc.Patch(types.MergePatchType).Namespace(ns).Resource("providers").Name(name).SubResource("finalizers").Body(b).DoRaw(ctx)
			case "apply":
				b, _ := json.Marshal(map[string]interface{}{"apiVersion": "banlieue.io/v1alpha1", "kind": "Provider",
					"metadata": mergeMaps(map[string]interface{}{"name": name}, forgedMD), "spec": forgedSpec})
				out, err = rc.Patch(types.ApplyPatchType).Namespace(ns).Resource("providers").Name(name).SubResource("finalizers").
					Param("fieldManager", "finalizer-writer").Param("force", "true").Body(b).DoRaw(ctx)
			}
			if err != nil {
				t.Fatalf("finalizers %s: %v: %s", how, err, out)
			}
			raw, err = rc.Get().Namespace(ns).Resource("providers").Name(name).DoRaw(ctx)
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]interface{}
			if err := json.Unmarshal(raw, &got); err != nil {
				t.Fatal(err)
			}
			gotMD := got["metadata"].(map[string]interface{})
			if !reflect.DeepEqual(gotMD["finalizers"], finalizers) {
				t.Errorf("finalizers after a /finalizers %s = %v, want %v", how, gotMD["finalizers"], finalizers)
			}
			if !reflect.DeepEqual(got["spec"], wantSpec) {
				t.Errorf("spec changed through /finalizers (%s): %v, want %v", how, got["spec"], wantSpec)
			}
			if !reflect.DeepEqual(gotMD["labels"], map[string]interface{}{"dc": "dc1"}) || gotMD["annotations"] != nil {
				t.Errorf("labels %v, annotations %v changed through /finalizers (%s)", gotMD["labels"], gotMD["annotations"], how)
			}
			if st, _ := got["status"].(map[string]interface{}); st["observedGeneration"] != nil {
				t.Errorf("status changed through /finalizers (%s): %v", how, st)
			}
			// Let the Provider go.
			b, _ := json.Marshal(map[string]interface{}{"metadata": map[string]interface{}{"finalizers": nil}})
			if out, err := rc.Patch(types.MergePatchType).Namespace(ns).Resource("providers").Name(name).SubResource("finalizers").Body(b).DoRaw(ctx); err != nil {
				t.Fatalf("clearing finalizers: %v: %s", err, out)
			}
		})
	}
}
