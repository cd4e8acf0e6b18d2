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

package ippool

import (
	"testing"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

func TestAllows(t *testing.T) {
	for _, tc := range []struct {
		name      string
		allowed   []string
		namespace string
		want      bool
	}{
		{"unset: every namespace", nil, "team-a", true},
		{"empty: every namespace", []string{}, "team-a", true},
		{"listed", []string{"team-a", "team-b"}, "team-b", true},
		{"not listed", []string{"team-a"}, "team-b", false},
		{"no prefix match", []string{"team"}, "team-a", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pool := &infrav1.IPPool{Spec: infrav1.IPPoolSpec{AllowedNamespaces: tc.allowed}}
			if got := Allows(pool, tc.namespace); got != tc.want {
				t.Errorf("Allows(%v, %q) = %v, want %v", tc.allowed, tc.namespace, got, tc.want)
			}
		})
	}
}
