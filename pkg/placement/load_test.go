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

package placement

import (
	"maps"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// TestLoad: placing, moving, unplacing and deleting VMs keeps the counts
// exact; a VM's own placement is left out of what it is weighed against.
func TestLoad(t *testing.T) {
	type op struct {
		uid types.UID
		key string
		del bool
	}
	for _, tc := range []struct {
		name string
		ops  []op
		self types.UID
		want map[string]int
	}{
		{"empty", nil, "", map[string]int{}},
		{"two domains", []op{{uid: "a", key: "p|fd1"}, {uid: "b", key: "p|fd1"}, {uid: "c", key: "p|fd2"}}, "", map[string]int{"p|fd1": 2, "p|fd2": 1}},
		{"the same event twice counts once", []op{{uid: "a", key: "p|fd1"}, {uid: "a", key: "p|fd1"}}, "", map[string]int{"p|fd1": 1}},
		{"a move", []op{{uid: "a", key: "p|fd1"}, {uid: "a", key: "p|fd2"}}, "", map[string]int{"p|fd2": 1}},
		{"unplaced", []op{{uid: "a", key: "p|fd1"}, {uid: "a", key: ""}}, "", map[string]int{}},
		{"deleted", []op{{uid: "a", key: "p|fd1"}, {uid: "b", key: "p|fd1"}, {uid: "a", del: true}}, "", map[string]int{"p|fd1": 1}},
		{"deleting an unknown VM", []op{{uid: "z", del: true}}, "", map[string]int{}},
		{"self left out", []op{{uid: "a", key: "p|fd1"}, {uid: "b", key: "p|fd1"}}, "a", map[string]int{"p|fd1": 1}},
		{"self alone left out", []op{{uid: "a", key: "p|fd1"}}, "a", map[string]int{}},
		{"self unplaced", []op{{uid: "b", key: "p|fd1"}}, "a", map[string]int{"p|fd1": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := NewLoad()
			for _, o := range tc.ops {
				if o.del {
					l.Delete(o.uid)
				} else {
					l.Set(o.uid, o.key)
				}
			}
			if got := l.Counts(tc.self); !maps.Equal(got, tc.want) {
				t.Errorf("Counts(%q) = %v, want %v", tc.self, got, tc.want)
			}
		})
	}
}

// TestLoadCountsAreNotShared: a caller changing the returned map changes
// nothing inside.
func TestLoadCountsAreNotShared(t *testing.T) {
	l := NewLoad()
	l.Set("a", "k")
	l.Counts("")["k"] = 99
	if got := l.Counts("")["k"]; got != 1 {
		t.Errorf("count %d after a caller wrote to a returned map", got)
	}
	if key, ok := l.Placed("a"); !ok || key != "k" {
		t.Errorf("Placed(a) = %q, %v", key, ok)
	}
}

// TestLoadHandler: informer events keep the count (a move, an unplaced
// VM, a delete, a delete seen only as a tombstone) and every deleted VM
// is told to gone; objects placedAt does not know are ignored.
func TestLoadHandler(t *testing.T) {
	type vm struct {
		uid types.UID
		key string
	}
	placedAt := func(obj any) (types.UID, string, bool) {
		v, ok := obj.(vm)
		return v.uid, v.key, ok
	}
	l := NewLoad()
	var gone []types.UID
	h := l.Handler(placedAt, func(uid types.UID) { gone = append(gone, uid) })
	h.OnAdd(vm{"a", "p|fd1"}, true)
	h.OnAdd(vm{"b", "p|fd1"}, true)
	h.OnAdd(vm{"c", ""}, true)
	h.OnAdd("not a VM", false)
	h.OnUpdate(vm{"b", "p|fd1"}, vm{"b", "p|fd2"})
	if got, want := l.Counts(""), map[string]int{"p|fd1": 1, "p|fd2": 1}; !maps.Equal(got, want) {
		t.Errorf("after adds and a move: %v, want %v", got, want)
	}
	h.OnDelete(vm{"a", "p|fd1"})
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: vm{"b", "p|fd2"}})
	h.OnDelete("not a VM")
	if got := l.Counts(""); len(got) != 0 {
		t.Errorf("after the deletes: %v, want nothing", got)
	}
	if !slices.Equal(gone, []types.UID{"a", "b"}) {
		t.Errorf("gone heard of %v, want [a b]", gone)
	}
}
