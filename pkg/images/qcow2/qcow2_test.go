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

package qcow2

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/firestoned/banlieue/pkg/images/imagetest"
)

const virtualSize = 64 << 20

// rawImage writes a sparse raw disk with random data in a few regions and
// returns its path and contents.
func rawImage(t *testing.T, dir string) (string, []byte) {
	t.Helper()
	data := make([]byte, virtualSize)
	rng := rand.New(rand.NewPCG(1, 2))
	regions := []struct{ off, n int }{
		{0, 4096},                    // start of disk
		{65536 - 1000, 3000},         // crosses a 64 KiB cluster boundary
		{1<<20 + 7, 200000},          // unaligned, spans several clusters
		{3 << 20, 512},               // one sector
		{32<<20 - 300, 600},          // crosses an L2 span at 4 KiB clusters
		{virtualSize - 70000, 70000}, // end of disk
	}
	for _, r := range regions {
		for i := r.off; i < r.off+r.n; i++ {
			data[i] = byte(rng.Uint32())
		}
	}
	// A compressible region too: repeated text.
	copy(data[10<<20:], bytes.Repeat([]byte("banlieue qcow2 "), 20000))
	p := filepath.Join(dir, "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(virtualSize); err != nil {
		t.Fatal(err)
	}
	for _, r := range append(regions, struct{ off, n int }{10 << 20, 15 * 20000}) {
		if _, err := f.WriteAt(data[r.off:r.off+r.n], int64(r.off)); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p, data
}

func openFile(t *testing.T, p string) (*Image, error) {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	st, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	return Open(f, st.Size())
}

// compare reads the whole virtual disk in chunks that straddle cluster
// boundaries and checks it against want.
func compare(t *testing.T, img *Image, want []byte) {
	t.Helper()
	if got := img.VirtualSize(); got != int64(len(want)) {
		t.Fatalf("VirtualSize = %d, want %d", got, len(want))
	}
	buf := make([]byte, 1<<20+4097)
	for off := int64(0); off < int64(len(want)); {
		n, err := img.ReadAt(buf, off)
		end := off + int64(n)
		if end == int64(len(want)) {
			if err != io.EOF && !(err == nil && n == len(buf)) {
				t.Fatalf("ReadAt at %d: n=%d err=%v, want io.EOF at end", off, n, err)
			}
		} else if err != nil || n != len(buf) {
			t.Fatalf("ReadAt at %d: n=%d err=%v", off, n, err)
		}
		if !bytes.Equal(buf[:n], want[off:end]) {
			i := 0
			for buf[i] == want[off+int64(i)] {
				i++
			}
			t.Fatalf("guest bytes differ from raw at offset %d", off+int64(i))
		}
		off = end
	}
	if n, err := img.ReadAt(buf[:1], int64(len(want))); n != 0 || err != io.EOF {
		t.Fatalf("ReadAt at virtual size: n=%d err=%v, want 0, io.EOF", n, err)
	}
}

func TestConvertedImages(t *testing.T) {
	qi := imagetest.Tool(t, "qemu-img")
	dir := t.TempDir()
	raw, want := rawImage(t, dir)
	cases := []struct {
		name string
		args []string
	}{
		{"plain", nil},
		{"compressed", []string{"-c"}},
		{"v2", []string{"-o", "compat=0.10"}},
		{"v2-compressed", []string{"-c", "-o", "compat=0.10"}},
		{"cluster4k", []string{"-o", "cluster_size=4096"}},
		{"cluster4k-compressed", []string{"-c", "-o", "cluster_size=4096"}},
		{"cluster2m-compressed", []string{"-c", "-o", "cluster_size=2M"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(dir, c.name+".qcow2")
			args := append([]string{"convert", "-f", "raw", "-O", "qcow2"}, c.args...)
			imagetest.Run(t, qi, append(args, raw, out)...)
			img, err := openFile(t, out)
			if err != nil {
				t.Fatal(err)
			}
			if slices.Contains(c.args, "-c") && countCompressed(t, img) == 0 {
				t.Fatal("no compressed clusters in an image converted with -c")
			}
			compare(t, img, want)
		})
	}
}

// countCompressed returns how many L2 entries of img describe compressed clusters.
func countCompressed(t *testing.T, img *Image) int {
	t.Helper()
	n := 0
	for off := int64(0); off < img.VirtualSize(); off += img.clusterSize {
		e, err := img.l2Entry(off)
		if err != nil {
			t.Fatal(err)
		}
		if e&l2Compressed != 0 {
			n++
		}
	}
	return n
}

// TestZeroFlag writes data, then zeroes an allocated cluster with
// qemu-io "write -z", which in v3 sets the L2 zero flag.
func TestZeroFlag(t *testing.T) {
	qi := imagetest.Tool(t, "qemu-img")
	qio := imagetest.Tool(t, "qemu-io")
	dir := t.TempDir()
	p := filepath.Join(dir, "z.qcow2")
	imagetest.Run(t, qi, "create", "-f", "qcow2", p, "1M")
	imagetest.Run(t, qio, "-f", "qcow2", "-c", "write -P 0xab 0 192k", p)
	imagetest.Run(t, qio, "-f", "qcow2", "-c", "write -z 64k 64k", p)
	want := make([]byte, 1<<20)
	for i := range 192 << 10 {
		want[i] = 0xab
	}
	clear(want[64<<10 : 128<<10])
	img, err := openFile(t, p)
	if err != nil {
		t.Fatal(err)
	}
	l2, err := img.l2Entry(64 << 10)
	if err != nil {
		t.Fatal(err)
	}
	if l2&l2ZeroFlag == 0 {
		t.Fatalf("L2 entry %#x has no zero flag; the test does not exercise it", l2)
	}
	compare(t, img, want)
}

func TestBackingFileRefused(t *testing.T) {
	qi := imagetest.Tool(t, "qemu-img")
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	over := filepath.Join(dir, "over.qcow2")
	imagetest.Run(t, qi, "create", "-f", "qcow2", base, "1M")
	imagetest.Run(t, qi, "create", "-f", "qcow2", "-b", base, "-F", "qcow2", over)
	_, err := openFile(t, over)
	if err == nil || !strings.Contains(err.Error(), base) {
		t.Fatalf("Open(over) error = %v, want one naming %q", err, base)
	}
}

func TestZstdRefused(t *testing.T) {
	qi := imagetest.Tool(t, "qemu-img")
	p := filepath.Join(t.TempDir(), "zstd.qcow2")
	imagetest.Run(t, qi, "create", "-f", "qcow2", "-o", "compression_type=zstd", p, "1M")
	_, err := openFile(t, p)
	if err == nil || !strings.Contains(err.Error(), "zstd") {
		t.Fatalf("Open(zstd image) error = %v, want one about zstd", err)
	}
}

func TestNotQcow2Refused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "not.qcow2")
	if err := os.WriteFile(p, bytes.Repeat([]byte("not a disk image "), 100), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := openFile(t, p); !errors.Is(err, ErrNotQcow2) {
		t.Fatalf("Open(text file) error = %v, want ErrNotQcow2", err)
	}
	if _, err := Open(bytes.NewReader(nil), 0); !errors.Is(err, ErrNotQcow2) {
		t.Fatalf("Open(empty) error = %v, want ErrNotQcow2", err)
	}
}
