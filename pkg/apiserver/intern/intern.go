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

// Package intern makes the objects banlieue's storage decodes share what
// they repeat: a fleet's VMs carry the same labels and, written by the
// same managers with the same fields, byte-identical managed-fields
// entries. Decoded one by one (the watch cache holds every VM decoded),
// each would hold its own copy; interned, they hold one. The bench's
// populated phase measures what it saves (bench/results/latest.md,
// "Memory per stored object").
package intern

import (
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// maxEntries bounds each table: past it the table starts again empty, so
// values no object holds any more are not kept forever; objects already
// decoded keep sharing what they got.
const maxEntries = 4096

// maxLen is the longest string or managed-fields entry interned: longer
// ones (a large annotation) are rarely repeated.
const maxLen = 4096

// Codec wraps a storage codec so that every object it decodes is interned.
func Codec(c runtime.Codec) runtime.Codec { return &codec{Codec: c, t: NewTable()} }

type codec struct {
	runtime.Codec
	t *Table
}

func (c *codec) Decode(data []byte, defaults *schema.GroupVersionKind, into runtime.Object) (runtime.Object, *schema.GroupVersionKind, error) {
	obj, gvk, err := c.Codec.Decode(data, defaults, into)
	if err == nil {
		c.t.Object(obj)
	}
	return obj, gvk, err
}

// Table holds the canonical copies. The objects interned share its
// strings and byte slices: they must not change a managed-fields entry's
// bytes in place (nothing does: the field manager writes new entries).
type Table struct {
	mu      sync.Mutex
	strings map[string]string
	raws    map[string][]byte
}

// NewTable returns an empty table.
func NewTable() *Table {
	return &Table{strings: map[string]string{}, raws: map[string][]byte{}}
}

// Object interns obj's labels, finalizers and managed-fields entries; an
// object without metadata is left as it is.
func (t *Table) Object(obj runtime.Object) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if labels := m.GetLabels(); len(labels) > 0 {
		shared := make(map[string]string, len(labels))
		for k, v := range labels {
			shared[t.stringLocked(k)] = t.stringLocked(v)
		}
		m.SetLabels(shared)
	}
	for i, f := range m.GetFinalizers() {
		m.GetFinalizers()[i] = t.stringLocked(f)
	}
	entries := m.GetManagedFields()
	for i := range entries {
		t.entryLocked(&entries[i])
	}
}

func (t *Table) entryLocked(e *metav1.ManagedFieldsEntry) {
	e.Manager, e.APIVersion, e.FieldsType, e.Subresource = t.stringLocked(e.Manager), t.stringLocked(e.APIVersion), t.stringLocked(e.FieldsType), t.stringLocked(e.Subresource)
	e.Operation = metav1.ManagedFieldsOperationType(t.stringLocked(string(e.Operation)))
	if e.FieldsV1 == nil || len(e.FieldsV1.Raw) == 0 || len(e.FieldsV1.Raw) > maxLen {
		return
	}
	if raw, ok := t.raws[string(e.FieldsV1.Raw)]; ok {
		e.FieldsV1.Raw = raw
		return
	}
	if len(t.raws) >= maxEntries {
		clear(t.raws)
	}
	t.raws[string(e.FieldsV1.Raw)] = e.FieldsV1.Raw
}

func (t *Table) stringLocked(s string) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	if canonical, ok := t.strings[s]; ok {
		return canonical
	}
	if len(t.strings) >= maxEntries {
		clear(t.strings)
	}
	t.strings[s] = s
	return s
}
