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

package snapshots

import (
	"strings"
	"testing"

	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/providers"
)

func TestBoundOf(t *testing.T) {
	for _, tc := range []struct {
		name        string
		providerMax *int32
		backendMax  int32
		want        int32
		why         string
		allows      map[int]bool
	}{
		{name: "neither", allows: map[int]bool{0: true, 1000: true}},
		{name: "backend only", backendMax: 32, want: 32, why: "backend", allows: map[int]bool{31: true, 32: false}},
		{name: "provider tighter", providerMax: ptr.To[int32](3), backendMax: 32, want: 3, why: "maxSnapshotsPerVM", allows: map[int]bool{2: true, 3: false}},
		{name: "provider cannot raise the backend's", providerMax: ptr.To[int32](50), backendMax: 32, want: 32, why: "backend", allows: map[int]bool{32: false}},
		{name: "provider where the backend has none", providerMax: ptr.To[int32](2), want: 2, why: "maxSnapshotsPerVM", allows: map[int]bool{1: true, 2: false}},
		{name: "provider zero forbids all", providerMax: ptr.To[int32](0), backendMax: 32, want: 0, why: "maxSnapshotsPerVM", allows: map[int]bool{0: false}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := BoundOf("ns/p", tc.providerMax, providers.SnapshotLimits{MaxPerVM: tc.backendMax})
			if b.Max != tc.want || !strings.Contains(b.Why, tc.why) {
				t.Errorf("BoundOf = %+v, want max %d, why containing %q", b, tc.want, tc.why)
			}
			for n, want := range tc.allows {
				if got := b.Allows(n); got != want {
					t.Errorf("Allows(%d) = %v, want %v", n, got, want)
				}
			}
		})
	}
}
