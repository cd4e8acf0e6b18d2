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

// Package vmdk writes VMware streamOptimized VMDK images strictly
// sequentially.
//
// banlieue streams a disk image into vCenter, whose NFC import takes a
// streamOptimized VMDK (monolithic sparse, deflate-compressed grains, as in
// an OVA) and not qcow2 or raw. The release image is the banlieue binary
// alone, with no qemu-img to convert with, and the conversion must happen
// while streaming, so the writer never seeks: grains go out as they are
// filled, and the grain tables, grain directory and footer follow at the
// end. govmomi's vmdk.StreamOptimizedWriter is not used because it seeks
// and writes 64-bit grain table entries.
//
// The layout follows VMware's "Virtual Disk Format 5.0" specification and
// is what qemu's block/vmdk.c reads: a sparse header with gdOffset
// GD_AT_END, the embedded descriptor, one grain marker plus zlib data per
// non-zero grain, a GT marker plus table per grain table that has any
// grain, the GD marker plus directory, the footer marker plus a copy of the
// header with the real gdOffset, and the end-of-stream marker.
package vmdk

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

const (
	sectorSize   = 512
	grainSectors = 128
	grainSize    = grainSectors * sectorSize // 64 KiB
	gtEntries    = 512
	gtSectors    = gtEntries * 4 / sectorSize // 4

	flagValidNewLineTest = 1 << 0
	flagCompressed       = 1 << 16
	flagMarkers          = 1 << 17

	gdAtEnd = 0xffffffffffffffff

	compressionDeflate = 1

	markerEOS    = 0
	markerGT     = 1
	markerGD     = 2
	markerFooter = 3

	// descriptorSectors is the space reserved for the embedded descriptor
	// and overheadSectors the sectors before the first grain, as in the
	// streamOptimized disks VMware's own tools write.
	descriptorSectors = 20
	overheadSectors   = grainSectors
)

// ErrCapacityExceeded is returned by Write when more bytes are written than
// the disk's capacity.
var ErrCapacityExceeded = errors.New("vmdk: write beyond disk capacity")

// Writer writes a streamOptimized VMDK to an io.Writer without seeking.
type Writer struct {
	w        io.Writer
	capacity int64 // sectors
	written  int64 // bytes of disk data accepted
	offset   int64 // bytes written to w
	grain    []byte
	n        int        // bytes buffered in grain
	index    int64      // index of the grain being buffered
	gts      [][]uint32 // grain tables, nil until a grain is allocated
	zbuf     bytes.Buffer
	zw       *zlib.Writer
	err      error
	closed   bool
}

// NewStreamOptimized writes the header and descriptor of a streamOptimized
// VMDK of capacity bytes (rounded up to 512) to w and returns a Writer for
// the disk's contents.
func NewStreamOptimized(w io.Writer, capacity int64) (*Writer, error) {
	if capacity <= 0 {
		return nil, fmt.Errorf("vmdk: capacity %d must be positive", capacity)
	}
	sectors := (capacity + sectorSize - 1) / sectorSize
	grains := (sectors + grainSectors - 1) / grainSectors
	// Grain directory entries are uint32 and the directory is written at
	// the end, so keep it well below what the format can address.
	if grains > 1<<31 {
		return nil, fmt.Errorf("vmdk: capacity %d too large", capacity)
	}
	zw, err := zlib.NewWriterLevel(nil, zlib.BestSpeed)
	if err != nil {
		return nil, err
	}
	vw := &Writer{
		w:        w,
		capacity: sectors,
		grain:    make([]byte, grainSize),
		gts:      make([][]uint32, (grains+gtEntries-1)/gtEntries),
		zw:       zw,
	}
	desc := vw.descriptor()
	if len(desc) > descriptorSectors*sectorSize {
		return nil, fmt.Errorf("vmdk: descriptor too large")
	}
	buf := make([]byte, overheadSectors*sectorSize)
	vw.header(buf[:sectorSize], gdAtEnd)
	copy(buf[sectorSize:], desc)
	if err := vw.emit(buf); err != nil {
		return nil, err
	}
	return vw, nil
}

// header fills b (512 bytes) with the sparse extent header.
func (vw *Writer) header(b []byte, gdOffset uint64) {
	le := binary.LittleEndian
	copy(b[0:4], "KDMV")
	le.PutUint32(b[4:], 3)
	le.PutUint32(b[8:], flagValidNewLineTest|flagCompressed|flagMarkers)
	le.PutUint64(b[12:], uint64(vw.capacity))
	le.PutUint64(b[20:], grainSectors)
	le.PutUint64(b[28:], 1) // descriptorOffset
	le.PutUint64(b[36:], descriptorSectors)
	le.PutUint32(b[44:], gtEntries)
	le.PutUint64(b[48:], 0) // rgdOffset
	le.PutUint64(b[56:], gdOffset)
	le.PutUint64(b[64:], overheadSectors)
	b[72] = 0 // uncleanShutdown
	copy(b[73:77], "\n \r\n")
	le.PutUint16(b[77:], compressionDeflate)
}

func (vw *Writer) descriptor() []byte {
	cylinders := vw.capacity / (255 * 63)
	if cylinders > 65535 {
		cylinders = 65535
	}
	if cylinders < 1 {
		cylinders = 1
	}
	return fmt.Appendf(nil, `# Disk DescriptorFile
version=1
CID=fffffffe
parentCID=ffffffff
createType="streamOptimized"

# Extent description
RW %d SPARSE "disk.vmdk"

# The Disk Data Base
#DDB

ddb.adapterType = "lsilogic"
ddb.geometry.cylinders = "%d"
ddb.geometry.heads = "255"
ddb.geometry.sectors = "63"
ddb.virtualHWVersion = "4"
`, vw.capacity, cylinders)
}

func (vw *Writer) emit(b []byte) error {
	if vw.err != nil {
		return vw.err
	}
	n, err := vw.w.Write(b)
	vw.offset += int64(n)
	if err == nil && n != len(b) {
		err = io.ErrShortWrite
	}
	if err != nil {
		vw.err = err
	}
	return err
}

// Write accepts the disk's bytes in order.
func (vw *Writer) Write(p []byte) (int, error) {
	if vw.closed {
		return 0, errors.New("vmdk: write after close")
	}
	if vw.err != nil {
		return 0, vw.err
	}
	total := 0
	for len(p) > 0 {
		if vw.written >= vw.capacity*sectorSize {
			return total, ErrCapacityExceeded
		}
		q := p
		if rem := vw.capacity*sectorSize - vw.written; int64(len(q)) > rem {
			q = q[:rem]
		}
		c := copy(vw.grain[vw.n:], q)
		vw.n += c
		vw.written += int64(c)
		total += c
		p = p[c:]
		if vw.n == grainSize {
			if err := vw.flushGrain(); err != nil {
				return total, err
			}
		}
	}
	return total, nil
}

// flushGrain writes the buffered grain (zero-padded) unless it is all zero.
func (vw *Writer) flushGrain() error {
	g := vw.grain[:vw.n]
	clear(vw.grain[vw.n:])
	idx := vw.index
	vw.index++
	vw.n = 0
	if isZero(g) {
		return nil
	}
	lba := idx * grainSectors
	vw.zbuf.Reset()
	var m [12]byte
	binary.LittleEndian.PutUint64(m[0:], uint64(lba))
	vw.zbuf.Write(m[:])
	vw.zw.Reset(&vw.zbuf)
	if _, err := vw.zw.Write(vw.grain); err != nil {
		return err
	}
	if err := vw.zw.Close(); err != nil {
		return err
	}
	b := vw.zbuf.Bytes()
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-12))
	if pad := len(b) % sectorSize; pad != 0 {
		vw.zbuf.Write(make([]byte, sectorSize-pad))
		b = vw.zbuf.Bytes()
	}
	sector := vw.offset / sectorSize
	if sector >= 1<<32 {
		vw.err = errors.New("vmdk: image exceeds 2 TiB of compressed data")
		return vw.err
	}
	t := vw.gts[idx/gtEntries]
	if t == nil {
		t = make([]uint32, gtEntries)
		vw.gts[idx/gtEntries] = t
	}
	t[idx%gtEntries] = uint32(sector)
	return vw.emit(b)
}

func isZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

func marker(val uint64, typ uint32) []byte {
	b := make([]byte, sectorSize)
	binary.LittleEndian.PutUint64(b[0:], val)
	binary.LittleEndian.PutUint32(b[12:], typ)
	return b
}

// Close writes the last grain, the grain tables, the grain directory, the
// footer and the end-of-stream marker. Bytes not written read as zero. It
// does not close the underlying writer.
func (vw *Writer) Close() error {
	if vw.closed {
		return vw.err
	}
	vw.closed = true
	if vw.err != nil {
		return vw.err
	}
	if vw.n > 0 {
		if err := vw.flushGrain(); err != nil {
			return err
		}
	}
	numGTs := len(vw.gts)
	gd := make([]uint32, numGTs)
	for i, table := range vw.gts {
		if table == nil {
			continue
		}
		if err := vw.emit(marker(gtSectors, markerGT)); err != nil {
			return err
		}
		gd[i] = uint32(vw.offset / sectorSize)
		if err := vw.emit(entries(table)); err != nil {
			return err
		}
	}
	gdSectors := (int64(numGTs)*4 + sectorSize - 1) / sectorSize
	if err := vw.emit(marker(uint64(gdSectors), markerGD)); err != nil {
		return err
	}
	gdOffset := vw.offset / sectorSize
	if gdOffset >= 1<<32 {
		vw.err = errors.New("vmdk: image exceeds 2 TiB of compressed data")
		return vw.err
	}
	b := entries(gd)
	b = append(b, make([]byte, gdSectors*sectorSize-int64(len(b)))...)
	if err := vw.emit(b); err != nil {
		return err
	}
	if err := vw.emit(marker(1, markerFooter)); err != nil {
		return err
	}
	footer := make([]byte, sectorSize)
	vw.header(footer, uint64(gdOffset))
	if err := vw.emit(footer); err != nil {
		return err
	}
	return vw.emit(marker(0, markerEOS))
}

func entries(t []uint32) []byte {
	b := make([]byte, 4*len(t))
	for i, e := range t {
		binary.LittleEndian.PutUint32(b[4*i:], e)
	}
	return b
}
