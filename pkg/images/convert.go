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

// Package images turns one disk image format into another while it is
// streamed, in Go: the release image is the banlieue binary alone, with no
// qemu-img, and a backend that cannot take an image's format (vSphere and
// qcow2) gets it converted on the way.
package images

import (
	"fmt"
	"io"

	"github.com/firestoned/banlieue/pkg/images/qcow2"
	"github.com/firestoned/banlieue/pkg/images/vmdk"
)

// chunk is how much of the virtual disk is read at a time: a few grains
// of the VMDK, bounded memory.
const chunk = 1 << 20

// QCOW2ToStreamOptimized writes the qcow2 image src (size bytes) to w as a
// streamOptimized VMDK of the same virtual disk, reading it in order.
func QCOW2ToStreamOptimized(src io.ReaderAt, size int64, w io.Writer) error {
	img, err := qcow2.Open(src, size)
	if err != nil {
		return err
	}
	out, err := vmdk.NewStreamOptimized(w, img.VirtualSize())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.NewSectionReader(img, 0, img.VirtualSize())); err != nil {
		return fmt.Errorf("converting qcow2 to VMDK: %w", err)
	}
	return out.Close()
}
