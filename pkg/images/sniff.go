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
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// ErrFormatMismatch: an image's bytes are not in the format its import
// names (FormatMismatch), found before anything is built.
var ErrFormatMismatch = errors.New("format mismatch")

// SniffLen is how many first bytes Sniff reads (fewer when the image is
// shorter): a qcow2 header up to its virtual size.
const SniffLen = 32

// qcow2Magic starts every qcow2 image.
var qcow2Magic = []byte{'Q', 'F', 'I', 0xfb}

// Sniff checks that an image whose first bytes are head (SniffLen, or
// all of a shorter image) is in format, qcow2 or raw: a qcow2 must start
// with qcow2's magic, a raw image must not (a qcow2 told to QEMU as raw
// would boot nothing). It returns the virtual size a qcow2 header gives,
// 0 for raw (its length is its size). Pure.
func Sniff(head []byte, format v1alpha1.ImageFormat) (virtualSize uint64, err error) {
	isQCOW2 := len(head) >= SniffLen && bytes.Equal(head[:4], qcow2Magic)
	switch {
	case format == v1alpha1.ImageFormatQCOW2 && !isQCOW2:
		return 0, fmt.Errorf("%w: the image's bytes do not start as a qcow2 image does, spec.import.format says qcow2", ErrFormatMismatch)
	case format == v1alpha1.ImageFormatQCOW2:
		return binary.BigEndian.Uint64(head[24:32]), nil
	case isQCOW2:
		return 0, fmt.Errorf("%w: the image's bytes are a qcow2 image, spec.import.format says %s", ErrFormatMismatch, format)
	}
	return 0, nil
}

// ISOSniffLen is how many first bytes SniffISO reads: ISO 9660's first
// volume descriptor starts at 32 KiB.
const ISOSniffLen = 0x8006

// SniffISO checks that head (the first ISOSniffLen bytes) starts an ISO
// 9660 image: "CD001" in the first volume descriptor. Pure.
func SniffISO(head []byte) error {
	if len(head) < ISOSniffLen || string(head[0x8001:0x8006]) != "CD001" {
		return fmt.Errorf("%w: the image's bytes are not an ISO 9660 image, spec.import.format says iso", ErrFormatMismatch)
	}
	return nil
}
