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

// Package imagetest runs QEMU's own tools for the image packages' tests
// (qemu-img is the reference every reader and writer is checked
// against), and serves images from loopback with their checksums for the
// e2e tests of every backend's imports (Serve, Checksum).
package imagetest

import (
	"os/exec"
	"strings"
	"testing"
)

// Tool returns the path of name (qemu-img, qemu-io), failing the test
// (never skipping it) when it is missing: make test installs qemu-utils.
func Tool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Fatalf("%s is required by these tests (install qemu-utils; make test does): %v", name, err)
	}
	return p
}

// Run runs name with args and returns its output, failing the test when
// it fails.
func Run(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
