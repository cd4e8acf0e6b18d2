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

package cloudinit

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The seed ISO read back by genisoimage's isoinfo, an independent reader
// (hack/install-libvirt.sh installs it): the volume label and the Rock
// Ridge names cloud-init looks for, and each file's bytes.
func TestISOReadBack(t *testing.T) {
	isoinfo, err := exec.LookPath("isoinfo")
	if err != nil {
		t.Fatal("isoinfo not found: run hack/install-libvirt.sh (genisoimage)")
	}
	files := map[string][]byte{
		"user-data":      []byte("#!/bin/sh\necho marker-1\n"),
		"meta-data":      []byte("instance-id: 1\nlocal-hostname: web-0\n"),
		"network-config": bytes.Repeat([]byte("x"), 5000), // more than one sector
		"empty":          nil,
	}
	img, err := ISO("cidata", files)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "seed.iso")
	if err := os.WriteFile(path, img, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(isoinfo, "-d", "-i", path).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "Volume id: cidata") || !strings.Contains(string(out), "Rock Ridge signatures version 1 found") {
		t.Fatalf("isoinfo -d: %v\n%s", err, out)
	}
	out, err = exec.Command(isoinfo, "-R", "-f", "-i", path).CombinedOutput()
	if err != nil {
		t.Fatalf("isoinfo -f: %v\n%s", err, out)
	}
	if got := strings.Fields(string(out)); strings.Join(got, " ") != "/empty /meta-data /network-config /user-data" {
		t.Errorf("Rock Ridge names %q", got)
	}
	for name, want := range files {
		got, err := exec.Command(isoinfo, "-R", "-i", path, "-x", "/"+name).Output()
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: read %d bytes (%v), want %d", name, len(got), err, len(want))
		}
	}
}

func TestISORefusesBadNames(t *testing.T) {
	if _, err := ISO("cidata", map[string][]byte{"": nil}); err == nil {
		t.Error("an empty name was accepted")
	}
	if _, err := ISO(strings.Repeat("v", 33), nil); err == nil {
		t.Error("a 33-byte volume ID was accepted")
	}
}
