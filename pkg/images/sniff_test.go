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
	"encoding/binary"
	"errors"
	"testing"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func TestSniff(t *testing.T) {
	qcow := make([]byte, SniffLen)
	copy(qcow, qcow2Magic)
	binary.BigEndian.PutUint64(qcow[24:], 8<<30)
	raw := make([]byte, SniffLen)
	for _, c := range []struct {
		head     []byte
		format   v1alpha1.ImageFormat
		size     uint64
		mismatch bool
	}{
		{qcow, v1alpha1.ImageFormatQCOW2, 8 << 30, false},
		{raw, v1alpha1.ImageFormatRaw, 0, false},
		{[]byte("short"), v1alpha1.ImageFormatRaw, 0, false},
		{qcow, v1alpha1.ImageFormatRaw, 0, true},
		{raw, v1alpha1.ImageFormatQCOW2, 0, true},
		{qcow[:8], v1alpha1.ImageFormatQCOW2, 0, true},
	} {
		size, err := Sniff(c.head, c.format)
		if errors.Is(err, ErrFormatMismatch) != c.mismatch || (err != nil && !c.mismatch) || size != c.size {
			t.Errorf("Sniff(%q, %s) = %d, %v; want %d, mismatch %v", c.head, c.format, size, err, c.size, c.mismatch)
		}
	}
}
