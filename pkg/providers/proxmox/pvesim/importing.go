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

// Importing a disk image and building a template, as Proxmox VE 8 and 9
// do it: pve-storage's upload and download-url (API2/Storage/Status.pm)
// into iso, vztmpl or import content, qemu-server's create_vm with
// import-from and template (API2/Qemu.pm).

import (
	"compress/bzip2"
	"compress/gzip"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// atLeast tells whether the simulated release is major.minor or later.
func (s *Simulator) atLeast(major, minor int) bool {
	parts := strings.SplitN(s.opts.Version, ".", 3)
	ma, _ := strconv.Atoi(parts[0])
	mi := 0
	if len(parts) > 1 {
		mi, _ = strconv.Atoi(parts[1])
	}
	return ma > major || ma == major && mi >= minor
}

// uploadContents are the content types upload and download-url take:
// import from PVE 8.3 (libpve-storage-perl 8.2.8).
func (s *Simulator) uploadContents() []string {
	if s.atLeast(8, 3) {
		return []string{"iso", "vztmpl", "import"}
	}
	return []string{"iso", "vztmpl"}
}

var (
	isoExt    = regexp.MustCompile(`(?i)[^/]+\.(?:iso|img)$`)
	vztmplExt = regexp.MustCompile(`(?i)[^/]+\.tar\.(gz|xz|zst|bz2)$`)
	// pve-storage's $UPLOAD_IMPORT_EXT_RE_1: .ova alone in PVE 8.3, disk
	// images too from 8.4 (libpve-storage-perl 8.3.6); case matters.
	importExtOVA    = regexp.MustCompile(`[a-zA-Z0-9\-.+=_]+\.(ova)$`)
	importExtImages = regexp.MustCompile(`[a-zA-Z0-9\-.+=_]+\.(ova|qcow2|raw|vmdk)$`)
	unsafeChar      = regexp.MustCompile(`[^a-zA-Z0-9_.-]`)
)

// normalizeFilename is PVE::Storage::normalize_content_filename.
func normalizeFilename(name string) string {
	name = strings.TrimSuffix(name, "\n")
	if i := strings.LastIndexAny(name, `/\`); i >= 0 {
		name = name[i+1:]
	}
	return unsafeChar.ReplaceAllString(name, "_")
}

// contentFile checks a file name against its content type, as upload and
// download-url do; it returns the volume name (iso/NAME, import/NAME...).
func (s *Simulator) contentFile(content, name string) (string, *apiError) {
	switch content {
	case "iso":
		if !isoExt.MatchString(name) {
			return "", badParam("filename", "wrong file extension")
		}
		return "iso/" + name, nil
	case "vztmpl":
		if !vztmplExt.MatchString(name) {
			return "", badParam("filename", "wrong file extension")
		}
		return "vztmpl/" + name, nil
	case "import":
		re := importExtOVA
		if s.atLeast(8, 4) {
			re = importExtImages
		}
		if !re.MatchString(name) {
			return "", badParam("filename", "invalid filename or wrong extension")
		}
		return "import/" + name, nil
	}
	return "", badParam("content", "upload content type '"+content+"' not allowed")
}

// volumeContent is a volume's content type and format as GET content
// lists them.
func volumeContent(vol string) (content, format string) {
	switch {
	case strings.HasPrefix(vol, "iso/"):
		return "iso", "iso"
	case strings.HasPrefix(vol, "vztmpl/"):
		if m := vztmplExt.FindStringSubmatch(vol); m != nil {
			return "vztmpl", "tar." + m[1]
		}
		return "vztmpl", "tar"
	case strings.HasPrefix(vol, "import/"):
		return "import", strings.TrimPrefix(filepath.Ext(vol), ".")
	}
	return "images", "raw"
}

// blockTypes are the storage types without a path (no files: no upload).
var blockTypes = map[string]bool{"lvm": true, "lvmthin": true, "zfspool": true, "zfs": true, "rbd": true, "iscsi": true, "iscsidirect": true}

// hostPath is where PVE keeps a volume of a directory storage.
func hostPath(st *storage, vol string) string {
	base := "/mnt/pve/" + st.name
	if st.name == "local" {
		base = "/var/lib/vz"
	}
	sub, name, _ := strings.Cut(vol, "/")
	switch sub {
	case "iso":
		sub = "template/iso"
	case "vztmpl":
		sub = "template/cache"
	}
	return base + "/" + sub + "/" + name
}

// required, enum, boolean and the checksum pair are PVE's schema checks.
func required(p params, name string) (string, *apiError) {
	v, ok := p[name]
	if !ok {
		return "", badParam(name, "property is missing and it is not optional")
	}
	return v, nil
}

func enum(name, val string, values []string) *apiError {
	if !contains(values, val) {
		return badParam(name, "value '"+val+"' does not have a value in the enumeration '"+strings.Join(values, ", ")+"'")
	}
	return nil
}

func boolean(p params, name string, def bool) (bool, *apiError) {
	v, ok := p[name]
	if !ok {
		return def, nil
	}
	switch strings.ToLower(v) {
	case "1", "true", "yes", "on":
		return true, nil
	case "0", "false", "no", "off":
		return false, nil
	}
	return false, badParam(name, "type check ('boolean') failed - got '"+v+"'")
}

func checksumParams(p params) (sum, alg string, err *apiError) {
	sum, hasSum := p["checksum"]
	alg, hasAlg := p["checksum-algorithm"]
	switch {
	case hasSum && !hasAlg:
		return "", "", badParam("checksum-algorithm", "missing property required by 'checksum'")
	case hasAlg && !hasSum:
		return "", "", badParam("checksum", "missing property required by 'checksum-algorithm'")
	case hasAlg:
		if err := enum("checksum-algorithm", alg, ChecksumAlgorithms); err != nil {
			return "", "", err
		}
	}
	return sum, alg, nil
}

func filenameParam(p params) (string, *apiError) {
	name, err := required(p, "filename")
	if err != nil {
		return "", err
	}
	if len(name) > 255 {
		return "", badParam("filename", "value may only be 255 characters long")
	}
	return name, nil
}

// logTask adds lines to a task's log.
func (s *Simulator) logTask(upid string, lines ...string) {
	if t := s.tasks[upid]; t != nil {
		t.lines = append(t.lines, lines...)
	}
}

// store puts a file on a storage as volume vol (moving it in).
func (s *Simulator) store(n *node, st *storage, vol, path string, size int64) error {
	dest := filepath.Join(s.files, n.name, st.name, filepath.FromSlash(vol))
	if err := os.MkdirAll(filepath.Dir(dest), 0o755); err != nil {
		return err
	}
	if err := os.Rename(path, dest); err != nil {
		return err
	}
	st.volumes[vol] = size
	st.paths[vol] = dest
	return nil
}

// upload is POST /nodes/{node}/storage/{storage}/upload: the file is on
// disk already (readMultipart); an imgcopy task checks its checksum and,
// for import content, that it is the image its name says, then moves it
// into the storage. A mismatch fails the task and removes the file.
func (s *Simulator) upload(n *node, st *storage, p params) (any, *apiError) {
	content, err := required(p, "content")
	if err != nil {
		return nil, err
	}
	if err := enum("content", content, s.uploadContents()); err != nil {
		return nil, err
	}
	filename, err := filenameParam(p)
	if err != nil {
		return nil, err
	}
	sum, alg, err := checksumParams(p)
	if err != nil {
		return nil, err
	}
	if blockTypes[st.typ] {
		return nil, fail(http.StatusInternalServerError, "can't upload to storage type '%s'", st.typ)
	}
	tmp := p[upPath]
	if tmp == "" {
		return nil, fail(http.StatusInternalServerError, "missing temporary file name")
	}
	size, _ := strconv.ParseInt(p[upSize], 10, 64)
	vol, err := s.contentFile(content, normalizeFilename(filename))
	if err != nil {
		return nil, err
	}
	if !st.has(content) {
		return nil, fail(http.StatusInternalServerError, "storage '%s' does not support '%s' content", st.name, content)
	}
	got := p[upHash]
	if p[upHashAlg] != alg {
		got = "" // cannot happen: readMultipart hashes by the algorithm given
	}
	p[upClaimed] = "1"
	var upid string
	upid = s.startTask(n.name, "imgcopy", "", func() string {
		s.logTask(upid, "starting file import from: "+tmp)
		if alg != "" {
			if !strings.EqualFold(got, sum) {
				_ = os.Remove(tmp)
				s.logTask(upid, "calculating checksum...")
				return fmt.Sprintf("checksum mismatch: got '%s' != expect '%s'", got, sum)
			}
			s.logTask(upid, "calculating checksum...OK, checksum verified")
		}
		if content == "import" {
			if _, err := imageInfo(tmp, volumeFormat(vol)); err != nil {
				_ = os.Remove(tmp)
				return err.Error()
			}
		}
		dest := hostPath(st, vol)
		s.logTask(upid, "target node: "+n.name, "target file: "+dest, fmt.Sprintf("file size is: %d", size), "command: cp -- "+tmp+" "+dest)
		if err := s.store(n, st, vol, tmp, size); err != nil {
			_ = os.Remove(tmp)
			return "import failed: " + err.Error()
		}
		s.logTask(upid, "finished file import successfully")
		return ""
	})
	s.tasks[upid].undo = func() { _ = os.Remove(tmp) }
	return upid, nil
}

// volumeFormat is an import volume's format: its extension.
func volumeFormat(vol string) string {
	_, format := volumeContent(vol)
	return format
}

// downloadPermission: Datastore.AllocateTemplate on the storage, and
// Sys.Audit with Sys.Modify on / or (PVE 8.1+) Sys.AccessNetwork on the
// node; the "or" failing is a bare "Permission check failed".
func (s *Simulator) downloadPermission(n *node, st *storage) *apiError {
	if err := s.need(storagePath(st.name), "Datastore.AllocateTemplate"); err != nil {
		return err
	}
	if s.need("/", "Sys.Audit", "Sys.Modify") == nil || s.need("/nodes/"+n.name, "Sys.AccessNetwork") == nil {
		return nil
	}
	return fail(http.StatusForbidden, "Permission check failed")
}

var compressions = []string{"gz", "lzo", "zst", "bz2"}

// download is what a download-url task's fetch found.
type download struct {
	path string // the fetched file, not yet in the storage
	size int64
	keep bool   // the file there already has the checksum
	err  string // the task's error
}

// downloadURL is POST /nodes/{node}/storage/{storage}/download-url: a
// "download" task fetches the URL into a file (streamed, hashed on the
// way), checks it as upload does, then moves it into the storage; a
// failed fetch or a mismatch leaves nothing.
func (s *Simulator) downloadURL(n *node, st *storage, p params) (any, *apiError) {
	url, err := required(p, "url")
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") {
		return nil, badParam("url", "value does not match the regex pattern")
	}
	content, err := required(p, "content")
	if err != nil {
		return nil, err
	}
	if err := enum("content", content, s.uploadContents()); err != nil {
		return nil, err
	}
	filename, err := filenameParam(p)
	if err != nil {
		return nil, err
	}
	sum, alg, err := checksumParams(p)
	if err != nil {
		return nil, err
	}
	compression, hasCompression := p["compression"]
	if hasCompression {
		if err := enum("compression", compression, compressions); err != nil {
			return nil, err
		}
	}
	verify, err := boolean(p, "verify-certificates", true)
	if err != nil {
		return nil, err
	}
	if blockTypes[st.typ] {
		return nil, fail(http.StatusInternalServerError, "can't upload to storage type '%s', not a file based storage!", st.typ)
	}
	if !st.has(content) {
		return nil, fail(http.StatusInternalServerError, "storage '%s' is not configured for content-type '%s'", st.name, content)
	}
	name := normalizeFilename(filename)
	vol, err := s.contentFile(content, name)
	if err != nil {
		return nil, err
	}
	dest := hostPath(st, vol)
	existing := st.paths[vol]
	if _, ok := st.volumes[vol]; ok && existing == "" {
		existing = "-" // a volume without a file: its checksum is nobody's
	}
	upid := s.startTask(n.name, "download", name, nil)
	t := s.tasks[upid]
	t.work = make(chan struct{})
	var res download
	go func() {
		defer close(t.work)
		res = s.fetch(url, dest, existing, content, compression, sum, alg, verify, t.pid, vol)
	}()
	t.effect = func() string {
		s.logTask(upid, "downloading "+url+" to "+dest)
		if res.err != "" {
			return res.err
		}
		if res.keep {
			s.logTask(upid, "calculating checksum of existing file...OK, got correct file already, no need to download")
			return ""
		}
		if alg != "" {
			s.logTask(upid, "calculating checksum...OK, checksum verified")
		}
		if err := s.store(n, st, vol, res.path, res.size); err != nil {
			_ = os.Remove(res.path)
			return "unable to rename temporary file: " + err.Error()
		}
		s.logTask(upid, "download of '"+url+"' to '"+dest+"' finished")
		return ""
	}
	t.undo = func() {
		if res.path != "" {
			_ = os.Remove(res.path)
		}
	}
	return upid, nil
}

// fetch runs a download-url task's work outside the lock:
// PVE::Tools::download_file_from_url, with wget's exit codes (4 network
// failure, 8 server error) in its error.
func (s *Simulator) fetch(url, dest, existing, content, compression, sum, alg string, verify bool, pid int, vol string) (res download) {
	if existing != "" {
		if alg == "" {
			return download{err: fmt.Sprintf("refusing to override existing file '%s'", dest)}
		}
		got := ""
		if existing != "-" {
			got, _ = fileHash(alg, existing)
		}
		if strings.EqualFold(got, sum) {
			return download{keep: true}
		}
		return download{err: fmt.Sprintf("checksum mismatch: got '%s' != expect '%s', aborting", got, sum)}
	}
	tmpName := fmt.Sprintf("%s.tmp_dwnl.%d", dest, pid)
	cmd := "wget --progress=dot:giga -O " + tmpName + " " + url
	if !verify {
		cmd += " --no-check-certificate"
	}
	wget := func(code int) download {
		return download{err: fmt.Sprintf("download failed: command '%s' failed: exit code %d", cmd, code)}
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		select {
		case <-s.stop:
			cancel()
		case <-ctx.Done():
		}
	}()
	client := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: &tls.Config{InsecureSkipVerify: !verify}}} //nolint:gosec // verify-certificates=0 asks for it
	defer client.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return wget(1)
	}
	resp, err := client.Do(req)
	if err != nil {
		return wget(4)
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 400 {
		return wget(8)
	}
	f, err := os.CreateTemp(s.files, "download-")
	if err != nil {
		return download{err: err.Error()}
	}
	path := f.Name()
	defer func() {
		if res.err != "" {
			_ = os.Remove(path)
		}
	}()
	n, err := io.Copy(f, resp.Body)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return wget(4)
	}
	if alg != "" {
		got, err := fileHash(alg, path)
		if err != nil {
			return download{err: err.Error()}
		}
		if !strings.EqualFold(got, sum) {
			return download{err: fmt.Sprintf("checksum mismatch: got '%s' != expect '%s'", got, sum)}
		}
	}
	if compression != "" {
		if content != "iso" {
			return download{err: "decompression not supported for " + content}
		}
		out, size, err := s.decompress(path, compression)
		_ = os.Remove(path)
		if err != nil {
			return download{err: err.Error()}
		}
		path, n = out, size
	}
	if content == "import" {
		if _, err := imageInfo(path, volumeFormat(vol)); err != nil {
			return download{err: "failed to verify file: " + err.Error()}
		}
	}
	return download{path: path, size: n}
}

// decompress unpacks a downloaded ISO: gz and bz2 (Go's own readers);
// lzo and zst PVE does with lzop and zstd, which pvesim does not.
func (s *Simulator) decompress(path, compression string) (string, int64, error) {
	in, err := os.Open(path)
	if err != nil {
		return "", 0, err
	}
	defer in.Close()
	var r io.Reader
	switch compression {
	case "gz":
		zr, err := gzip.NewReader(in)
		if err != nil {
			return "", 0, fmt.Errorf("decompressing failed: %v", err)
		}
		r = zr
	case "bz2":
		r = bzip2.NewReader(in)
	default:
		return "", 0, fmt.Errorf("pvesim: decompressing %s is not simulated", compression)
	}
	out, err := os.CreateTemp(s.files, "decompressed-")
	if err != nil {
		return "", 0, err
	}
	n, err := io.Copy(out, r)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(out.Name())
		return "", 0, fmt.Errorf("decompressing failed: %v", err)
	}
	return out.Name(), n, nil
}

// validDriveNames is qemu-server's valid_drive_names, in its order.
func validDriveNames() []string {
	var out []string
	for _, b := range []struct {
		bus string
		n   int
	}{{"ide", 4}, {"scsi", 31}, {"virtio", 16}, {"sata", 6}} {
		for i := 0; i < b.n; i++ {
			out = append(out, fmt.Sprintf("%s%d", b.bus, i))
		}
	}
	return append(out, "efidisk0", "tpmstate0")
}

// driveOrder is qemu-server's order of drives (valid_drive_names): disks
// are allocated, and numbered, in it.
func driveOrder(keys []string) []string {
	rank := map[string]int{"ide": 0, "scsi": 1, "virtio": 2, "sata": 3, "efidisk": 4, "tpmstate": 5}
	split := func(k string) (int, int) {
		i := strings.IndexAny(k, "0123456789")
		n, _ := strconv.Atoi(k[i:])
		return rank[k[:i]], n
	}
	sort.Slice(keys, func(a, b int) bool {
		ra, na := split(keys[a])
		rb, nb := split(keys[b])
		return ra < rb || ra == rb && na < nb
	})
	return keys
}

// drive is a drive value's file and its options.
type drive struct {
	file string
	opts map[string]string
	keys []string // option names in their order
}

func parseDrive(val string) drive {
	fields := strings.Split(val, ",")
	d := drive{opts: map[string]string{}}
	for i, f := range fields {
		k, v, ok := strings.Cut(f, "=")
		switch {
		case i == 0 && !ok:
			d.file = f
		case k == "file":
			d.file = v
		default:
			d.opts[k] = v
			d.keys = append(d.keys, k)
		}
	}
	return d
}

// print is print_drive: the file, then the options by name.
func (d drive) print() string {
	keys := make([]string, 0, len(d.opts))
	for k := range d.opts {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := d.file
	for _, k := range keys {
		out += "," + k + "=" + d.opts[k]
	}
	return out
}

// newDiskFile is qemu-server's NEW_DISK_RE: [STORAGE:]SIZE_GIB.
var newDiskFile = regexp.MustCompile(`^(([^/:\s]+):)?(\d+(\.\d+)?)$`)

// volumeType is parse_volname's type and owner of a volume name.
func volumeType(vol string) (vtype string, owner int) {
	switch {
	case strings.HasPrefix(vol, "iso/"):
		return "iso", 0
	case strings.HasPrefix(vol, "vztmpl/"):
		return "vztmpl", 0
	case strings.HasPrefix(vol, "import/"):
		return "import", 0
	case strings.HasPrefix(vol, "snippets/"):
		return "snippets", 0
	}
	id, _ := volumeOwner(vol)
	return "images", id
}

// volumeAccess is PVE::Storage::check_volume_access.
func (s *Simulator) volumeAccess(vmid int, volid string) *apiError {
	st, vol, ok := strings.Cut(volid, ":")
	if !ok {
		if s.acl == nil {
			return nil // the token is root@pam
		}
		return fail(http.StatusInternalServerError, "Only root can pass arbitrary filesystem paths.")
	}
	if s.allowed(storagePath(st), "Datastore.Allocate") {
		return nil
	}
	vtype, owner := volumeType(vol)
	switch {
	case vtype == "iso" || vtype == "vztmpl" || vtype == "import":
		return s.needAny(storagePath(st), "Datastore.AllocateSpace", "Datastore.Audit")
	case owner != 0 && owner == vmid:
		return nil
	case vtype == "images" && owner != 0:
		if err := s.need(storagePath(st), "Datastore.Audit"); err != nil {
			return err
		}
		return s.need(vmPath(owner), "VM.Config.Disk")
	}
	return fail(http.StatusInternalServerError, "missing privileges to access %s", volid)
}

// needVM is check_vm_perm: the privileges on the VM's pool, else on the VM.
func (s *Simulator) needVM(vmid int, pool string, privs ...string) *apiError {
	if pool != "" && s.need("/pool/"+pool, privs...) == nil {
		return nil
	}
	return s.need(vmPath(vmid), privs...)
}

// createOptionPermission is check_vm_modify_config_perm of a new VM (its
// drives are checked by their storage access instead).
func (s *Simulator) createOptionPermission(vmid int, pool, k, val string) *apiError {
	switch {
	case isDiskKey(k) || k == "tags" || strings.HasPrefix(k, "unused"):
		return nil
	case strings.HasPrefix(k, "serial"):
		// check_vm_create_serial_perm: a socket takes VM.Config.HWType, a
		// host device root.
		if val != "socket" {
			if s.acl == nil {
				return nil // the token is root@pam
			}
			return fail(http.StatusInternalServerError, "only root can set '%s' config for real devices", k)
		}
		return s.needVM(vmid, pool, "VM.Config.HWType")
	case strings.HasPrefix(k, "net"):
		return s.needVM(vmid, pool, "VM.Config.Network")
	case cloudInitOption.MatchString(k):
		if pool != "" && s.needAny("/pool/"+pool, "VM.Config.Cloudinit", "VM.Config.Network") == nil {
			return nil
		}
		return s.needAny(vmPath(vmid), "VM.Config.Cloudinit", "VM.Config.Network")
	}
	if priv, ok := optionPrivilege[k]; ok {
		return s.needVM(vmid, pool, priv)
	}
	return fail(http.StatusInternalServerError, "only root can set '%s' config", k)
}

// createVM is POST /nodes/{node}/qemu, qemu-server's create_vm (not its
// restore): the checks in its order — default storage, start, VM.Allocate
// on the VM or its pool, each drive's storage access (new disks
// Datastore.AllocateSpace, volumes and import-from sources
// check_volume_access, a VM's disk as source VM.Clone on it), each
// option's privilege, bridges' SDN.Use, drive syntax — then the VM
// exists at once, locked "create", and a qmcreate task allocates its
// disks: STORAGE:SIZE a blank disk of SIZE GiB, STORAGE:0,import-from=VOL
// one of VOL's virtual size (a raw file's size, a qcow2's or VMDK's
// header's). A failed task leaves no VM and no volume.
func (s *Simulator) createVM(n *node, p params) (any, *apiError) {
	raw, err := required(p, "vmid")
	if err != nil {
		return nil, err
	}
	vmid, perr := strconv.Atoi(raw)
	if perr != nil {
		return nil, badParam("vmid", "type check ('integer') failed - got '"+raw+"'")
	}
	if vmid < 100 {
		return nil, badParam("vmid", "value must have a minimum value of 100")
	}
	if vmid > 999999999 {
		return nil, badParam("vmid", "value must have a maximum value of 999999999")
	}
	pool, defStorage := p["pool"], p["storage"]
	start, err := boolean(p, "start", false)
	if err != nil {
		return nil, err
	}
	settings := map[string]string{}
	for _, k := range sortedKeysS(p) {
		switch k {
		case "vmid", "pool", "storage", "start":
			continue
		case "archive", "force", "unique", "live-restore", "bwlimit", "ha-managed", "import-working-storage":
			return nil, fail(http.StatusNotImplemented, "pvesim: the create parameter '%s' is not simulated", k)
		}
		if !knownKey.MatchString(k) {
			return nil, badParam(k, "property is not defined in schema and the schema does not allow additional properties")
		}
		val := p[k]
		if isDiskKey(k) && defStorage != "" {
			// SIZE alone: a new disk on the default storage.
			if d := parseDrive(val); newDiskFile.MatchString(d.file) && !strings.Contains(d.file, ":") {
				d.file = defStorage + ":" + d.file
				val = d.print()
			}
		}
		settings[k] = val
	}
	nv := &vm{vmid: vmid, node: n.name, config: map[string]any{}, pending: map[string]any{}, status: "stopped", pool: pool}
	for _, k := range sortedKeysS(settings) {
		if f := parseDrive(settings[k]).file; isDiskKey(k) && !strings.Contains(f, ":") && newDiskFile.MatchString(f) {
			return nil, fail(http.StatusInternalServerError, "no storage ID specified (and no default storage)")
		}
		if err := s.checkValue(nv, k, settings[k]); err != nil {
			return nil, err
		}
	}
	if defStorage != "" {
		if err := s.need(storagePath(defStorage), "Datastore.AllocateSpace"); err != nil {
			return nil, err
		}
	}
	if start {
		if err := s.needVM(vmid, pool, "VM.PowerMgmt"); err != nil {
			return nil, err
		}
	}
	if !s.allowed(vmPath(vmid), "VM.Allocate") && (pool == "" || !s.allowed("/pool/"+pool, "VM.Allocate")) {
		return nil, fail(http.StatusForbidden, "Permission check failed")
	}
	for _, k := range driveOrder(diskKeys(settings)) {
		if err := s.driveAccess(n, vmid, k, settings[k]); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeysS(settings) {
		if err := s.createOptionPermission(vmid, pool, k, settings[k]); err != nil {
			return nil, err
		}
	}
	for _, k := range sortedKeysS(settings) {
		if strings.HasPrefix(k, "net") {
			if err := s.valuePermission(nv, k, settings[k]); err != nil {
				return nil, err
			}
		}
	}
	for _, k := range driveOrder(diskKeys(settings)) {
		if err := s.driveSyntax(n, k, settings[k]); err != nil {
			return nil, err
		}
	}
	if old, used := s.vms[vmid]; used {
		return nil, fail(http.StatusInternalServerError, "unable to create VM %d - VM %d already exists on node '%s'", vmid, vmid, old.node)
	}
	nv.lock = "create"
	s.vms[vmid] = nv
	var upid string
	upid = s.startTask(n.name, "qmcreate", strconv.Itoa(vmid), func() string {
		if err := s.fillVM(n, nv, settings); err != "" {
			s.dropVolumes(nv)
			delete(s.vms, vmid)
			return fmt.Sprintf("unable to create VM %d - %s", vmid, err)
		}
		nv.lock = ""
		if start {
			s.logTask(upid, "Execute autostart")
			nv.status, nv.started = "running", time.Now()
			nv.boots++
		}
		return ""
	})
	s.tasks[upid].undo = func() {
		s.dropVolumes(nv)
		delete(s.vms, vmid)
	}
	return upid, nil
}

func diskKeys(settings map[string]string) []string {
	var out []string
	for k := range settings {
		if isDiskKey(k) {
			out = append(out, k)
		}
	}
	return out
}

// driveAccess is check_storage_access for one drive.
func (s *Simulator) driveAccess(n *node, vmid int, k, val string) *apiError {
	d := parseDrive(val)
	cdrom := d.opts["media"] == "cdrom"
	st, vol, isVolume := strings.Cut(d.file, ":")
	switch {
	case d.file == "" || d.file == "none" || d.file == "cloudinit" || vol == "cloudinit":
	case cdrom && d.file == "cdrom":
		if err := s.need("/", "Sys.Console"); err != nil {
			return err
		}
	case !cdrom && newDiskFile.MatchString(d.file):
		if err := s.need(storagePath(st), "Datastore.AllocateSpace"); err != nil {
			return err
		}
		if store := n.storages[st]; store == nil || !store.has("images") {
			return badParam("storage", fmt.Sprintf("storage '%s' does not support vm images", st))
		}
	default:
		if err := s.volumeAccess(vmid, d.file); err != nil {
			return err
		}
		if isVolume {
			if vtype, _ := volumeType(vol); vtype != "images" && vtype != "iso" {
				return badParam(k, "content type needs to be 'images' or 'iso'")
			}
		}
	}
	src, ok := d.opts["import-from"]
	if !ok {
		return nil
	}
	srcStore, srcVol, managed := strings.Cut(src, ":")
	if !managed {
		return s.volumeAccess(vmid, src)
	}
	if n.storages[srcStore] == nil {
		return fail(http.StatusInternalServerError, "storage '%s' does not exist", srcStore)
	}
	vtype, owner := volumeType(srcVol)
	if vtype != "images" && vtype != "import" {
		return badParam(k, fmt.Sprintf("%s has wrong type '%s' - needs to be 'images' or 'import'", src, vtype))
	}
	if vtype == "import" && volumeFormat(srcVol) == "ova" {
		return fail(http.StatusNotImplemented, "pvesim: importing from an OVA is not simulated")
	}
	if owner != 0 {
		return s.need(vmPath(owner), "VM.Clone")
	}
	return s.volumeAccess(vmid, src)
}

// driveSyntax is check_drive_param: import-from's STORAGE:0, what an EFI
// or TPM import needs, media=cdrom for an ISO.
func (s *Simulator) driveSyntax(n *node, k, val string) *apiError {
	d := parseDrive(val)
	if _, ok := d.opts["import-from"]; ok {
		m := newDiskFile.FindStringSubmatch(d.file)
		if m == nil || m[3] != "0" {
			return badParam(k, "'import-from' requires special syntax - use <storage ID>:0,import-from=<source>")
		}
		switch k {
		case "efidisk0":
			for _, r := range []string{"efitype", "pre-enrolled-keys"} {
				if _, ok := d.opts[r]; !ok {
					return badParam(k, "need to specify '"+r+"' when using 'import-from'")
				}
			}
		case "tpmstate0":
			if _, ok := d.opts["version"]; !ok {
				return badParam(k, "need to specify 'version' when using 'import-from'")
			}
		}
	}
	if _, vol, ok := strings.Cut(d.file, ":"); ok && !newDiskFile.MatchString(d.file) {
		if vtype, _ := volumeType(vol); vtype == "iso" && d.opts["media"] != "cdrom" {
			return badParam(k, "explicit 'media=cdrom' is required for iso images")
		}
	}
	return nil
}

// fillVM is a qmcreate task's work: disks allocated or imported in drive
// order, NICs given MACs, the defaults PVE writes (boot, smbios1,
// vmgenid, meta). It returns the error text, "" when done.
func (s *Simulator) fillVM(n *node, v *vm, settings map[string]string) string {
	for _, k := range sortedKeysS(settings) {
		if !isDiskKey(k) {
			v.config[k] = s.allocate(v, k, settings[k])
		}
	}
	for _, k := range driveOrder(diskKeys(settings)) {
		d := parseDrive(settings[k])
		m := newDiskFile.FindStringSubmatch(d.file)
		if m == nil || d.opts["media"] == "cdrom" {
			v.config[k] = settings[k] // a volume, a CD-ROM: as given
			continue
		}
		st := n.storages[m[2]]
		var bytes int64
		if src, ok := d.opts["import-from"]; ok {
			delete(d.opts, "import-from")
			size, err := s.sourceSize(n, src)
			if err != "" {
				return fmt.Sprintf("cannot import from '%s' - %s", src, err)
			}
			bytes = size
		} else {
			gib, _ := strconv.ParseFloat(m[3], 64)
			bytes = int64(gib * (1 << 30))
		}
		switch k {
		case "efidisk0":
			bytes = 4 << 20
			if !blockTypes[st.typ] {
				bytes = 128 << 10 // 2m OVMF vars on a file
				if d.opts["efitype"] == "4m" {
					bytes = 540672
				}
			}
		case "tpmstate0":
			bytes = 4 << 20
		}
		bytes = (bytes + 1023) / 1024 * 1024 // vdisk_alloc takes KiB
		vol := fmt.Sprintf("vm-%d-disk-%d", v.vmid, s.nextDisk(v.vmid))
		st.volumes[vol] = bytes
		d.file = st.name + ":" + vol
		d.opts["size"] = formatSize(bytes)
		v.config[k] = d.print()
	}
	if _, ok := v.config["boot"]; !ok {
		v.config["boot"] = defaultBoot(v.config)
	}
	if _, ok := v.config["smbios1"]; !ok {
		v.config["smbios1"] = fmt.Sprintf("uuid=%08x-0000-4000-8000-%012x", v.vmid, s.seq)
	}
	v.config["vmgenid"] = fmt.Sprintf("%08x-0000-4000-8000-%012x", v.vmid, s.seq+1)
	v.config["meta"] = fmt.Sprintf("creation-qemu=9.0.2,ctime=%d", time.Now().Unix())
	return ""
}

// sourceSize is an import source's virtual size.
func (s *Simulator) sourceSize(n *node, src string) (int64, string) {
	stName, vol, _ := strings.Cut(src, ":")
	st := n.storages[stName]
	size, ok := st.volumes[vol]
	if !ok {
		return 0, fmt.Sprintf("volume '%s' does not exist", src)
	}
	path := st.paths[vol]
	if path == "" {
		return size, "" // a VM's disk: its size
	}
	virtual, err := imageInfo(path, volumeFormat(vol))
	if err != nil {
		return 0, err.Error()
	}
	return virtual, ""
}

// defaultBoot is get_default_bootdevices: the boot disk, the first
// CD-ROM, then the NICs.
func defaultBoot(cfg map[string]any) string {
	var disks, cdroms, nets []string
	for _, k := range driveOrder(diskKeysAny(cfg)) {
		str, _ := cfg[k].(string)
		switch {
		case k == "efidisk0" || k == "tpmstate0":
		case strings.Contains(str, "media=cdrom"):
			cdroms = append(cdroms, k)
		default:
			disks = append(disks, k)
		}
	}
	for i := 0; i < 32; i++ {
		if _, ok := cfg[fmt.Sprintf("net%d", i)]; ok {
			nets = append(nets, fmt.Sprintf("net%d", i))
		}
	}
	var order []string
	if len(disks) > 0 {
		order = append(order, disks[0])
	}
	if len(cdroms) > 0 {
		order = append(order, cdroms[0])
	}
	order = append(order, nets...)
	if len(order) == 0 {
		return " "
	}
	return "order=" + strings.Join(order, ";")
}

func diskKeysAny(cfg map[string]any) []string {
	var out []string
	for k := range cfg {
		if isDiskKey(k) {
			out = append(out, k)
		}
	}
	return out
}

// makeTemplate is POST /nodes/{node}/qemu/{vmid}/template: refused for a
// locked, running or template VM; a qmtemplate task sets template: 1 and
// turns the disks (or the one of disk=) into base volumes.
func (s *Simulator) makeTemplate(v *vm, p params) (any, *apiError) {
	for k := range p {
		if k != "disk" {
			return nil, badParam(k, "property is not defined in schema and the schema does not allow additional properties")
		}
	}
	disk, one := p["disk"]
	if one {
		if err := enum("disk", disk, validDriveNames()); err != nil {
			return nil, err
		}
	}
	check := func() *apiError {
		if err := locked(v); err != nil {
			return err
		}
		if v.template && !one {
			return fail(http.StatusInternalServerError, "you can't convert a template to a template")
		}
		if v.status == "running" {
			return fail(http.StatusInternalServerError, "you can't convert a VM to template if VM is running")
		}
		return nil
	}
	if err := check(); err != nil {
		return nil, err
	}
	return s.startTask(v.node, "qmtemplate", strconv.Itoa(v.vmid), func() string {
		if err := check(); err != nil {
			return err.msg
		}
		v.template = true
		v.config["template"] = 1
		for _, k := range driveOrder(diskKeysAny(v.config)) {
			if one && k != disk {
				continue
			}
			str, _ := v.config[k].(string)
			if strings.Contains(str, "media=cdrom") {
				continue
			}
			st, vol, ok := parseVolume(str)
			store := s.nodes[v.node].storages[st]
			prefix := fmt.Sprintf("vm-%d-", v.vmid)
			if !ok || store == nil || !strings.HasPrefix(vol, prefix) {
				continue
			}
			base := "base-" + strings.TrimPrefix(vol, "vm-")
			store.volumes[base] = store.volumes[vol]
			delete(store.volumes, vol)
			v.config[k] = strings.Replace(str, st+":"+vol, st+":"+base, 1)
		}
		return ""
	}), nil
}
