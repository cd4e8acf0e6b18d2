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
	"encoding/binary"
	"fmt"
	"sort"
	"time"
)

// The ISO 9660 writer below is the smallest one a NoCloud seed needs: one
// root directory of regular files, with Rock Ridge names (NM) so the
// guest sees "user-data", not the mangled "USER_DAT.;1" plain ISO 9660
// allows. Linux's isofs and cloud-init read it; a pure-Go writer keeps
// the provider free of genisoimage and works against a remote libvirtd,
// which gets the image uploaded as a volume.

const sector = 2048

// ISO returns an ISO 9660 image labelled volumeID holding files (name →
// contents) in its root directory.
func ISO(volumeID string, files map[string][]byte) ([]byte, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		if n == "" || len(n) > 200 {
			return nil, fmt.Errorf("file name %q: must be 1 to 200 bytes", n)
		}
		names = append(names, n)
	}
	sort.Strings(names)
	if len(volumeID) > 32 {
		return nil, fmt.Errorf("volume ID %q longer than 32 bytes", volumeID)
	}
	const (
		pvdLBA, termLBA, lPathLBA, mPathLBA, rootLBA = 16, 17, 18, 19, 20
	)
	// The root directory: ".", "..", then one record per file.
	stamp := recordingDate(time.Unix(0, 0).UTC())
	next := uint32(rootLBA + 1)
	type placed struct {
		name   string
		lba    uint32
		length uint32
	}
	var placedFiles []placed
	for _, n := range names {
		l := uint32(len(files[n]))
		placedFiles = append(placedFiles, placed{n, next, l})
		next += (l + sector - 1) / sector
		if l == 0 {
			next++ // an empty file still gets its own extent
		}
	}
	var root bytes.Buffer
	// "." carries SUSP's SP entry (so readers look for Rock Ridge) and
	// RRIP's ER entry, then the "." name.
	sp := []byte{'S', 'P', 7, 1, 0xBE, 0xEF, 0}
	er := susp("ER", append([]byte{10, 0, 0, 1}, []byte("RRIP_1991A")...))
	root.Write(dirRecord(rootLBA, sector, 2, []byte{0}, append(append(sp, er...), px(0o40555)...), stamp))
	root.Write(dirRecord(rootLBA, sector, 2, []byte{1}, px(0o40555), stamp))
	for _, f := range placedFiles {
		id := []byte(isoName(f.name))
		su := append(susp("NM", append([]byte{0}, []byte(f.name)...)), px(0o100444)...)
		rec := dirRecord(f.lba, f.length, 0, id, su, stamp)
		if root.Len()%sector+len(rec) > sector {
			return nil, fmt.Errorf("too many files for one directory sector")
		}
		root.Write(rec)
	}
	// 150 sectors of padding at the end, as genisoimage writes: readers
	// probe sectors past the volume descriptors (busybox's findfs reads 32,
	// and finds no label on a shorter image).
	total := next + 150
	img := make([]byte, int(total)*sector)
	copy(img[pvdLBA*sector:], pvd(volumeID, total, rootLBA, lPathLBA, mPathLBA, stamp))
	term := img[termLBA*sector:]
	term[0], term[6] = 255, 1
	copy(term[1:6], "CD001")
	copy(img[lPathLBA*sector:], pathTable(rootLBA, binary.LittleEndian))
	copy(img[mPathLBA*sector:], pathTable(rootLBA, binary.BigEndian))
	copy(img[rootLBA*sector:], root.Bytes())
	for _, f := range placedFiles {
		copy(img[int(f.lba)*sector:], files[f.name])
	}
	return img, nil
}

// isoName is the plain ISO 9660 identifier of a file (d-characters, 8.3,
// version 1), what readers without Rock Ridge see.
func isoName(name string) string {
	var b []byte
	for _, r := range []byte(name) {
		switch {
		case r >= 'a' && r <= 'z':
			b = append(b, r-'a'+'A')
		case r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
			b = append(b, r)
		default:
			b = append(b, '_')
		}
		if len(b) == 8 {
			break
		}
	}
	return string(b) + ".;1"
}

func susp(sig string, data []byte) []byte {
	return append([]byte{sig[0], sig[1], byte(4 + len(data)), 1}, data...)
}

// px is Rock Ridge's POSIX attributes entry: mode, links, uid, gid.
func px(mode uint32) []byte {
	data := make([]byte, 0, 32)
	for _, v := range []uint32{mode, 1, 0, 0} {
		data = append(data, both32(v)...)
	}
	return susp("PX", data)
}

func dirRecord(lba, length uint32, flags byte, id, systemUse []byte, stamp []byte) []byte {
	n := 33 + len(id)
	if n%2 == 1 {
		n++ // padding after an odd identifier
	}
	rec := make([]byte, n, n+len(systemUse)+1)
	copy(rec[2:10], both32(lba))
	copy(rec[10:18], both32(length))
	copy(rec[18:25], stamp)
	rec[25] = flags
	copy(rec[28:32], both16(1))
	rec[32] = byte(len(id))
	copy(rec[33:], id)
	rec = append(rec, systemUse...)
	if len(rec)%2 == 1 {
		rec = append(rec, 0)
	}
	rec[0] = byte(len(rec))
	return rec
}

func pvd(volumeID string, total, rootLBA, lPath, mPath uint32, stamp []byte) []byte {
	d := make([]byte, sector)
	d[0], d[6] = 1, 1
	copy(d[1:6], "CD001")
	copy(d[8:40], pad("", 32))
	copy(d[40:72], pad(volumeID, 32))
	copy(d[80:88], both32(total))
	copy(d[120:124], both16(1))
	copy(d[124:128], both16(1))
	copy(d[128:132], both16(sector))
	copy(d[132:140], both32(10)) // path table size: one 10-byte entry
	binary.LittleEndian.PutUint32(d[140:144], lPath)
	binary.BigEndian.PutUint32(d[148:152], mPath)
	copy(d[156:190], dirRecord(rootLBA, sector, 2, []byte{0}, nil, stamp))
	for _, r := range [][2]int{{190, 318}, {318, 446}, {446, 574}, {574, 702}, {702, 739}, {739, 776}, {776, 813}} {
		copy(d[r[0]:r[1]], pad("", r[1]-r[0]))
	}
	for _, off := range []int{813, 830, 847, 864} { // creation, modification, expiration, effective
		copy(d[off:off+16], "0000000000000000")
	}
	d[881] = 1 // file structure version
	return d
}

func pathTable(rootLBA uint32, order binary.ByteOrder) []byte {
	t := make([]byte, 10)
	t[0] = 1
	order.PutUint32(t[2:6], rootLBA)
	order.PutUint16(t[6:8], 1)
	return t
}

func recordingDate(t time.Time) []byte {
	return []byte{byte(t.Year() - 1900), byte(t.Month()), byte(t.Day()), byte(t.Hour()), byte(t.Minute()), byte(t.Second()), 0}
}

func pad(s string, n int) []byte {
	b := bytes.Repeat([]byte{' '}, n)
	copy(b, s)
	return b
}

func both16(v uint16) []byte {
	b := make([]byte, 4)
	binary.LittleEndian.PutUint16(b, v)
	binary.BigEndian.PutUint16(b[2:], v)
	return b
}

func both32(v uint32) []byte {
	b := make([]byte, 8)
	binary.LittleEndian.PutUint32(b, v)
	binary.BigEndian.PutUint32(b[4:], v)
	return b
}
