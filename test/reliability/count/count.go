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

// Package count holds the two counts every reliability figure is made of:
// what a client was told was done and is not there (lost), and what is
// there more than once (duplicated). They are measured from observations,
// never written by hand, and tested on crafted losses and duplicates so a
// broken count cannot hide one.
package count

import (
	"cmp"
	"slices"
)

// Lost returns, sorted, the keys acknowledged to a client that the final
// state lacks or holds with another identity (a UID, a value): an object
// deleted and created again under the same name is lost too.
func Lost[K cmp.Ordered, V comparable](acked, stored map[K]V) []K {
	var out []K
	for k, v := range acked {
		if got, ok := stored[k]; !ok || got != v {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// Missing returns, sorted, the keys of want that seen does not hold.
func Missing[K cmp.Ordered](want []K, seen map[K]int) []K {
	var out []K
	for _, k := range want {
		if seen[k] == 0 {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Sightings counts every observation of each key, before any
// de-duplication: an event delivered twice is counted twice.
func Sightings[K comparable](seen []K) map[K]int {
	out := map[K]int{}
	for _, k := range seen {
		out[k]++
	}
	return out
}

// Duplicated returns how many observations repeat a key seen before, and
// those keys, sorted.
func Duplicated[K cmp.Ordered](sightings map[K]int) (extra int, keys []K) {
	for k, n := range sightings {
		if n > 1 {
			extra += n - 1
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	return extra, keys
}
