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

// Package build assembles banlieue's release image: one layer holding
// /banlieue, on an empty base, entrypoint /banlieue, user 65532 (non-root,
// distroless's "nonroot").
package build

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// User is the image's user: not root.
const User = "65532:65532"

// Entrypoint is where the binary is in the image.
const Entrypoint = "/banlieue"

// Image is the release image of binary.
func Image(binary string) (v1.Image, error) { return ImageAt(binary, Entrypoint) }

// ImageAt is the image of binary alone, at entrypoint (an absolute path),
// as Image makes banlieue's: the local node's pause image is made so too.
func ImageAt(binary, entrypoint string) (v1.Image, error) {
	data, err := os.ReadFile(binary)
	if err != nil {
		return nil, err
	}
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	// A fixed time: the same binary gives the same image.
	epoch := time.Unix(0, 0)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(entrypoint, "/"), Mode: 0o555, Size: int64(len(data)), ModTime: epoch, Typeflag: tar.TypeReg}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(data); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(layer.Bytes())), nil })
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", "amd64"
	cfg.Config.Entrypoint, cfg.Config.User = []string{entrypoint}, User
	cfg.Config.Labels = map[string]string{"org.opencontainers.image.source": "https://github.com/firestoned/banlieue"}
	return mutate.ConfigFile(img, cfg)
}

// Write writes the image of binary, named tag, as a tarball to out.
func Write(binary, tag, out string) error { return WriteAt(binary, Entrypoint, tag, out) }

// WriteAt writes ImageAt(binary, entrypoint), named tag, as a tarball to out.
func WriteAt(binary, entrypoint, tag, out string) error {
	ref, err := name.NewTag(tag)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	img, err := ImageAt(binary, entrypoint)
	if err != nil {
		return err
	}
	return tarball.WriteToFile(out, ref, img)
}
