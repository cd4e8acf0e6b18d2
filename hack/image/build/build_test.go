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

package build

import (
	"archive/tar"
	"bufio"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// dockerfileCopies are the sources of the Dockerfile's build-stage COPY
// lines (the "COPY --from" of the final stage aside).
func dockerfileCopies(t *testing.T, root string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 3 || fields[0] != "COPY" || strings.HasPrefix(fields[1], "--") {
			continue
		}
		out = append(out, fields[1:len(fields)-1]...)
	}
	return out
}

func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.Walk(src, func(p string, info os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		target := filepath.Join(dst, rel)
		if info.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
			return err
		}
		return os.WriteFile(target, data, info.Mode().Perm())
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestReleaseImage: the Go binary built from exactly the files the
// Dockerfile copies (with its -tags release; cgo as the machine has it)
// becomes an image of one file
// on an empty base, run as non-root; unpacked, its entrypoint answers
// --version and apiserver --help.
func TestReleaseImage(t *testing.T) {
	root, err := filepath.Abs("../../..")
	if err != nil {
		t.Fatal(err)
	}
	// Under bin/ (ignored), at one place: the build cache then serves
	// later runs. Emptied first: only what the Dockerfile copies is there.
	src := filepath.Join(root, "bin", ".dockerfile-context")
	if err := os.RemoveAll(src); err != nil {
		t.Fatal(err)
	}
	copies := dockerfileCopies(t, root)
	if len(copies) == 0 {
		t.Fatal("the Dockerfile copies nothing")
	}
	for _, c := range copies {
		copyTree(t, filepath.Join(root, c), filepath.Join(src, c))
	}
	binary := filepath.Join(t.TempDir(), "banlieue")
	build := exec.Command("go", "build", "-tags", "release", "-ldflags=-X main.version=test-1", "-o", binary, "./cmd/banlieue")
	// CGO_ENABLED=0 as in the Dockerfile would rebuild every dependency
	// once more; the files are what this test is about.
	build.Dir = src
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building from the Dockerfile's files %v: %v\n%s", copies, err, out)
	}

	out := filepath.Join(t.TempDir(), "image.tar")
	if err := Write(binary, "ghcr.io/firestoned/banlieue:test", out); err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(out, nil)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != User || strings.HasPrefix(cfg.Config.User, "0") || len(cfg.Config.Entrypoint) != 1 || cfg.Config.Entrypoint[0] != Entrypoint {
		t.Errorf("config: user %q, entrypoint %v", cfg.Config.User, cfg.Config.Entrypoint)
	}
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	fs := t.TempDir()
	var files []string
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, h.Name)
		f, err := os.OpenFile(filepath.Join(fs, h.Name), os.O_CREATE|os.O_WRONLY, os.FileMode(h.Mode))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(f, tr); err != nil {
			t.Fatal(err)
		}
		f.Close()
	}
	if len(files) != 1 || files[0] != "banlieue" {
		t.Fatalf("the image holds %v, want banlieue alone", files)
	}
	entry := filepath.Join(fs, "banlieue")
	if got, err := exec.Command(entry, "--version").CombinedOutput(); err != nil || !strings.Contains(string(got), "test-1") {
		t.Errorf("--version: %q, %v", got, err)
	}
	got, err := exec.Command(entry, "apiserver", "--help").CombinedOutput()
	if err != nil || !strings.Contains(string(got), "--etcd-servers") {
		t.Errorf("apiserver --help: %v\n%s", err, got)
	}
	if got, _ := exec.Command(entry, "dev", "--help").CombinedOutput(); strings.Contains(string(got), "local") && !strings.Contains(string(got), "unknown command") {
		t.Errorf("the image's binary has the dev command:\n%s", got)
	}
}
