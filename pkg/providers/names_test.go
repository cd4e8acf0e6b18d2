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

package providers

import (
	"strings"
	"testing"
)

func TestBackendName(t *testing.T) {
	long := strings.Repeat("n", 253)
	for _, tc := range []struct{ namespace, name, want string }{
		{"banlieue-system", "db-prod-01", "banlieue-system.db-prod-01"},
		{"team", "a-db", "team.a-db"},
		{"team-a", "db", "team-a.db"},
		{"ns", "a.b", "ns.a.b"},
		{"ns", long, "ns." + strings.Repeat("n", 80-3-9) + "-"}, // hash follows
	} {
		got := BackendName(tc.namespace, tc.name)
		if !strings.HasPrefix(got, tc.want) || (len(tc.want) < 70 && got != tc.want) {
			t.Errorf("BackendName(%q, %q) = %q, want %q", tc.namespace, tc.name, got, tc.want)
		}
		if len(got) > MaxBackendNameLength {
			t.Errorf("BackendName(%q, %q) is %d characters long", tc.namespace, tc.name, len(got))
		}
	}
	// Names that collided when joined with a hyphen, and long names that
	// share their first 80 characters, stay apart.
	pairs := [][2][2]string{
		{{"team", "a-db"}, {"team-a", "db"}},
		{{"ns", long + "a"}, {"ns", long + "b"}},
		{{"ns", long[:200]}, {"ns", long[:201]}},
	}
	for _, p := range pairs {
		a, b := BackendName(p[0][0], p[0][1]), BackendName(p[1][0], p[1][1])
		if a == b {
			t.Errorf("%s/%s and %s/%s share the backend name %q", p[0][0], p[0][1], p[1][0], p[1][1], a)
		}
	}
}

func TestHostName(t *testing.T) {
	for in, want := range map[string]string{
		"db-prod-01":                   "db-prod-01",
		strings.Repeat("a", 70):        strings.Repeat("a", 63),
		strings.Repeat("a", 62) + "-b": strings.Repeat("a", 62),
		"x.":                           "x",
	} {
		if got := HostName(in); got != want {
			t.Errorf("HostName(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSnapshotName(t *testing.T) {
	a := SnapshotName("0f8e7c1a-2b3d-4e5f-8a9b-0c1d2e3f4a5b")
	if a != "banlieue-snap-0f8e7c1a2b3d4e5f8a9b0c1d2e" {
		t.Errorf("SnapshotName = %q", a)
	}
	if len(a) > 40 {
		t.Errorf("SnapshotName is %d characters, Proxmox VE allows 40", len(a))
	}
	if b := SnapshotName("0f8e7c1a-2b3d-4e5f-8a9b-ffffffffffff"); b == a {
		t.Errorf("two UIDs that differ past the prefix kept share %q", a)
	}
}
