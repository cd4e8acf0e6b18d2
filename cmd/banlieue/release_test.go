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

package main

import (
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// harness are packages that must not be in the shipped binary: the local
// environment, the test control plane, the simulators.
var harness = []string{
	"github.com/firestoned/banlieue/pkg/cmd/dev",
	"github.com/firestoned/banlieue/pkg/devenv",
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd",
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim",
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim",
	"github.com/firestoned/banlieue/artifacts/examples",
	"github.com/vmware/govmomi/simulator",
}

// harnessIn lists the harness packages among deps (one per line).
func harnessIn(deps string) []string {
	var found []string
	for _, d := range strings.Fields(deps) {
		for _, h := range harness {
			if d == h || strings.HasPrefix(d, h+"/") {
				found = append(found, d)
			}
		}
	}
	return found
}

func deps(t *testing.T, tags ...string) string {
	t.Helper()
	args := append([]string{"list", "-deps"}, tags...)
	out, err := exec.Command("go", append(args, ".")...).CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	return string(out)
}

// TestReleaseBuildHoldsTheProductOnly: built with -tags release (as the
// Dockerfile and make release-binary build it), banlieue links none of the
// development harness; the default build does (which shows the check sees
// them when they are there).
func TestReleaseBuildHoldsTheProductOnly(t *testing.T) {
	if found := harnessIn(deps(t, "-tags", "release")); len(found) > 0 {
		t.Errorf("the release build links %v", found)
	}
	if found := harnessIn(deps(t)); len(found) == 0 {
		t.Error("the default build links no harness package: the check would not see one")
	}
	// The image's empty base has no CA bundle.
	if !slices.Contains(strings.Fields(deps(t, "-tags", "release")), "golang.org/x/crypto/x509roots/fallback") {
		t.Error("the release build carries no CA roots of its own")
	}
}
