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
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// recording is one canned answer of go-proxmox's tests/mocks: a request
// path pattern and the JSON a real Proxmox VE version returned.
type recording struct {
	version, method string
	path            *regexp.Regexp
	status          int
	body            string
}

// recordings reads go-proxmox's per-version mocks (gock registrations in
// Go source: gock.New(URI).Get("^/path$")...Reply(200).JSON(`...`)) from
// the module cache, without running them.
func recordings(t *testing.T) []recording {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "github.com/luthermonson/go-proxmox").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	files, _ := filepath.Glob(filepath.Join(strings.TrimSpace(string(out)), "tests", "mocks", "pve*", "*.go"))
	var recs []recording
	for _, f := range files {
		file, err := parser.ParseFile(token.NewFileSet(), f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		version := filepath.Base(filepath.Dir(f))
		ast.Inspect(file, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || selector(call) != "JSON" || len(call.Args) != 1 {
				return true
			}
			rec := recording{version: version}
			if lit, ok := call.Args[0].(*ast.BasicLit); ok {
				rec.body, _ = strconv.Unquote(lit.Value)
			}
			for inner := receiver(call); inner != nil; inner = receiver(inner) {
				switch name := selector(inner); name {
				case "Reply":
					if lit, ok := inner.Args[0].(*ast.BasicLit); ok {
						rec.status, _ = strconv.Atoi(lit.Value)
					}
				case "Get", "Post", "Put", "Delete":
					if lit, ok := inner.Args[0].(*ast.BasicLit); ok {
						pattern, _ := strconv.Unquote(lit.Value)
						rec.method, rec.path = strings.ToUpper(name), regexp.MustCompile(pattern)
					}
				}
			}
			if rec.path != nil && rec.body != "" {
				recs = append(recs, rec)
			}
			return false
		})
	}
	if len(recs) < 100 {
		t.Fatalf("read %d recordings from %d files: the mocks moved?", len(recs), len(files))
	}
	return recs
}

func selector(c *ast.CallExpr) string {
	if s, ok := c.Fun.(*ast.SelectorExpr); ok {
		return s.Sel.Name
	}
	return ""
}

func receiver(c *ast.CallExpr) *ast.CallExpr {
	if s, ok := c.Fun.(*ast.SelectorExpr); ok {
		if inner, ok := s.X.(*ast.CallExpr); ok {
			return inner
		}
	}
	return nil
}

// kind is a JSON value's type as the decoder sees it.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "string"
	case float64:
		return "number"
	case bool:
		return "bool"
	case []any:
		return "array"
	}
	return "object"
}

// first is the value at a dotted path of a decoded body ("data", then
// object keys; an array is entered at its first element).
func first(v any, path string) (any, bool) {
	for _, k := range strings.Split(path, ".") {
		if a, ok := v.([]any); ok {
			if len(a) == 0 {
				return nil, false
			}
			v = a[0]
		}
		m, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = m[k]; !ok {
			return nil, false
		}
	}
	return v, true
}

// TestShapesMatchRecordings: for every endpoint the provider uses, the
// simulator's answer and the recorded answers of real Proxmox VE 7, 8 and
// 9 decode with go-proxmox into the same types, and each field the
// provider reads has, in the simulator's answer, a JSON type one of the
// recordings has.
func TestShapesMatchRecordings(t *testing.T) {
	recs := recordings(t)
	s, c := start(t)
	ctx := context.Background()
	// A running clone with the agent, for status, config and interfaces.
	tmpl, _ := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 101, Name: "shape", Full: true})
	if err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	vm := c.NodeRef("pve1").VirtualMachineRef(101)
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond) // the agent answers after AgentDelay
	for _, e := range []struct {
		sim, recorded string // the simulator's path; the recordings' path
		decode        func() any
		fields        []string
	}{
		{"/version", "/version", func() any { return &proxmox.Version{} }, []string{"data.version", "data.release"}},
		{"/nodes", "/nodes", func() any { return &proxmox.NodeStatuses{} }, []string{"data.node", "data.status", "data.id", "data.type"}},
		{"/nodes/pve1/status", "/nodes/node1/status", func() any { return &proxmox.Node{} }, []string{"data.pveversion", "data.cpuinfo", "data.memory"}},
		{"/nodes/pve1/storage", "/nodes/node1/storage", func() any { return &proxmox.Storages{} }, []string{"data.storage", "data.type", "data.content", "data.active", "data.enabled", "data.avail", "data.total"}},
		{"/nodes/pve1/storage/local/status", "/nodes/node1/storage/local/status", func() any { return &proxmox.Storage{} }, []string{"data.storage", "data.content", "data.active"}},
		{"/nodes/pve1/network", "/nodes/node1/network", func() any { return &[]*proxmox.NodeNetwork{} }, []string{"data.iface", "data.type", "data.active"}},
		{"/nodes/pve1/qemu/101/status/current", "/nodes/node1/qemu/101/status/current", func() any { return &proxmox.VirtualMachine{} },
			[]string{"data.vmid", "data.name", "data.status", "data.qmpstatus", "data.agent", "data.cpus", "data.maxmem", "data.uptime"}},
		{"/nodes/pve1/qemu/101/config", "/nodes/node1/qemu/100/config", func() any { return &proxmox.VirtualMachineConfig{} },
			[]string{"data.digest", "data.name", "data.cores", "data.memory", "data.sockets", "data.scsi0", "data.net0", "data.boot"}},
		{"/cluster/status", "/cluster/status", func() any { return &proxmox.Cluster{} }, []string{"data.type", "data.name", "data.id"}},
		{"/cluster/nextid", "/cluster/nextid", func() any { return new(string) }, []string{"data"}},
		{"/cluster/resources", "/cluster/resources", func() any { return &proxmox.ClusterResources{} }, []string{"data.id", "data.type", "data.node", "data.status"}},
		{"/nodes/pve1/qemu/101/agent/network-get-interfaces", "/nodes/node1/qemu/101/agent/network-get-interfaces", func() any { return &map[string]any{} },
			[]string{"data.result.name", "data.result.hardware-address", "data.result.ip-addresses.ip-address", "data.result.ip-addresses.ip-address-type", "data.result.ip-addresses.prefix"}},
		{"/nodes/pve1/tasks/" + string(task.UPID) + "/status", "/nodes/node1/tasks/UPID:node1:00000002:00000002:00000002:test:completed:root@pam:/status", func() any { return &proxmox.Task{} },
			[]string{"data.upid", "data.status", "data.exitstatus", "data.type", "data.id", "data.node", "data.user", "data.starttime"}},
	} {
		t.Run(e.sim, func(t *testing.T) {
			sameShape(t, simGet(t, s, e.sim), recorded(t, recs, "GET", e.recorded), e.decode, e.fields)
		})
	}
}

// recorded are the 200 answers recorded for method on a path matching
// the recorded pattern; the test stops without one.
func recorded(t *testing.T, recs []recording, method, path string) []recording {
	t.Helper()
	var matched []recording
	for _, r := range recs {
		if r.method == method && r.status == 200 && r.path.MatchString(path) {
			matched = append(matched, r)
		}
	}
	if len(matched) == 0 {
		t.Fatalf("no recording of %s %s", method, path)
	}
	return matched
}

// sameShape checks that go-proxmox decodes the simulator's body and every
// recorded one into decode()'s type, and that each field of fields is in
// the simulator's body with a kind some recording gives it.
func sameShape(t *testing.T, simBody string, matched []recording, decode func() any, fields []string) {
	t.Helper()
	for _, body := range append([]string{simBody}, bodies(matched)...) {
		var env struct{ Data json.RawMessage }
		if err := json.Unmarshal([]byte(body), &env); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(env.Data, decode()); err != nil {
			t.Errorf("go-proxmox cannot decode %.200s: %v", body, err)
		}
	}
	var sim any
	_ = json.Unmarshal([]byte(simBody), &sim)
	for _, f := range fields {
		sv, ok := first(sim, f)
		if !ok {
			t.Errorf("the simulator's answer lacks %s", f)
			continue
		}
		var seen []string
		for _, r := range matched {
			var rec any
			_ = json.Unmarshal([]byte(r.body), &rec)
			if rv, ok := first(rec, f); ok && rv != nil {
				seen = append(seen, r.version+":"+kind(rv))
				if kind(rv) == kind(sv) {
					seen = nil
					break
				}
			}
		}
		if len(seen) > 0 {
			t.Errorf("%s is a %s in the simulator, but %v in the recordings", f, kind(sv), seen)
		}
	}
}

func bodies(recs []recording) []string {
	var out []string
	for _, r := range recs {
		out = append(out, r.body)
	}
	return out
}

func simGet(t *testing.T, s *Simulator, path string) string {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, s.URL+path, nil)
	req.Header.Set("Authorization", fmt.Sprintf("PVEAPIToken=%s=%s", s.TokenID, s.Secret))
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s: %d %s", path, resp.StatusCode, body)
	}
	return string(body)
}

// TestImportShapesMatchRecordings: the POSTs that import an image and
// build a template (upload, download-url, create, template) answer, as
// in the recordings of real Proxmox VE, a UPID string of the same task
// type; storage content then lists volumes with the recordings' field
// types. (The recorded UPIDs are hand-made — sequential PIDs, "upload"
// as an imgcopy's ID where pve-storage passes none — so only their type
// is compared.)
func TestImportShapesMatchRecordings(t *testing.T) {
	recs := recordings(t)
	s, _ := startImport(t, "8.4.1")
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write(make([]byte, 1<<20))
	}))
	defer srv.Close()
	multipartBody := func(content, name string, data []byte) (string, io.Reader) {
		var b bytes.Buffer
		mw := multipart.NewWriter(&b)
		_ = mw.WriteField("content", content)
		fw, _ := mw.CreateFormFile("filename", name)
		_, _ = fw.Write(data)
		_ = mw.Close()
		return mw.FormDataContentType(), &b
	}
	form := func(kv ...string) (string, io.Reader) {
		v := url.Values{}
		for i := 0; i < len(kv); i += 2 {
			v.Set(kv[i], kv[i+1])
		}
		return "application/x-www-form-urlencoded", strings.NewReader(v.Encode())
	}
	for _, e := range []struct {
		sim, recorded string
		body          func() (string, io.Reader)
	}{
		{"/nodes/pve1/storage/local/upload", "/nodes/node1/storage/local/upload", func() (string, io.Reader) {
			return multipartBody("import", "disk.raw", make([]byte, 1<<20))
		}},
		{"/nodes/pve1/storage/local/download-url", "/nodes/node1/storage/local/download-url", func() (string, io.Reader) {
			return form("content", "iso", "filename", "seed.iso", "url", srv.URL+"/seed.iso")
		}},
		{"/nodes/pve1/qemu", "/nodes/node1/qemu", func() (string, io.Reader) {
			return form("vmid", "101", "name", "imp", "scsi0", "local-lvm:0,import-from=local:import/disk.raw", "net0", "virtio,bridge=vmbr0")
		}},
		{"/nodes/pve1/qemu/101/template", "/nodes/node1/qemu/101/template", func() (string, io.Reader) { return form() }},
	} {
		t.Run("POST "+e.sim, func(t *testing.T) {
			ct, body := e.body()
			simBody := simDo(t, s, http.MethodPost, e.sim, ct, body)
			matched := recorded(t, recs, "POST", e.recorded)
			simType := upidType(t, simBody)
			for _, r := range matched {
				if typ := upidType(t, r.body); typ != simType {
					t.Errorf("the simulator's task is a %s, %s recorded a %s", simType, r.version, typ)
				}
			}
			// Let the task end before the next step uses its result.
			var env struct{ Data string }
			_ = json.Unmarshal([]byte(simBody), &env)
			for i := 0; i < 200; i++ {
				var st struct{ Data struct{ Status string } }
				_ = json.Unmarshal([]byte(simGet(t, s, "/nodes/pve1/tasks/"+env.Data+"/status")), &st)
				if st.Data.Status == "stopped" {
					break
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
	t.Run("GET content", func(t *testing.T) {
		sameShape(t, simGet(t, s, "/nodes/pve1/storage/local/content"), recorded(t, recs, "GET", "/nodes/node1/storage/local/content"),
			func() any { return &[]*proxmox.StorageContent{} }, []string{"data.volid", "data.format", "data.size", "data.ctime", "data.content"})
	})
	var vol []string
	for _, v := range s.Volumes() {
		if strings.Contains(v, "101") || strings.Contains(v, "seed.iso") {
			vol = append(vol, v)
		}
	}
	if len(vol) != 2 || vol[0] != "pve1/local-lvm:base-101-disk-0" || vol[1] != "pve1/local:iso/seed.iso" {
		t.Errorf("volumes %v", vol)
	}
}

// upidType is the task type of the UPID a body's data holds.
func upidType(t *testing.T, body string) string {
	t.Helper()
	var env struct{ Data any }
	if err := json.Unmarshal([]byte(body), &env); err != nil {
		t.Fatal(err)
	}
	upid, ok := env.Data.(string)
	parts := strings.Split(upid, ":")
	if !ok || len(parts) < 7 || parts[0] != "UPID" {
		t.Fatalf("not a UPID: %s", body)
	}
	return parts[5]
}

func simDo(t *testing.T, s *Simulator, method, path, contentType string, body io.Reader) string {
	t.Helper()
	req, _ := http.NewRequest(method, s.URL+path, body)
	req.Header.Set("Authorization", fmt.Sprintf("PVEAPIToken=%s=%s", s.TokenID, s.Secret))
	req.Header.Set("Content-Type", contentType)
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
	}
	return string(out)
}
