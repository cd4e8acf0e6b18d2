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

package count

import (
	"slices"
	"testing"
)

// The helpers are fed a crafted loss and a crafted duplicate and must
// report them; a clean run must report nothing.
func TestLost(t *testing.T) {
	for _, tc := range []struct {
		name          string
		acked, stored map[string]string
		want          []string
	}{
		{"nothing lost", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "2", "c": "3"}, nil},
		{"one missing", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, []string{"b"}},
		{"recreated under the same name", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "9"}, []string{"b"}},
		{"everything missing", map[string]string{"b": "2", "a": "1"}, nil, []string{"a", "b"}},
	} {
		if got := Lost(tc.acked, tc.stored); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Lost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMissing(t *testing.T) {
	seen := Sightings([]string{"a", "c", "c"})
	if got := Missing([]string{"a", "b", "c", "d"}, seen); !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("Missing = %v, want [b d]", got)
	}
	if got := Missing([]string{"a", "c"}, seen); got != nil {
		t.Errorf("Missing = %v, want none", got)
	}
}

func TestDuplicated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seen  []string
		extra int
		keys  []string
	}{
		{"each once", []string{"a", "b", "c"}, 0, nil},
		{"one delivered twice", []string{"a", "b", "a"}, 1, []string{"a"}},
		{"one thrice, one twice", []string{"b", "a", "b", "c", "b", "a"}, 3, []string{"a", "b"}},
		{"nothing seen", nil, 0, nil},
	} {
		extra, keys := Duplicated(Sightings(tc.seen))
		if extra != tc.extra || !slices.Equal(keys, tc.keys) {
			t.Errorf("%s: Duplicated = %d %v, want %d %v", tc.name, extra, keys, tc.extra, tc.keys)
		}
	}
}
