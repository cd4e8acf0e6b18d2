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

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

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

// TestUnplaced: only a machine with neither a failure domain nor a
// Provider annotation is this controller's to place or report.
func TestUnplaced(t *testing.T) {
	for _, tc := range []struct {
		name        string
		fd          string
		annotations map[string]string
		want        bool
	}{
		{"nothing says where", "", nil, true},
		{"a failure domain", "fd-a", nil, false},
		{"a Provider", "", map[string]string{infrastructure.ProviderAnnotation: "banlieue-system/pve"}, false},
		{"other annotations only", "", map[string]string{"note": "x"}, true},
	} {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Annotations: tc.annotations}}
		m.Spec.FailureDomain = tc.fd
		if got := unplaced(m); got != tc.want {
			t.Errorf("%s: unplaced = %v, want %v", tc.name, got, tc.want)
		}
	}
}
