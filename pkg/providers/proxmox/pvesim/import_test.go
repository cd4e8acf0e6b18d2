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
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// startImport is a simulator of a PVE release with import content (8.4:
// disk images too), "local" a directory storage holding iso, import and
// images, "local-lvm" thin LVM, "nfs" a directory storage without import.
func startImport(t *testing.T, version string) (*Simulator, *proxmox.Client) {
	t.Helper()
	s := New(Options{Version: version, TaskDelay: 20 * time.Millisecond, AgentDelay: 20 * time.Millisecond, Nodes: []NodeSpec{{
		Name: "pve1", Bridges: []string{"vmbr0"}, Storages: []StorageSpec{
			{Name: "local", Type: "dir", Content: []string{"iso", "vztmpl", "import", "images"}},
			{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}},
			{Name: "nfs", Type: "nfs", Content: []string{"iso"}},
		}}}})
	t.Cleanup(s.Close)
	return s, proxmox.NewClient(s.URL, proxmox.WithHTTPClient(s.Client()), proxmox.WithAPIToken(s.TokenID, s.Secret))
}

// leftFiles are the regular files in the simulator's directory.
func leftFiles(t *testing.T, s *Simulator) []string {
	t.Helper()
	var out []string
	_ = filepath.WalkDir(s.files, func(path string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			out = append(out, strings.TrimPrefix(path, s.files))
		}
		return nil
	})
	return out
}

// pattern is a deterministic stream of n bytes, made as it is read.
type pattern struct{ n, off int64 }

func (p *pattern) Read(b []byte) (int, error) {
	if p.off >= p.n {
		return 0, io.EOF
	}
	if int64(len(b)) > p.n-p.off {
		b = b[:p.n-p.off]
	}
	for i := range b {
		b[i] = byte((p.off + int64(i)) * 2654435761 >> 13)
	}
	p.off += int64(len(b))
	return len(b), nil
}

func qcow2Header(virtual int64) []byte {
	h := make([]byte, 512)
	copy(h, "QFI\xfb")
	binary.BigEndian.PutUint32(h[4:], 3)
	binary.BigEndian.PutUint64(h[24:], uint64(virtual))
	return h
}

func sha(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func uploadBytes(t *testing.T, c *proxmox.Client, content, name string, data []byte, fields map[string]string) (*proxmox.Task, error) {
	t.Helper()
	all := map[string]string{"content": content}
	for k, v := range fields {
		all[k] = v
	}
	var upid proxmox.UPID
	if err := c.UploadReader("/nodes/pve1/storage/local/upload", all, name, bytes.NewReader(data), int64(len(data)), &upid); err != nil {
		return nil, err
	}
	return proxmox.NewTask(upid, c), nil
}

func contentOf(t *testing.T, c *proxmox.Client, storage string) map[string]*proxmox.StorageContent {
	t.Helper()
	st, err := c.NodeRef("pve1").Storage(context.Background(), storage)
	if err != nil {
		t.Fatal(err)
	}
	list, err := st.GetContent(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*proxmox.StorageContent{}
	for _, e := range list {
		out[e.Volid] = e
	}
	return out
}

// TestUploadStreams: a 256 MiB import upload, streamed from an io.Reader
// with its sha256, goes to disk, not to memory: the heap in use never
// grows by more than 32 MiB while it runs; the volume is listed with its
// size and format.
func TestUploadStreams(t *testing.T) {
	if testing.Short() {
		t.Skip("256 MiB upload")
	}
	s, c := startImport(t, "8.4.1")
	const size = 256 << 20
	h := sha256.New()
	if _, err := io.Copy(h, &pattern{n: size}); err != nil {
		t.Fatal(err)
	}
	sum := hex.EncodeToString(h.Sum(nil))

	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapInuse
	var peak uint64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapInuse > peak {
				peak = m.HeapInuse
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	var upid proxmox.UPID
	err := c.UploadReader("/nodes/pve1/storage/local/upload", map[string]string{"content": "import", "checksum-algorithm": "sha256", "checksum": sum},
		"big.raw", &pattern{n: size}, size, &upid)
	if err == nil {
		err = wait(t, proxmox.NewTask(upid, c))
	}
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	grew := int64(peak) - int64(base)
	t.Logf("heap in use: %d MiB before, peak %d MiB during the upload (+%.1f MiB)", base>>20, peak>>20, float64(grew)/(1<<20))
	if grew > 32<<20 {
		t.Errorf("a 256 MiB upload grew the heap in use by %d MiB", grew>>20)
	}
	if !strings.HasPrefix(string(upid), "UPID:pve1:") || !strings.Contains(string(upid), ":imgcopy::") {
		t.Errorf("UPID %s, want an imgcopy task without ID", upid)
	}
	e := contentOf(t, c, "local")["local:import/big.raw"]
	if e == nil || e.Size != size || e.Format != "raw" {
		t.Fatalf("content entry %+v", e)
	}
	if files := leftFiles(t, s); len(files) != 1 || !strings.HasSuffix(files[0], "import/big.raw") {
		t.Errorf("files on disk %v, want the volume alone", files)
	}
	fi, err := os.Stat(s.nodes["pve1"].storages["local"].paths["import/big.raw"])
	if err != nil || fi.Size() != size {
		t.Errorf("the volume's file: %v, %v", fi, err)
	}
}

// TestUploadRules: what upload takes by content type and release, the
// checksum (a mismatch fails the task and leaves no file), the ISO case.
func TestUploadRules(t *testing.T) {
	ctx := context.Background()
	s, c := startImport(t, "8.4.1")
	st, err := c.NodeRef("pve1").Storage(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	img := append(qcow2Header(1<<30), make([]byte, 4096)...)
	path := filepath.Join(t.TempDir(), "upload.qcow2")
	if err := os.WriteFile(path, img, 0o644); err != nil {
		t.Fatal(err)
	}
	name := "disk.qcow2"
	wrong := strings.Repeat("0", 64)
	task, err := st.UploadWithHash("import", path, &name, wrong, "sha256")
	if err != nil {
		t.Fatal(err)
	}
	var failed *proxmox.TaskFailedError
	if err := wait(t, task); !errors.As(err, &failed) || failed.ExitStatus != fmt.Sprintf("checksum mismatch: got '%s' != expect '%s'", sha(img), wrong) {
		t.Errorf("a wrong checksum: %v", err)
	}
	if files := leftFiles(t, s); len(files) != 0 {
		t.Errorf("files left after the mismatch: %v", files)
	}
	if _, ok := contentOf(t, c, "local")["local:import/disk.qcow2"]; ok {
		t.Error("the mismatched upload is listed")
	}
	if task, err = st.UploadWithHash("import", path, &name, strings.ToUpper(sha(img)), "sha256"); err != nil || wait(t, task) != nil {
		t.Fatalf("the right checksum: %v", err)
	}
	if e := contentOf(t, c, "local")["local:import/disk.qcow2"]; e == nil || e.Format != "qcow2" || e.Size != uint64(len(img)) {
		t.Errorf("content entry %+v", e)
	}

	// The seed ISO case, as the provider uploads it.
	task, err = uploadBytes(t, c, "iso", "seed.iso", []byte("iso9660"), nil)
	if err != nil || wait(t, task) != nil {
		t.Fatalf("an ISO: %v", err)
	}
	if e := contentOf(t, c, "local")["local:iso/seed.iso"]; e == nil || e.Format != "iso" || e.Size != 7 {
		t.Errorf("ISO entry %+v", e)
	}
	// Not a qcow2 after all: the task refuses it.
	task, err = uploadBytes(t, c, "import", "fake.qcow2", []byte("not an image"), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, task); !errors.As(err, &failed) || !strings.Contains(failed.ExitStatus, "failed to query file information with qemu-img") {
		t.Errorf("a fake qcow2: %v", err)
	}

	for _, e := range []struct {
		version, content, name, storage string
		fields                          map[string]string
		want                            string
	}{
		{"8.2.4", "import", "disk.qcow2", "local", nil, "does not have a value in the enumeration 'iso, vztmpl'"},
		{"8.3.2", "import", "disk.qcow2", "local", nil, "invalid filename or wrong extension"},
		{"8.3.2", "import", "appliance.ova", "nfs", nil, "storage 'nfs' does not support 'import' content"},
		{"8.4.1", "import", "disk.img", "local", nil, "invalid filename or wrong extension"},
		{"8.4.1", "import", "disk.QCOW2", "local", nil, "invalid filename or wrong extension"},
		{"8.4.1", "iso", "seed.txt", "local", nil, "wrong file extension"},
		{"8.4.1", "snippets", "user.yaml", "local", nil, "does not have a value in the enumeration 'iso, vztmpl, import'"},
		{"8.4.1", "import", "disk.raw", "local", map[string]string{"checksum": "00"}, "missing property required by 'checksum'"},
		{"8.4.1", "import", "disk.raw", "local", map[string]string{"checksum": "00", "checksum-algorithm": "crc32"}, "enumeration 'md5, sha1, sha224, sha256, sha384, sha512'"},
		{"8.4.1", "iso", "seed.iso", "local-lvm", nil, "can't upload to storage type 'lvmthin'"},
	} {
		vs, vc := startImport(t, e.version)
		all := map[string]string{"content": e.content}
		for k, v := range e.fields {
			all[k] = v
		}
		var upid proxmox.UPID
		err := vc.UploadReader("/nodes/pve1/storage/"+e.storage+"/upload", all, e.name, strings.NewReader("data"), 4, &upid)
		if err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("PVE %s, %s %s on %s: %v, want %q", e.version, e.content, e.name, e.storage, err, e.want)
		}
		if files := leftFiles(t, vs); len(files) != 0 {
			t.Errorf("a refused upload left %v", files)
		}
	}

	// Deleting the volume removes its file.
	var upid string
	if err := c.Delete(ctx, "/nodes/pve1/storage/local/content/local:import/disk.qcow2", &upid); err != nil || wait(t, proxmox.NewTask(proxmox.UPID(upid), c)) != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, f := range leftFiles(t, s) {
		if strings.HasSuffix(f, "disk.qcow2") {
			t.Errorf("the deleted volume's file stays: %s", f)
		}
	}
}

// TestDownloadURL: download-url fetches into the storage (a "download"
// task named after the file); a failed fetch, a mismatch or an existing
// file fail the task and leave nothing; Sys.Modify or Sys.AccessNetwork
// is needed besides Datastore.AllocateTemplate.
func TestDownloadURL(t *testing.T) {
	ctx := context.Background()
	s, c := startImport(t, "9.0.3")
	img := append(qcow2Header(2<<30), make([]byte, 1<<20)...)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/noble.qcow2" {
			http.NotFound(w, r)
			return
		}
		_, _ = w.Write(img)
	}))
	defer srv.Close()
	st, err := c.NodeRef("pve1").Storage(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	var failed *proxmox.TaskFailedError
	task, err := st.DownloadURLWithHash(ctx, "import", "noble.qcow2", srv.URL+"/noble.qcow2", strings.Repeat("ab", 32), "sha256")
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, task); !errors.As(err, &failed) || !strings.HasPrefix(failed.ExitStatus, "checksum mismatch: got '"+sha(img)+"'") {
		t.Errorf("a wrong checksum: %v", err)
	}
	if !strings.Contains(string(task.UPID), ":download:noble.qcow2:") {
		t.Errorf("UPID %s", task.UPID)
	}
	task, err = st.DownloadURL(ctx, "import", "missing.qcow2", srv.URL+"/missing.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, task); !errors.As(err, &failed) || !strings.HasPrefix(failed.ExitStatus, "download failed: command 'wget") || !strings.HasSuffix(failed.ExitStatus, "failed: exit code 8") {
		t.Errorf("a 404: %v", err)
	}
	if files := leftFiles(t, s); len(files) != 0 || len(contentOf(t, c, "local")) != 0 {
		t.Errorf("failed downloads left %v", files)
	}
	if task, err = st.DownloadURLWithHash(ctx, "import", "noble.qcow2", srv.URL+"/noble.qcow2", sha(img), "sha256"); err != nil || wait(t, task) != nil {
		t.Fatalf("download: %v, %v", err, wait(t, task))
	}
	if e := contentOf(t, c, "local")["local:import/noble.qcow2"]; e == nil || e.Size != uint64(len(img)) || e.Format != "qcow2" {
		t.Errorf("content entry %+v", e)
	}
	task, err = st.DownloadURL(ctx, "import", "noble.qcow2", srv.URL+"/noble.qcow2")
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, task); !errors.As(err, &failed) || failed.ExitStatus != "refusing to override existing file '/var/lib/vz/import/noble.qcow2'" {
		t.Errorf("an existing file: %v", err)
	}
	if task, err = st.DownloadURLWithHash(ctx, "import", "noble.qcow2", srv.URL+"/noble.qcow2", sha(img), "sha256"); err != nil || wait(t, task) != nil {
		t.Errorf("the same file again, with its checksum: %v", err)
	}

	for _, e := range []struct {
		data map[string]string
		want string
	}{
		{map[string]string{"content": "import", "filename": "x.qcow2", "url": "ftp://host/x"}, "value does not match the regex pattern"},
		{map[string]string{"content": "iso", "filename": "x.qcow2", "url": srv.URL}, "wrong file extension"},
		{map[string]string{"content": "vztmpl", "filename": "x.tar.zst", "url": srv.URL}, "storage 'local' is not configured for content-type 'vztmpl'"},
		{map[string]string{"content": "import", "filename": "x.qcow2"}, "property is missing and it is not optional"},
	} {
		var upid string
		if err := c.Post(ctx, "/nodes/pve1/storage/nfs/download-url", e.data, &upid); e.data["content"] == "vztmpl" {
			err = c.Post(ctx, "/nodes/pve1/storage/nfs/download-url", map[string]string{"content": "iso", "filename": "x.iso", "url": srv.URL + "/x.iso"}, &upid)
			if err != nil {
				t.Errorf("an ISO onto nfs: %v", err)
			}
		} else if err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("download-url %v: %v, want %q", e.data, err, e.want)
		}
	}
	var upid string
	if err := c.Post(ctx, "/nodes/pve1/storage/local/download-url", map[string]string{"content": "vztmpl", "filename": "x.tar.zst", "url": srv.URL}, &upid); err != nil {
		t.Errorf("vztmpl onto local: %v", err)
	}

	grant := []ACL{{Path: "/storage/local", Privileges: []string{"Datastore.AllocateTemplate", "Datastore.Audit"}}}
	s.SetACL(grant)
	data := map[string]string{"content": "import", "filename": "other.qcow2", "url": srv.URL + "/noble.qcow2"}
	if err := c.Post(ctx, "/nodes/pve1/storage/local/download-url", data, &upid); err == nil || !strings.Contains(err.Error(), "403") || !strings.HasSuffix(strings.TrimSpace(err.Error()), "Permission check failed") {
		t.Errorf("without Sys.Modify or Sys.AccessNetwork: %v", err)
	}
	s.SetACL(append(grant, ACL{Path: "/nodes/pve1", Privileges: []string{"Sys.AccessNetwork"}}))
	if err := c.Post(ctx, "/nodes/pve1/storage/local/download-url", data, &upid); err != nil {
		t.Errorf("with Sys.AccessNetwork on the node: %v", err)
	}
	s.SetACL([]ACL{{Path: "/", Privileges: []string{"Sys.Audit", "Sys.Modify"}}})
	if err := c.Post(ctx, "/nodes/pve1/storage/local/download-url", data, &upid); err == nil || !strings.Contains(err.Error(), "(/storage/local, Datastore.AllocateTemplate)") {
		t.Errorf("without Datastore.AllocateTemplate: %v", err)
	}
}

func opts(kv ...string) []proxmox.VirtualMachineOption {
	var out []proxmox.VirtualMachineOption
	for i := 0; i < len(kv); i += 2 {
		out = append(out, proxmox.VirtualMachineOption{Name: kv[i], Value: kv[i+1]})
	}
	return out
}

// TestImportTemplateClone: a qcow2 uploaded to import content, a VM
// created from it (import-from: the disk takes the image's virtual
// size), made a template, cloned — the clone a normal VM that starts.
func TestImportTemplateClone(t *testing.T) {
	ctx := context.Background()
	s, c := startImport(t, "8.4.1")
	task, err := uploadBytes(t, c, "import", "noble.qcow2", append(qcow2Header(3<<30), make([]byte, 8192)...), nil)
	if err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if task, err = uploadBytes(t, c, "import", "tiny.raw", make([]byte, 3<<20), nil); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if task, err = uploadBytes(t, c, "iso", "seed.iso", []byte("iso"), nil); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	node := c.NodeRef("pve1")
	create := opts("name", "noble", "memory", "2048", "cores", "2", "sockets", "1", "ostype", "l26", "bios", "ovmf", "machine", "q35",
		"scsihw", "virtio-scsi-single", "efidisk0", "local-lvm:1,efitype=4m,pre-enrolled-keys=1",
		"scsi0", "local-lvm:0,import-from=local:import/noble.qcow2,discard=on", "scsi1", "local-lvm:0,import-from=local:import/tiny.raw",
		"virtio0", "local-lvm:2", "ide2", "local:iso/seed.iso,media=cdrom", "net0", "virtio,bridge=vmbr0", "serial0", "socket", "agent", "1")
	task, err = node.NewVirtualMachine(ctx, 300, create...)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(task.UPID), ":qmcreate:300:") {
		t.Errorf("UPID %s", task.UPID)
	}
	if vms := s.VMs(); vms[0].VMID != 300 || vms[0].Lock != "create" {
		t.Errorf("during the create: %+v", vms[0])
	}
	if _, err := node.NewVirtualMachine(ctx, 300, opts("name", "again")...); err == nil || !strings.Contains(err.Error(), "unable to create VM 300 - VM 300 already exists on node 'pve1'") {
		t.Errorf("a taken VMID: %v", err)
	}
	if err := wait(t, task); err != nil {
		t.Fatal(err)
	}
	vm, err := node.VirtualMachine(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	cfg := vm.VirtualMachineConfig
	for got, want := range map[string]string{
		cfg.SCSIs["scsi0"]:     "local-lvm:vm-300-disk-0,discard=on,size=3G",
		cfg.SCSIs["scsi1"]:     "local-lvm:vm-300-disk-1,size=3M",
		cfg.VirtIOs["virtio0"]: "local-lvm:vm-300-disk-2,size=2G",
		cfg.EFIDisk0:           "local-lvm:vm-300-disk-3,efitype=4m,pre-enrolled-keys=1,size=4M",
		cfg.IDEs["ide2"]:       "local:iso/seed.iso,media=cdrom",
		cfg.Boot:               "order=scsi0;ide2;net0",
	} {
		if got != want {
			t.Errorf("config has %q, want %q", got, want)
		}
	}
	if !strings.HasPrefix(cfg.Nets["net0"], "virtio=BC:24:11:") || vm.Lock != "" || bool(vm.Template) || cfg.Name != "noble" || cfg.Memory != 2048 {
		t.Errorf("VM %+v, net0 %q", vm, cfg.Nets["net0"])
	}

	// A running VM cannot become a template.
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if _, err := vm.ConvertToTemplate(ctx); err == nil || !strings.Contains(err.Error(), "you can't convert a VM to template if VM is running") {
		t.Errorf("a running VM to template: %v", err)
	}
	if task, err = vm.Stop(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if task, err = vm.ConvertToTemplate(ctx); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(task.UPID), ":qmtemplate:300:") {
		t.Errorf("UPID %s", task.UPID)
	}
	if err := wait(t, task); err != nil {
		t.Fatal(err)
	}
	if _, err := vm.ConvertToTemplate(ctx); err == nil || !strings.Contains(err.Error(), "you can't convert a template to a template") {
		t.Errorf("a template to template: %v", err)
	}
	tmpl, err := node.VirtualMachine(ctx, 300)
	if err != nil {
		t.Fatal(err)
	}
	if !bool(tmpl.Template) || tmpl.VirtualMachineConfig.SCSIs["scsi0"] != "local-lvm:base-300-disk-0,discard=on,size=3G" {
		t.Errorf("template %+v, scsi0 %q", tmpl, tmpl.VirtualMachineConfig.SCSIs["scsi0"])
	}
	var resources []map[string]any
	if err := c.Get(ctx, "/cluster/resources?type=vm", &resources); err != nil {
		t.Fatal(err)
	}
	for _, r := range resources {
		if r["vmid"] == float64(300) && r["template"] != float64(1) {
			t.Errorf("resources: %v", r)
		}
	}
	if _, err := tmpl.Start(ctx); err == nil {
		t.Error("a template started")
	}

	for id, full := range map[int]bool{301: true, 302: false} {
		_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: id, Name: fmt.Sprint("clone-", id), Full: proxmox.IntOrBool(full)})
		if err != nil || wait(t, task) != nil {
			t.Fatalf("clone %d: %v", id, err)
		}
		clone, err := node.VirtualMachine(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		scsi0 := clone.VirtualMachineConfig.SCSIs["scsi0"]
		if bool(clone.Template) || !strings.HasPrefix(scsi0, fmt.Sprintf("local-lvm:vm-%d-disk-", id)) || !strings.HasSuffix(scsi0, ",discard=on,size=3G") {
			t.Errorf("clone %d: template %v, scsi0 %q", id, clone.Template, clone.VirtualMachineConfig.SCSIs["scsi0"])
		}
		if task, err = clone.Start(ctx); err != nil || wait(t, task) != nil {
			t.Errorf("starting clone %d: %v", id, err)
		}
	}
	for _, v := range s.VMs() {
		scsi0, _ := v.Config["scsi0"].(string)
		vol, _, _ := strings.Cut(scsi0, ",")
		if v.VMID == 301 && (v.Template || v.Status != "running" || v.Volumes[vol] != 3) {
			t.Errorf("clone %+v", v)
		}
	}
}

// TestCreateRules: what create refuses, and a failed create leaves
// nothing.
func TestCreateRules(t *testing.T) {
	ctx := context.Background()
	s, c := startImport(t, "8.4.1")
	if task, err := uploadBytes(t, c, "iso", "seed.iso", []byte("iso"), nil); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	node := c.NodeRef("pve1")
	for _, e := range []struct {
		opts []proxmox.VirtualMachineOption
		want string
	}{
		{opts("hostpci0", "0000:01:00.0"), "hostpci0"},
		{opts("scsi0", "local-lvm:8,import-from=local:import/x.qcow2"), "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>"},
		{opts("scsi0", "local-lvm:0,import-from=local:iso/seed.iso"), "local:iso/seed.iso has wrong type 'iso' - needs to be 'images' or 'import'"},
		{opts("efidisk0", "local-lvm:0,import-from=local-lvm:vm-9-disk-0"), "need to specify 'efitype' when using 'import-from'"},
		{opts("scsi0", "local:iso/seed.iso"), "explicit 'media=cdrom' is required for iso images"},
		{opts("scsi0", "nfs:8"), "storage 'nfs' does not support vm images"},
		{opts("scsi0", "8"), "no storage ID specified (and no default storage)"},
		{opts("ostype", "dos"), "does not have a value in the enumeration"},
		{opts("net0", "virtio,bridge=vmbr7"), "bridge 'vmbr7' does not exist"},
	} {
		if _, err := node.NewVirtualMachine(ctx, 400, e.opts...); err == nil || !strings.Contains(err.Error(), e.want) {
			t.Errorf("create %v: %v, want %q", e.opts, err, e.want)
		}
	}
	var upid string
	if err := c.Post(ctx, "/nodes/pve1/qemu", map[string]any{"vmid": 99}, &upid); err == nil || !strings.Contains(err.Error(), "value must have a minimum value of 100") {
		t.Errorf("VMID 99: %v", err)
	}
	// A default storage for SIZE alone; a missing import source fails
	// the task, which leaves no VM and no volume.
	task, err := node.NewVirtualMachine(ctx, 400, opts("storage", "local-lvm", "scsi0", "4", "scsi1", "local-lvm:0,import-from=local:import/gone.qcow2")...)
	if err != nil {
		t.Fatal(err)
	}
	var failed *proxmox.TaskFailedError
	if err := wait(t, task); !errors.As(err, &failed) || !strings.HasPrefix(failed.ExitStatus, "unable to create VM 400 - cannot import from 'local:import/gone.qcow2'") {
		t.Errorf("a missing source: %v", err)
	}
	s.FailTasks("qmcreate", "unable to create VM 401 - storage full")
	task, err = node.NewVirtualMachine(ctx, 401, opts("scsi0", "local-lvm:4")...)
	if err != nil {
		t.Fatal(err)
	}
	if err := wait(t, task); !errors.As(err, &failed) {
		t.Errorf("an injected failure: %v", err)
	}
	s.FailTasks("qmcreate", "")
	for _, v := range s.VMs() {
		if v.VMID == 400 || v.VMID == 401 {
			t.Errorf("a failed create left VM %d", v.VMID)
		}
	}
	for _, v := range s.Volumes() {
		if strings.Contains(v, "vm-400-") || strings.Contains(v, "vm-401-") {
			t.Errorf("a failed create left %s", v)
		}
	}
	task, err = node.NewVirtualMachine(ctx, 402, opts("storage", "local-lvm", "scsi0", "4", "start", "1")...)
	if err != nil || wait(t, task) != nil {
		t.Fatalf("create and start: %v", err)
	}
	if vm, _ := node.VirtualMachine(ctx, 402); vm == nil || vm.Status != "running" || vm.VirtualMachineConfig.SCSIs["scsi0"] != "local-lvm:vm-402-disk-0,size=4G" {
		t.Errorf("create and start: %+v", vm)
	}
}

// TestImportPermissions: the privileges create, template and upload take.
func TestImportPermissions(t *testing.T) {
	ctx := context.Background()
	s, c := startImport(t, "8.4.1")
	for _, name := range []string{"disk.raw", "seed.iso"} {
		content := map[bool]string{true: "iso", false: "import"}[strings.HasSuffix(name, ".iso")]
		if task, err := uploadBytes(t, c, content, name, make([]byte, 1<<20), nil); err != nil || wait(t, task) != nil {
			t.Fatal(err)
		}
	}
	create := map[string]any{"vmid": 500, "name": "imp", "memory": 1024, "net0": "virtio,bridge=vmbr0",
		"scsi0": "local-lvm:0,import-from=local:import/disk.raw", "ide2": "local:iso/seed.iso,media=cdrom"}
	all := []ACL{
		{Path: "/vms/500", Privileges: []string{"VM.Allocate", "VM.Config.Memory", "VM.Config.Options", "VM.Config.Network"}},
		{Path: "/storage/local-lvm", Privileges: []string{"Datastore.AllocateSpace"}},
		{Path: "/storage/local", Privileges: []string{"Datastore.Audit"}},
		{Path: "/sdn/zones/localnetwork/vmbr0", Privileges: []string{"SDN.Use"}},
	}
	for _, e := range []struct {
		acl  []ACL
		want string
	}{
		{all[1:], "Permission check failed"},
		{append([]ACL{{Path: "/vms/500", Privileges: []string{"VM.Allocate", "VM.Config.Memory", "VM.Config.Options", "VM.Config.Network"}}}, all[2:]...), "(/storage/local-lvm, Datastore.AllocateSpace)"},
		{append(all[:2:2], all[3]), "(/storage/local, Datastore.AllocateSpace|Datastore.Audit)"},
		{append([]ACL{{Path: "/vms/500", Privileges: []string{"VM.Allocate", "VM.Config.Options", "VM.Config.Network"}}}, all[1:]...), "(/vms/500, VM.Config.Memory)"},
		{all[:3], "(/sdn/zones/localnetwork/vmbr0, SDN.Use)"},
	} {
		s.SetACL(e.acl)
		var upid string
		err := c.Post(ctx, "/nodes/pve1/qemu", create, &upid)
		if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), e.want) {
			t.Errorf("create with %v: %v, want 403 %s", e.acl, err, e.want)
		}
	}
	// The pool's VM.Allocate does for the VM's.
	s.SetACL(append([]ACL{{Path: "/pool/images", Privileges: []string{"VM.Allocate", "VM.Config.Memory", "VM.Config.Options", "VM.Config.Network"}}}, all[1:]...))
	poolCreate := map[string]any{"pool": "images"}
	for k, v := range create {
		poolCreate[k] = v
	}
	var upid string
	if err := c.Post(ctx, "/nodes/pve1/qemu", poolCreate, &upid); err != nil {
		t.Errorf("create in a pool with its privileges: %v", err)
	}
	s.SetACL(all)
	if err := wait(t, proxmox.NewTask(proxmox.UPID(upid), c)); err != nil {
		t.Fatal(err)
	}
	s.SetACL([]ACL{{Path: "/vms/500", Privileges: []string{"VM.Audit"}}})
	if err := c.Post(ctx, "/nodes/pve1/qemu/500/template", nil, &upid); err == nil || !strings.Contains(err.Error(), "(/vms/500, VM.Allocate)") {
		t.Errorf("template without VM.Allocate: %v", err)
	}
	// A VM's disk as a source takes VM.Clone on that VM.
	s.SetACL([]ACL{{Path: "/vms/501", Privileges: []string{"VM.Allocate"}}, {Path: "/storage/local-lvm", Privileges: []string{"Datastore.AllocateSpace"}}})
	if err := c.Post(ctx, "/nodes/pve1/qemu", map[string]any{"vmid": 501, "scsi0": "local-lvm:0,import-from=local-lvm:vm-500-disk-0"}, &upid); err == nil || !strings.Contains(err.Error(), "(/vms/500, VM.Clone)") {
		t.Errorf("import from a VM's disk without VM.Clone: %v", err)
	}
	s.SetACL([]ACL{{Path: "/storage/local", Privileges: []string{"Datastore.Audit"}}})
	if _, err := uploadBytes(t, c, "iso", "other.iso", []byte("iso"), nil); err == nil || !strings.Contains(err.Error(), "(/storage/local, Datastore.AllocateTemplate)") {
		t.Errorf("upload without Datastore.AllocateTemplate: %v", err)
	}
	if files := leftFiles(t, s); len(files) != 2 {
		t.Errorf("files %v, want the two uploads", files)
	}
}
