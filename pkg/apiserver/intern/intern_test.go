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

package intern

import (
	"fmt"
	"reflect"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decoded is an object as a decoder makes it: every string and byte slice
// its own allocation, equal in value to another decoded object's.
func decoded(name, fields string) *metav1.PartialObjectMetadata {
	own := func(s string) string { return string([]byte(s)) }
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: own(name),
		Labels:     map[string]string{own("app"): own("db"), own("index"): own(name)},
		Finalizers: []string{own("banlieue.io/vm")},
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: own("kubectl"), Operation: metav1.ManagedFieldsOperationApply,
			APIVersion: own("banlieue.io/v1alpha1"), FieldsType: own("FieldsV1"), FieldsV1: &metav1.FieldsV1{Raw: []byte(fields)}}},
	}}
}

func sameBytes(a, b []byte) bool { return len(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b) }

func sameString(a, b string) bool { return a != "" && unsafe.StringData(a) == unsafe.StringData(b) }

// TestObjectsShareWhatTheyRepeat: equal labels, finalizers and
// managed-fields entries end up one copy; values stay as they were; what
// differs stays apart.
func TestObjectsShareWhatTheyRepeat(t *testing.T) {
	tab := NewTable()
	a, b := decoded("vm-1", `{"f:spec":{}}`), decoded("vm-2", `{"f:spec":{}}`)
	c := decoded("vm-3", `{"f:spec":{"f:classRef":{}}}`)
	want := decoded("vm-2", `{"f:spec":{}}`)
	for _, o := range []*metav1.PartialObjectMetadata{a, b, c} {
		tab.Object(o)
	}
	if !reflect.DeepEqual(b, want) {
		t.Fatalf("interning changed the object:\n%+v\nwant\n%+v", b, want)
	}
	if !sameBytes(a.ManagedFields[0].FieldsV1.Raw, b.ManagedFields[0].FieldsV1.Raw) {
		t.Error("equal managed fields are two copies")
	}
	if sameBytes(a.ManagedFields[0].FieldsV1.Raw, c.ManagedFields[0].FieldsV1.Raw) {
		t.Error("different managed fields share bytes")
	}
	if !sameString(a.Labels["app"], b.Labels["app"]) || !sameString(a.Finalizers[0], c.Finalizers[0]) || !sameString(a.ManagedFields[0].Manager, b.ManagedFields[0].Manager) {
		t.Error("equal label values, finalizers or managers are two copies")
	}
}

// TestTableBounded: past maxEntries a table starts again, so it never
// holds more than maxEntries values of a kind.
func TestTableBounded(t *testing.T) {
	tab := NewTable()
	for i := range 3 * maxEntries {
		o := decoded(fmt.Sprintf("vm-%d", i), fmt.Sprintf(`{"f:metadata":{"f:labels":{"f:%d":{}}}}`, i))
		tab.Object(o)
		if len(tab.strings) > maxEntries || len(tab.raws) > maxEntries {
			t.Fatalf("after %d objects the table holds %d strings and %d entries, bound %d", i+1, len(tab.strings), len(tab.raws), maxEntries)
		}
	}
}
