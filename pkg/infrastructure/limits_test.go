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

package infrastructure

import "testing"

// TestLimitsFromCRD: the maxima of a crafted CRD, from its served version
// only; a CRD without a schema is an error.
func TestLimitsFromCRD(t *testing.T) {
	const doc = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: things.example.com}
spec:
  group: example.com
  names: {kind: Thing, plural: things}
  scope: Namespaced
  versions:
  - name: v0
    served: false
    storage: false
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec: {type: object, properties: {cpus: {type: integer, maximum: 1}}}
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              cpus: {type: integer, maximum: 7}
              memoryMiB: {type: integer, maximum: 1024}
              disks:
                type: array
                maxItems: 3
                items: {type: object, properties: {sizeGiB: {type: integer, maximum: 50}}}
              network: {type: array, maxItems: 2, items: {type: object}}
`
	got, err := LimitsFromCRD([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	if want := (Limits{CPUs: 7, MemoryMiB: 1024, Disks: 3, DiskGiB: 50, Interfaces: 2}); got != want {
		t.Errorf("limits %+v, want %+v", got, want)
	}
	if _, err := LimitsFromCRD([]byte("apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x}\nspec: {versions: [{name: v1, served: true}]}\n")); err == nil {
		t.Error("a CRD without a schema gave limits")
	}
}
