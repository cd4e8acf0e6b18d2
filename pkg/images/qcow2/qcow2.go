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

// Package qcow2 reads qcow2 images (versions 2 and 3) as the virtual disk
// they describe, through an io.ReaderAt.
//
// It exists because banlieue converts a qcow2 cloud image while streaming it,
// in Go, for backends that cannot take qcow2 (for example vSphere, which wants
// a streamOptimized VMDK). The release image holds the banlieue binary alone,
// with no qemu-img, so the conversion cannot shell out.
//
// Only self-contained images are supported: a backing file, encryption, an
// external data file, extended L2 entries and zstd compression are refused
// at Open with an error that says which. The format is described in
// https://gitlab.com/qemu-project/qemu/-/blob/master/docs/interop/qcow2.txt.
package qcow2

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sync"
)

const (
	magic = 0x514649fb // "QFI\xfb"

	headerV2Len = 72
	headerV3Len = 104

	// Incompatible feature bits (version 3).
	incompatDirty       = 1 << 0
	incompatCorrupt     = 1 << 1
	incompatDataFile    = 1 << 2
	incompatCompression = 1 << 3
	incompatExtendedL2  = 1 << 4

	// L1 and L2 entry fields.
	offsetMask     = 0x00fffffffffffe00 // bits 9-55
	l2Compressed   = 1 << 62
	l2ZeroFlag     = 1 << 0
	maxL1Bytes     = 32 << 20 // QEMU's QCOW_MAX_L1_SIZE
	maxBackingName = 1023
	cacheBytes     = 8 << 20 // bound on the L2 table cache
)

// ErrNotQcow2 is returned by Open when the image does not start with the
// qcow2 magic.
var ErrNotQcow2 = errors.New("qcow2: not a qcow2 image (bad magic)")

// Image is an open qcow2 image. Its ReadAt returns the guest-visible bytes
// and is safe for concurrent use.
type Image struct {
	r           io.ReaderAt
	size        int64 // host file size
	version     uint32
	clusterBits uint32
	clusterSize int64
	l2Bits      uint32 // log2 of entries per L2 table
	virtualSize int64
	l1          []uint64

	mu       sync.Mutex
	l2Cache  map[uint64][]uint64 // by host offset of the L2 table
	l2Max    int
	zcluster uint64 // L2 entry of the cluster held in zbuf, 0 if none
	zbuf     []byte
}

// Open parses the qcow2 header and L1 table of the image held in r, whose
// host size is size bytes.
func Open(r io.ReaderAt, size int64) (*Image, error) {
	if size < 4 {
		return nil, ErrNotQcow2
	}
	hdr := make([]byte, 112)
	n, err := r.ReadAt(hdr[:min(int64(len(hdr)), size)], 0)
	if n < 4 {
		if err == nil {
			err = io.ErrUnexpectedEOF
		}
		return nil, fmt.Errorf("qcow2: reading header: %w", err)
	}
	hdr = hdr[:n]
	be := binary.BigEndian
	if be.Uint32(hdr[0:]) != magic {
		return nil, ErrNotQcow2
	}
	if len(hdr) < headerV2Len {
		return nil, fmt.Errorf("qcow2: header truncated (%d bytes)", len(hdr))
	}
	img := &Image{r: r, size: size, version: be.Uint32(hdr[4:])}
	if img.version != 2 && img.version != 3 {
		return nil, fmt.Errorf("qcow2: unsupported version %d", img.version)
	}
	if off := be.Uint64(hdr[8:]); off != 0 {
		nameLen := be.Uint32(hdr[16:])
		name := "(unreadable)"
		if nameLen <= maxBackingName && int64(off) > 0 && int64(off)+int64(nameLen) <= size {
			b := make([]byte, nameLen)
			if _, err := r.ReadAt(b, int64(off)); err == nil {
				name = string(b)
			}
		}
		return nil, fmt.Errorf("qcow2: image has backing file %q; only self-contained images are supported", name)
	}
	img.clusterBits = be.Uint32(hdr[20:])
	if img.clusterBits < 9 || img.clusterBits > 21 {
		return nil, fmt.Errorf("qcow2: unsupported cluster_bits %d", img.clusterBits)
	}
	img.clusterSize = 1 << img.clusterBits
	img.l2Bits = img.clusterBits - 3
	vs := be.Uint64(hdr[24:])
	if vs > 1<<62 {
		return nil, fmt.Errorf("qcow2: virtual size %d too large", vs)
	}
	img.virtualSize = int64(vs)
	if cm := be.Uint32(hdr[32:]); cm != 0 {
		return nil, fmt.Errorf("qcow2: encrypted images are not supported (crypt_method %d)", cm)
	}
	l1Size := be.Uint32(hdr[36:])
	l1Off := be.Uint64(hdr[40:])

	if img.version == 3 {
		if len(hdr) < headerV3Len {
			return nil, fmt.Errorf("qcow2: version 3 header truncated (%d bytes)", len(hdr))
		}
		incompat := be.Uint64(hdr[72:])
		switch {
		case incompat&incompatCorrupt != 0:
			return nil, errors.New("qcow2: image is marked corrupt")
		case incompat&incompatDataFile != 0:
			return nil, errors.New("qcow2: images with an external data file are not supported")
		case incompat&incompatExtendedL2 != 0:
			return nil, errors.New("qcow2: images with extended L2 entries (subclusters) are not supported")
		case incompat&^(incompatDirty|incompatCompression) != 0:
			return nil, fmt.Errorf("qcow2: unknown incompatible features %#x", incompat&^(incompatDirty|incompatCompression))
		}
		hdrLen := be.Uint32(hdr[100:])
		compType := byte(0)
		if hdrLen >= 105 {
			if len(hdr) < 105 {
				return nil, errors.New("qcow2: header truncated before compression_type")
			}
			compType = hdr[104]
		} else if incompat&incompatCompression != 0 {
			return nil, errors.New("qcow2: compression type feature set but header has no compression_type field")
		}
		switch compType {
		case 0:
		case 1:
			return nil, errors.New("qcow2: zstd-compressed images are not supported; recompress with compression_type=zlib")
		default:
			return nil, fmt.Errorf("qcow2: unknown compression_type %d", compType)
		}
	}

	// The L1 table must cover the whole virtual size.
	l2Span := uint64(1) << (img.clusterBits + img.l2Bits)
	need := (vs + l2Span - 1) / l2Span
	if uint64(l1Size) < need {
		return nil, fmt.Errorf("qcow2: l1_size %d too small for virtual size %d (needs %d)", l1Size, vs, need)
	}
	if uint64(l1Size)*8 > maxL1Bytes {
		return nil, fmt.Errorf("qcow2: l1_size %d too large", l1Size)
	}
	if need > 0 {
		if l1Off%uint64(img.clusterSize) != 0 || l1Off == 0 || l1Off > uint64(size) || need*8 > uint64(size)-l1Off {
			return nil, fmt.Errorf("qcow2: l1_table_offset %#x invalid for a %d-byte image", l1Off, size)
		}
		// Entries beyond the virtual size are never used; read only those needed.
		b := make([]byte, need*8)
		if _, err := r.ReadAt(b, int64(l1Off)); err != nil {
			return nil, fmt.Errorf("qcow2: reading L1 table: %w", err)
		}
		img.l1 = make([]uint64, need)
		for i := range img.l1 {
			img.l1[i] = be.Uint64(b[i*8:])
		}
	}
	img.l2Max = max(1, int(cacheBytes/img.clusterSize))
	img.l2Cache = make(map[uint64][]uint64)
	return img, nil
}

// VirtualSize returns the size in bytes of the guest-visible disk.
func (img *Image) VirtualSize() int64 { return img.virtualSize }

// ReadAt reads guest-visible bytes of the virtual disk. Unallocated and
// zero clusters read as zeros. Reading past the virtual size returns io.EOF.
func (img *Image) ReadAt(p []byte, off int64) (int, error) {
	if off < 0 {
		return 0, errors.New("qcow2: negative offset")
	}
	if off >= img.virtualSize {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	var eof error
	if rem := img.virtualSize - off; int64(len(p)) > rem {
		p, eof = p[:rem], io.EOF
	}
	n := 0
	for n < len(p) {
		pos := off + int64(n)
		inCluster := pos & (img.clusterSize - 1)
		chunk := p[n:min(len(p), n+int(img.clusterSize-inCluster))]
		if err := img.readCluster(chunk, pos, inCluster); err != nil {
			return n, err
		}
		n += len(chunk)
	}
	return n, eof
}

// readCluster fills p, which lies within one cluster, from guest offset pos.
func (img *Image) readCluster(p []byte, pos, inCluster int64) error {
	entry, err := img.l2Entry(pos)
	if err != nil {
		return err
	}
	if entry&l2Compressed != 0 {
		data, err := img.compressedCluster(entry)
		if err != nil {
			return err
		}
		copy(p, data[inCluster:])
		return nil
	}
	host := entry & offsetMask
	if (img.version >= 3 && entry&l2ZeroFlag != 0) || host == 0 {
		clear(p)
		return nil
	}
	if host%uint64(img.clusterSize) != 0 {
		return fmt.Errorf("qcow2: corrupt L2 entry %#x: host offset not cluster-aligned", entry)
	}
	if host >= uint64(img.size) {
		return fmt.Errorf("qcow2: corrupt L2 entry %#x: host offset beyond end of image", entry)
	}
	at := int64(host) + inCluster
	// The image file may end inside its last data cluster; the rest reads as zeros.
	avail := min(int64(len(p)), max(0, img.size-at))
	if avail > 0 {
		if _, err := img.r.ReadAt(p[:avail], at); err != nil && !(err == io.EOF && avail == int64(len(p))) {
			return fmt.Errorf("qcow2: reading data cluster at %#x: %w", host, err)
		}
	}
	clear(p[avail:])
	return nil
}

// l2Entry returns the L2 entry mapping the cluster holding guest offset pos,
// or 0 if its L2 table is unallocated.
func (img *Image) l2Entry(pos int64) (uint64, error) {
	cluster := uint64(pos) >> img.clusterBits
	l1Index := cluster >> img.l2Bits
	l2Index := cluster & (1<<img.l2Bits - 1)
	l2Off := img.l1[l1Index] & offsetMask
	if l2Off == 0 {
		return 0, nil
	}
	img.mu.Lock()
	table, ok := img.l2Cache[l2Off]
	img.mu.Unlock()
	if !ok {
		if l2Off%uint64(img.clusterSize) != 0 || img.size < img.clusterSize || l2Off > uint64(img.size-img.clusterSize) {
			return 0, fmt.Errorf("qcow2: corrupt L1 entry %#x: bad L2 table offset", img.l1[l1Index])
		}
		b := make([]byte, img.clusterSize)
		if _, err := img.r.ReadAt(b, int64(l2Off)); err != nil {
			return 0, fmt.Errorf("qcow2: reading L2 table at %#x: %w", l2Off, err)
		}
		table = make([]uint64, len(b)/8)
		for i := range table {
			table[i] = binary.BigEndian.Uint64(b[i*8:])
		}
		img.mu.Lock()
		if len(img.l2Cache) >= img.l2Max {
			for k := range img.l2Cache { // evict an arbitrary table
				delete(img.l2Cache, k)
				break
			}
		}
		img.l2Cache[l2Off] = table
		img.mu.Unlock()
	}
	return table[l2Index], nil
}

// compressedCluster returns the decompressed contents of the compressed
// cluster described by L2 entry. The result must not be modified.
func (img *Image) compressedCluster(entry uint64) ([]byte, error) {
	img.mu.Lock()
	if img.zcluster == entry && img.zbuf != nil {
		buf := img.zbuf
		img.mu.Unlock()
		return buf, nil
	}
	img.mu.Unlock()

	x := 62 - (img.clusterBits - 8)
	desc := entry &^ (3 << 62)
	host := desc & (1<<x - 1)
	sectors := desc >> x // additional 512-byte sectors after the first
	end := (host &^ 511) + (sectors+1)*512
	if host >= uint64(img.size) {
		return nil, fmt.Errorf("qcow2: corrupt compressed L2 entry %#x: offset beyond end of image", entry)
	}
	end = min(end, uint64(img.size)) // the last compressed cluster may end the file early
	comp := make([]byte, end-host)
	if _, err := img.r.ReadAt(comp, int64(host)); err != nil && err != io.EOF {
		return nil, fmt.Errorf("qcow2: reading compressed cluster at %#x: %w", host, err)
	}
	buf := make([]byte, img.clusterSize)
	if _, err := io.ReadFull(flate.NewReader(bytes.NewReader(comp)), buf); err != nil {
		return nil, fmt.Errorf("qcow2: decompressing cluster at %#x: %w", host, err)
	}
	img.mu.Lock()
	img.zcluster, img.zbuf = entry, buf
	img.mu.Unlock()
	return buf, nil
}
