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

package vmdk

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/firestoned/banlieue/pkg/images/imagetest"
)

// writeVMDK streams disk through a Writer in chunk-sized writes.
func writeVMDK(t *testing.T, path string, disk []byte, chunk int) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w, err := NewStreamOptimized(f, int64(len(disk)))
	if err != nil {
		t.Fatal(err)
	}
	for p := disk; len(p) > 0; {
		n := min(chunk, len(p))
		if m, err := w.Write(p[:n]); err != nil || m != n {
			t.Fatalf("Write: %d, %v", m, err)
		}
		p = p[n:]
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func verify(t *testing.T, qemu string, disk []byte, dir string) int64 {
	t.Helper()
	raw := filepath.Join(dir, "raw.img")
	out := filepath.Join(dir, "out.vmdk")
	if err := os.WriteFile(raw, disk, 0o600); err != nil {
		t.Fatal(err)
	}
	writeVMDK(t, out, disk, 7*1024)

	imagetest.Run(t, qemu, "check", out)
	var info struct {
		Format      string `json:"format"`
		VirtualSize int64  `json:"virtual-size"`
	}
	if err := json.Unmarshal([]byte(imagetest.Run(t, qemu, "info", "--output=json", out)), &info); err != nil {
		t.Fatal(err)
	}
	if info.Format != "vmdk" || info.VirtualSize != int64(len(disk)) {
		t.Fatalf("qemu-img info: format %q virtual-size %d, want vmdk %d", info.Format, info.VirtualSize, len(disk))
	}
	if got := imagetest.Run(t, qemu, "compare", "-f", "raw", "-F", "vmdk", raw, out); !bytes.Contains([]byte(got), []byte("identical")) {
		t.Fatalf("qemu-img compare: %s", got)
	}
	st, err := os.Stat(out)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

func TestStreamOptimizedQemu(t *testing.T) {
	qemu := imagetest.Tool(t, "qemu-img")
	const size = 20<<20 + 512 // not a multiple of the grain size
	disk := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	fill := func(off, n int) {
		for i := off; i < off+n; i++ {
			disk[i] = byte(rng.Uint32())
		}
	}
	fill(0, 4096)                // first grain
	fill(3*grainSize-1000, 5000) // crosses a grain boundary
	fill(5<<20+12345, 300<<10)   // several grains
	fill(16<<20, 100)            // an isolated grain
	fill(size-300, 300)          // last partial grain
	verify(t, qemu, disk, t.TempDir())
}

func TestStreamOptimizedMultipleTables(t *testing.T) {
	qemu := imagetest.Tool(t, "qemu-img")
	const size = 70<<20 + 1024 // three grain tables, the middle one empty
	disk := make([]byte, size)
	copy(disk[100:], "first table")
	copy(disk[size-10:], "last grain")
	verify(t, qemu, disk, t.TempDir())
}

func TestStreamOptimizedAllZero(t *testing.T) {
	qemu := imagetest.Tool(t, "qemu-img")
	disk := make([]byte, 20<<20+512)
	n := verify(t, qemu, disk, t.TempDir())
	// header, descriptor and padding + GD marker + GD + footer marker + footer + EOS.
	if n > (overheadSectors+8)*sectorSize {
		t.Fatalf("all-zero disk produced %d bytes, want no grains", n)
	}
}

func TestWriteBeyondCapacity(t *testing.T) {
	w, err := NewStreamOptimized(io.Discard, 1000) // rounded up to 1024
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w.Write(make([]byte, 1024)); err != nil || n != 1024 {
		t.Fatalf("Write up to capacity: %d, %v", n, err)
	}
	if n, err := w.Write([]byte{1}); !errors.Is(err, ErrCapacityExceeded) || n != 0 {
		t.Fatalf("Write beyond capacity: %d, %v", n, err)
	}
	w2, err := NewStreamOptimized(io.Discard, 1024)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := w2.Write(make([]byte, 2000)); !errors.Is(err, ErrCapacityExceeded) || n != 1024 {
		t.Fatalf("oversized Write: %d, %v", n, err)
	}
}
