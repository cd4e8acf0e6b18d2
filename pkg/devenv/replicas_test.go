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

package devenv

import "testing"

func TestOneLeading(t *testing.T) {
	for _, tc := range []struct {
		states []string
		want   int // -1: an error
	}{
		{[]string{"leading", "standby"}, 0},
		{[]string{"standby", "standby", "leading"}, 2},
		{[]string{"leading"}, -1},            // no standby to take over
		{[]string{"leading", "leading"}, -1}, // split brain
		{[]string{"standby", "standby"}, -1}, // nobody leads
		{[]string{"leading", "standby", ""}, -1},
		{nil, -1},
	} {
		got, err := oneLeading(tc.states)
		if tc.want < 0 {
			if err == nil {
				t.Errorf("%v: leader %d, want an error", tc.states, got)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%v: %d, %v; want %d", tc.states, got, err, tc.want)
		}
	}
}
