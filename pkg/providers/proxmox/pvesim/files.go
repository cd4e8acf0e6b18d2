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
package pvesim

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
)

// Internal keys of params an upload's file part sets: names no API
// parameter can have.
const (
	upPath    = "@upload.path"    // the file on disk
	upSize    = "@upload.size"    // its size in bytes
	upHash    = "@upload.hash"    // its checksum (hex) ...
	upHashAlg = "@upload.hashalg" // ... by this algorithm
	upClaimed = "@upload.claimed" // a task owns the file now
)

// readMultipart reads a multipart/form-data body part by part: fields
// into p, the file part streamed to a file of the simulator's directory
// (pveproxy's /var/tmp/pveupload-*), hashed on the way when the checksum
// algorithm came first (go-proxmox sends it first, as pveproxy wants).
func (s *Simulator) readMultipart(r *http.Request, p params) error {
	mr, err := r.MultipartReader()
	if err != nil {
		return err
	}
	for {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		name := part.FormName()
		if part.FileName() == "" {
			b, err := io.ReadAll(io.LimitReader(part, 64<<10))
			if err != nil {
				return err
			}
			p[name] = string(b)
			continue
		}
		if p[upPath] != "" {
			return errors.New("more than one file in the upload")
		}
		if err := s.receive(part, name, p); err != nil {
			return err
		}
	}
	if path, alg := p[upPath], p["checksum-algorithm"]; path != "" && p[upHash] == "" && newHash(alg) != nil {
		sum, err := fileHash(alg, path)
		if err != nil {
			return err
		}
		p[upHash], p[upHashAlg] = sum, alg
	}
	return nil
}

// receive streams a file part to disk.
func (s *Simulator) receive(part *multipart.Part, name string, p params) error {
	f, err := os.CreateTemp(s.files, "pveupload-")
	if err != nil {
		return err
	}
	p[upPath] = f.Name()
	var w io.Writer = f
	alg := p["checksum-algorithm"]
	h := newHash(alg)
	if h != nil {
		w = io.MultiWriter(f, h)
	}
	n, err := io.Copy(w, part)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	p[name] = part.FileName()
	p[upSize] = strconv.FormatInt(n, 10)
	if h != nil {
		p[upHash], p[upHashAlg] = hex.EncodeToString(h.Sum(nil)), alg
	}
	return nil
}

// dropUpload removes an upload's file no task took over.
func (p params) dropUpload() {
	if path := p[upPath]; path != "" && p[upClaimed] == "" {
		_ = os.Remove(path)
	}
}

// ChecksumAlgorithms are the values of checksum-algorithm (upload,
// download-url).
var ChecksumAlgorithms = []string{"md5", "sha1", "sha224", "sha256", "sha384", "sha512"}

func newHash(alg string) hash.Hash {
	switch alg {
	case "md5":
		return md5.New()
	case "sha1":
		return sha1.New()
	case "sha224":
		return sha256.New224()
	case "sha256":
		return sha256.New()
	case "sha384":
		return sha512.New384()
	case "sha512":
		return sha512.New()
	}
	return nil
}

func fileHash(alg, path string) (string, error) {
	h := newHash(alg)
	if h == nil {
		return "", fmt.Errorf("unknown checksum algorithm '%s'", alg)
	}
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// imageInfo is what qemu-img info tells PVE of an untrusted image file
// (file_size_info): its virtual size, read from the qcow2 header (bytes
// 24..31, big-endian) or the VMDK sparse extent header (capacity in
// sectors at 12..19, little-endian); a raw file's is its size. A file
// that is not of its format, or a qcow2 with a backing file, is refused
// with PVE's words.
func imageInfo(path, format string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	hdr := make([]byte, 64)
	n, _ := io.ReadFull(f, hdr)
	hdr = hdr[:n]
	switch format {
	case "qcow2":
		if len(hdr) < 32 || !bytes.HasPrefix(hdr, []byte("QFI\xfb")) {
			return 0, errors.New("failed to query file information with qemu-img")
		}
		if binary.BigEndian.Uint64(hdr[8:16]) != 0 {
			return 0, fmt.Errorf("backing file not allowed for untrusted image '%s'!", filepath.Base(path))
		}
		return int64(binary.BigEndian.Uint64(hdr[24:32])), nil
	case "vmdk":
		if len(hdr) < 20 || !bytes.HasPrefix(hdr, []byte("KDMV")) {
			return 0, errors.New("failed to query file information with qemu-img")
		}
		return int64(binary.LittleEndian.Uint64(hdr[12:20])) * 512, nil
	}
	return st.Size(), nil
}

// formatSize is qemu-server's format_size: a drive's size=, in the
// largest unit that divides it.
func formatSize(b int64) string {
	units := []string{"K", "M", "G", "T"}
	if b%1024 != 0 {
		return strconv.FormatInt(b, 10)
	}
	v, u := b/1024, 0
	for u < len(units)-1 && v%1024 == 0 {
		v /= 1024
		u++
	}
	return strconv.FormatInt(v, 10) + units[u]
}
