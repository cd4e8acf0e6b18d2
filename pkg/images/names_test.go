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

package images

import (
	"testing"

	"k8s.io/apimachinery/pkg/types"
)

// TestParseArtifactName: what ArtifactName makes parses back; nothing else does.
func TestParseArtifactName(t *testing.T) {
	uid := types.UID("0f3c2a9e-51d4-4b7a-9c1e-2d8f6a0b1c3d")
	for _, tc := range []struct {
		name        string
		prefix, rev string
		ok          bool
	}{
		{ArtifactName(uid, "4a3b2c1d0e"), "0f3c2a9e51d4", "4a3b2c1d0e", true},
		{ArtifactName("short", "ab12"), "short", "ab12", true},
		{"banlieue-img-0f3c2a9e51d4-4a3b2c1d0e.ready", "", "", false},
		{"banlieue-img-0f3c2a9e51d4-", "", "", false},
		{"banlieue-img--4a3b2c1d0e", "", "", false},
		{"banlieue-img-0f3c2a9e51d4", "", "", false},
		{"banlieue-img-0f3c-2a9e-51d4", "", "", false},
		{"debian-12.qcow2", "", "", false},
		{"", "", "", false},
	} {
		prefix, rev, ok := ParseArtifactName(tc.name)
		if prefix != tc.prefix || rev != tc.rev || ok != tc.ok {
			t.Errorf("ParseArtifactName(%q) = %q, %q, %v; want %q, %q, %v", tc.name, prefix, rev, ok, tc.prefix, tc.rev, tc.ok)
		}
	}
	if got := UIDPrefix(uid); got != "0f3c2a9e51d4" {
		t.Errorf("UIDPrefix = %q", got)
	}
}
