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

package vsphere

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/fetch"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers"
)

// testQCOW2 is a 4 MiB qcow2 image with some data, made by qemu-img.
func testQCOW2(t *testing.T) []byte {
	t.Helper()
	qemuImg := imagetest.Tool(t, "qemu-img")
	dir := t.TempDir()
	raw := filepath.Join(dir, "disk.raw")
	data := bytes.Repeat([]byte("banlieue"), 1<<16) // 512 KiB
	if err := os.WriteFile(raw, append(data, make([]byte, 4<<20-len(data))...), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "disk.qcow2")
	imagetest.Run(t, qemuImg, "convert", "-f", "raw", "-O", "qcow2", raw, out)
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// testOVA is an OVA of qcow2: the generated descriptor, then the disk as
// a streamOptimized VMDK.
func testOVA(t *testing.T, name string, qcow2 []byte) []byte {
	t.Helper()
	var disk bytes.Buffer
	if err := images.QCOW2ToStreamOptimized(bytes.NewReader(qcow2), int64(len(qcow2)), &disk); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	tw := tar.NewWriter(&out)
	for _, f := range []struct {
		name string
		data []byte
	}{{name + ".ovf", []byte(OneDiskOVF(name, name+"-disk1.vmdk", 4<<20))}, {name + "-disk1.vmdk", disk.Bytes()}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

// badSum is a body whose last read fails as a checksum mismatch does.
type badSum struct{ r io.Reader }

func (b badSum) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	if err == io.EOF {
		return n, &fetch.ChecksumError{Want: "sha256:00", Got: "sha256:11"}
	}
	return n, err
}

// importedNamed counts the VMs and templates named name in datacenter dc.
func importedNamed(t *testing.T, c *Client, dc, name string) (vms, templates int) {
	t.Helper()
	ctx := context.Background()
	f := find.NewFinder(c.gc.Client, false)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(d)
	list, err := f.VirtualMachineList(ctx, name)
	if err != nil {
		return 0, 0
	}
	for _, vm := range list {
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config.template"}, &m); err != nil {
			t.Fatal(err)
		}
		if m.Config.Template {
			templates++
		} else {
			vms++
		}
	}
	return vms, templates
}

// leftover makes a VM named name in datacenter dc, not a template: what
// an interrupted import leaves.
func leftover(t *testing.T, c *Client, dc, name string) {
	t.Helper()
	ctx := context.Background()
	l, err := c.locate(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	ds, err := l.datastore(ctx, "LocalDS_0")
	if err != nil {
		t.Fatal(err)
	}
	pool, err := l.importPool(ctx, ds)
	if err != nil {
		t.Fatal(err)
	}
	folder, err := l.folder(ctx, "")
	if err != nil {
		t.Fatal(err)
	}
	task, err := folder.CreateVM(ctx, types.VirtualMachineConfigSpec{Name: name, GuestId: "otherGuest64",
		Files: &types.VirtualMachineFileInfo{VmPathName: "[LocalDS_0]"}}, pool, nil)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	if vms, _ := importedNamed(t, c, dc, name); vms != 1 {
		t.Fatalf("%d VMs named %s after making one", vms, name)
	}
}

func scratchFiles(t *testing.T) int {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(os.TempDir(), scratchPattern))
	if err != nil {
		t.Fatal(err)
	}
	return len(m)
}

// TestImportImage imports a qcow2, a raw and an OVA image into each
// datacenter of vcsim, whose NFC lease takes the uploaded bytes and
// discards them (it keeps their SHA-1 and length only): the test keeps
// the disk uploaded itself, in front of vcsim, and qemu-img compares it
// with the source; what vCenter keeps is checked on vcsim: one template
// per datacenter, a leftover VM of the name replaced, and a checksum
// mismatch leaving neither VM nor scratch file.
func TestImportImage(t *testing.T) {
	// The lease is told the progress every millisecond: vcsim takes
	// HttpNfcLeaseProgress, so the keep-alive runs during the uploads.
	was := leaseKeepAlive
	leaseKeepAlive = time.Millisecond
	t.Cleanup(func() { leaseKeepAlive = was })
	s, conn := vcsim(t)
	// vcsim hashes what an NFC lease is sent and discards it: the test
	// keeps the last disk uploaded, to check it with qemu-img.
	var mu sync.Mutex
	var uploaded []byte
	next := s.Server.Config.Handler
	s.Server.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost && strings.HasPrefix(r.URL.Path, "/nfc/") {
			b, _ := io.ReadAll(r.Body)
			mu.Lock()
			uploaded = b
			mu.Unlock()
			r.Body = io.NopCloser(bytes.NewReader(b))
		}
		next.ServeHTTP(w, r)
	})
	c, err := Connect(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Logout(context.Background()) })
	ctx := context.Background()
	qemuImg := imagetest.Tool(t, "qemu-img")
	dir := t.TempDir()
	qcow2 := testQCOW2(t)
	raw := append(bytes.Repeat([]byte("raw!"), 1<<18), make([]byte, 3<<20)...)
	for f, b := range map[string][]byte{"src.qcow2": qcow2, "src.raw": raw} {
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		format v1alpha1.ImageFormat
		data   []byte
		disk   string // the source of the disk, to compare the upload with
	}{
		{v1alpha1.ImageFormatQCOW2, qcow2, "src.qcow2"},
		{v1alpha1.ImageFormatRaw, raw, "src.raw"},
		{v1alpha1.ImageFormatOVA, testOVA(t, "appliance", qcow2), "src.qcow2"},
	} {
		t.Run(string(tc.format), func(t *testing.T) {
			target := providers.ImageTarget{Name: "banlieue-img-test-" + string(tc.format), Format: tc.format, Size: int64(len(tc.data)), Storage: "LocalDS_0"}
			scratch := scratchFiles(t)
			for _, dc := range []string{"DC0", "DC1"} {
				loc := failuredomain.Location{Datacenter: dc}
				if dc == "DC0" {
					leftover(t, c, dc, target.Name)
				}
				// A leftover VM of the name, not a template, goes first.
				if dc == "DC1" {
					_, err := c.ImportImage(ctx, loc, target, badSum{bytes.NewReader(tc.data)})
					var ce *fetch.ChecksumError
					if !errors.As(err, &ce) {
						t.Fatalf("import with a bad checksum: %v, want a checksum error", err)
					}
					if vms, tmpls := importedNamed(t, c, dc, target.Name); vms+tmpls != 0 {
						t.Fatalf("a failed import left %d VMs and %d templates", vms, tmpls)
					}
				}
				ref, err := c.ImportImage(ctx, loc, target, bytes.NewReader(tc.data))
				if err != nil {
					t.Fatal(err)
				}
				if ref != target.Name {
					t.Errorf("ref %q, want %q", ref, target.Name)
				}
				if _, found, err := c.ImportedImage(ctx, loc, target); err != nil || !found {
					t.Errorf("ImportedImage: %v %v", found, err)
				}
				if vms, tmpls := importedNamed(t, c, dc, target.Name); vms != 0 || tmpls != 1 {
					t.Errorf("%s: %d VMs and %d templates named %s, want one template", dc, vms, tmpls, target.Name)
				}
				// The disk that went through the lease is the image's.
				mu.Lock()
				err = os.WriteFile(filepath.Join(dir, "uploaded.vmdk"), uploaded, 0o600)
				mu.Unlock()
				if err != nil {
					t.Fatal(err)
				}
				imagetest.Run(t, qemuImg, "compare", "-f", "vmdk", "-F", map[bool]string{true: "raw", false: "qcow2"}[tc.disk == "src.raw"],
					filepath.Join(dir, "uploaded.vmdk"), filepath.Join(dir, tc.disk))
			}
			if n := scratchFiles(t); n != scratch {
				t.Errorf("%d scratch files, %d before", n, scratch)
			}
			loc := failuredomain.Location{Datacenter: "DC0"}
			if err := c.DeleteImportedImage(ctx, loc, target); err != nil {
				t.Fatal(err)
			}
			if _, found, err := c.ImportedImage(ctx, loc, target); err != nil || found {
				t.Errorf("after delete: %v %v", found, err)
			}
		})
	}
	// Bytes of another format build nothing.
	_, err = c.ImportImage(ctx, failuredomain.Location{Datacenter: "DC0"},
		providers.ImageTarget{Name: "banlieue-img-test-mismatch", Format: v1alpha1.ImageFormatOVA, Size: int64(len(qcow2)), Storage: "LocalDS_0"}, bytes.NewReader(qcow2))
	if !errors.Is(err, providers.ErrFormatMismatch) {
		t.Errorf("a qcow2 imported as ova: %v", err)
	}
}
