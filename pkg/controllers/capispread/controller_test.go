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

package capispread

import "testing"

func TestLeastLoaded(t *testing.T) {
	domains := []string{"fd-c", "fd-a", "fd-b"}
	for _, tc := range []struct {
		load map[string]int
		want string
	}{
		{nil, "fd-a"},
		{map[string]int{"fd-a": 1}, "fd-b"},
		{map[string]int{"fd-a": 1, "fd-b": 1}, "fd-c"},
		{map[string]int{"fd-a": 2, "fd-b": 1, "fd-c": 2}, "fd-b"},
		{map[string]int{"fd-a": 1, "fd-b": 1, "fd-c": 1, "elsewhere": 0}, "fd-a"},
	} {
		if got := LeastLoaded(domains, tc.load); got != tc.want {
			t.Errorf("load %v: %s, want %s", tc.load, got, tc.want)
		}
	}
}
