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
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"
)

// apiError is a refusal: PVE's status code and message (and, for 400,
// the per-parameter errors).
type apiError struct {
	code   int
	msg    string
	params map[string]string
}

func (e *apiError) Error() string { return e.msg }

func fail(code int, format string, args ...any) *apiError {
	return &apiError{code: code, msg: fmt.Sprintf(format, args...)}
}

func badParam(name, msg string) *apiError {
	return &apiError{code: http.StatusBadRequest, msg: "Parameter verification failed.", params: map[string]string{name: msg}}
}

// serve authenticates, completes the tasks due, and routes.
func (s *Simulator) serve(w http.ResponseWriter, r *http.Request) {
	path, ok := strings.CutPrefix(r.URL.Path, "/api2/json/")
	if !ok {
		write(w, nil, fail(http.StatusNotImplemented, "Method '%s %s' not implemented", r.Method, r.URL.Path))
		return
	}
	if path == "access/ticket" && r.Method == http.MethodPost {
		// The login: open to the world, as in PVE.
		p, err := s.readParams(r)
		if err != nil {
			write(w, nil, fail(http.StatusBadRequest, "%v", err))
			return
		}
		data, aerr := s.login(p)
		write(w, data, aerr)
		return
	}
	who := s.authenticate(r)
	if who == nil {
		// pveproxy's answer to a missing or wrong token or ticket.
		write(w, nil, fail(http.StatusUnauthorized, "authentication failure"))
		return
	}
	if who.user != nil && r.Method != http.MethodGet && !s.validCSRF(who.id, r.Header.Get("CSRFPreventionToken")) {
		// A ticket's writes need the CSRF token that came with it.
		write(w, nil, fail(http.StatusUnauthorized, "Permission denied - invalid csrf token"))
		return
	}
	// An upload's file is on disk before the handler runs, as pveproxy
	// has it in /var/tmp/pveupload-* first; unless a task took it over,
	// it goes when the request ends.
	params, err := s.readParams(r)
	defer params.dropUpload()
	if err != nil {
		write(w, nil, fail(http.StatusBadRequest, "%v", err))
		return
	}
	seg := strings.Split(strings.TrimSuffix(path, "/"), "/")
	if len(seg) == 5 && seg[0] == "nodes" && seg[2] == "qemu" && seg[4] == "vncwebsocket" && r.Method == http.MethodGet {
		// A websocket outlives the request's hold of s.mu.
		vmid, err := strconv.Atoi(seg[3])
		if err != nil {
			write(w, nil, badParam("vmid", "type check ('integer') failed - got '"+seg[3]+"'"))
			return
		}
		s.vncWebsocket(w, r, who, seg[1], vmid, params)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caller = who
	defer func() { s.caller = nil }()
	s.tick(time.Now())
	route, data, aerr := s.route(r.Method, strings.Split(strings.TrimSuffix(path, "/"), "/"), params)
	s.requests[r.Method+" "+route]++
	write(w, data, aerr)
}

// identity is who a request authenticated as: the token (user nil) or a
// user by its ticket.
type identity struct {
	id   string
	user *User
}

// authenticate reads the API token, else the PVEAuthCookie ticket; nil
// when neither holds.
func (s *Simulator) authenticate(r *http.Request) *identity {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v, ok := strings.CutPrefix(r.Header.Get("Authorization"), "PVEAPIToken="); ok {
		i := strings.LastIndex(v, "=")
		if i > 0 && v[:i] == s.TokenID && v[i+1:] == s.Secret {
			return &identity{id: s.TokenID}
		}
		return nil
	}
	if c, err := r.Cookie("PVEAuthCookie"); err == nil {
		if u := s.ticketUser(c.Value); u != nil {
			return &identity{id: u.ID, user: u}
		}
	}
	return nil
}

// callerID is the authid the request being routed runs as.
func (s *Simulator) callerID() string {
	if s.caller != nil {
		return s.caller.id
	}
	return s.TokenID
}

// write answers {"data": ...}, or the error with its status (the message
// also in "message": Go's server cannot put it in the reason phrase, where
// pveproxy does; clients read either).
func write(w http.ResponseWriter, data any, err *apiError) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	// PVE's JSON leaves <, > and & as they are.
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	if err != nil {
		body := map[string]any{"data": nil, "message": err.msg + "\n"}
		if err.params != nil {
			body["errors"] = err.params
		}
		w.WriteHeader(err.code)
		_ = enc.Encode(body)
		return
	}
	_ = enc.Encode(map[string]any{"data": data})
}

// params are a request's arguments: query, JSON body, or form.
type params map[string]string

func (s *Simulator) readParams(r *http.Request) (params, error) {
	p := params{}
	for k, v := range r.URL.Query() {
		p[k] = v[0]
	}
	ct, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	switch ct {
	case "application/json":
		body, err := io.ReadAll(r.Body)
		if err != nil || len(body) == 0 {
			return p, err
		}
		var m map[string]any
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("invalid JSON body: %v", err)
		}
		for k, v := range m {
			switch x := v.(type) {
			case nil:
			case string:
				p[k] = x
			case bool:
				p[k] = map[bool]string{true: "1", false: "0"}[x]
			case float64:
				p[k] = strconv.FormatFloat(x, 'f', -1, 64)
			default:
				b, _ := json.Marshal(x)
				p[k] = string(b)
			}
		}
	case "multipart/form-data":
		if err := s.readMultipart(r, p); err != nil {
			return p, err
		}
	case "application/x-www-form-urlencoded":
		if err := r.ParseForm(); err != nil {
			return nil, err
		}
		for k, v := range r.PostForm {
			p[k] = v[0]
		}
	}
	return p, nil
}

// route dispatches a request; it returns the route's name (for counting).
func (s *Simulator) route(method string, seg []string, p params) (string, any, *apiError) {
	get := method == http.MethodGet
	switch {
	case len(seg) == 1 && seg[0] == "version" && get:
		return "version", map[string]any{"version": s.opts.Version, "release": release(s.opts.Version), "repoid": "faa83925c9641325"}, nil
	case len(seg) == 2 && seg[0] == "cluster" && get:
		switch seg[1] {
		case "status":
			return "cluster status", s.clusterStatus(), nil
		case "nextid":
			data, err := s.nextID(p)
			return "nextid", data, err
		case "resources":
			return "resources", s.resources(p["type"]), nil
		}
	case len(seg) == 1 && seg[0] == "nodes" && get:
		return "nodes", s.nodeList(), nil
	case len(seg) >= 3 && seg[0] == "nodes":
		n, err := s.onlineNode(seg[1])
		if err != nil {
			return "node " + seg[2], nil, err
		}
		return s.routeNode(method, n, seg[2:], p)
	}
	return "unknown", nil, fail(http.StatusNotImplemented, "Method '%s /%s' not implemented", method, strings.Join(seg, "/"))
}

func (s *Simulator) routeNode(method string, n *node, seg []string, p params) (string, any, *apiError) {
	get := method == http.MethodGet
	switch {
	case len(seg) == 1 && seg[0] == "status" && get:
		if err := s.need("/nodes/"+n.name, "Sys.Audit"); err != nil {
			return "node status", nil, err
		}
		return "node status", nodeStatus(n, s.opts.Version), nil
	case len(seg) == 1 && seg[0] == "network" && get:
		return "network", networks(n), nil
	case len(seg) == 1 && seg[0] == "storage" && get:
		return "storages", s.storages(n), nil
	case len(seg) >= 3 && seg[0] == "storage":
		st, ok := n.storages[seg[1]]
		if !ok {
			return "storage", nil, fail(http.StatusInternalServerError, "storage '%s' does not exist", seg[1])
		}
		return s.routeStorage(method, n, st, seg[2:], p)
	case len(seg) == 1 && seg[0] == "qemu" && get:
		return "qemu list", s.qemuList(n), nil
	case len(seg) == 1 && seg[0] == "qemu" && method == http.MethodPost:
		data, err := s.createVM(n, p)
		return "qemu create", data, err
	case len(seg) >= 2 && seg[0] == "qemu":
		id, err := strconv.Atoi(seg[1])
		if err != nil {
			return "qemu", nil, badParam("vmid", "type check ('integer') failed - got '"+seg[1]+"'")
		}
		v, ok := s.vms[id]
		if !ok || v.node != n.name {
			return "qemu", nil, fail(http.StatusInternalServerError, "Configuration file 'nodes/%s/qemu-server/%d.conf' does not exist", n.name, id)
		}
		return s.routeVM(method, n, v, seg[2:], p)
	case len(seg) == 3 && seg[0] == "tasks" && get:
		t, ok := s.tasks[seg[1]]
		if !ok || t.node != n.name {
			return "task", nil, fail(http.StatusInternalServerError, "no such task")
		}
		switch seg[2] {
		case "status":
			return "task status", t.status(), nil
		case "log":
			return "task log", t.log(), nil
		}
	}
	return "unknown", nil, fail(http.StatusNotImplemented, "Method '%s /nodes/%s/%s' not implemented", method, n.name, strings.Join(seg, "/"))
}

func (s *Simulator) routeStorage(method string, n *node, st *storage, seg []string, p params) (string, any, *apiError) {
	switch {
	case len(seg) == 1 && seg[0] == "status" && method == http.MethodGet:
		if err := s.auditStorage(st.name); err != nil {
			return "storage status", nil, err
		}
		return "storage status", s.storageEntry(st), nil
	case len(seg) == 1 && seg[0] == "content" && method == http.MethodGet:
		if err := s.auditStorage(st.name); err != nil {
			return "storage content", nil, err
		}
		return "storage content", st.contentList(p["content"]), nil
	case len(seg) >= 2 && seg[0] == "content" && method == http.MethodDelete:
		// Any volume but a VM's own backup takes Datastore.Allocate.
		if err := s.need(storagePath(st.name), "Datastore.Allocate"); err != nil {
			return "storage delete", nil, err
		}
		// A volume ID holds a slash (local:iso/seed.iso), as in the path.
		vol := strings.TrimPrefix(strings.Join(seg[1:], "/"), st.name+":")
		if _, ok := st.volumes[vol]; !ok {
			return "storage delete", nil, fail(http.StatusInternalServerError, "volume '%s:%s' does not exist", st.name, vol)
		}
		return "storage delete", s.startTask(n.name, "imgdel", st.name, func() string {
			if path := st.paths[vol]; path != "" {
				_ = os.Remove(path)
				delete(st.paths, vol)
			}
			delete(st.volumes, vol)
			return ""
		}), nil
	case len(seg) == 1 && seg[0] == "upload" && method == http.MethodPost:
		if err := s.need(storagePath(st.name), "Datastore.AllocateTemplate"); err != nil {
			return "upload", nil, err
		}
		data, err := s.upload(n, st, p)
		return "upload", data, err
	case len(seg) == 1 && seg[0] == "download-url" && method == http.MethodPost:
		if err := s.downloadPermission(n, st); err != nil {
			return "download-url", nil, err
		}
		data, err := s.downloadURL(n, st, p)
		return "download-url", data, err
	}
	return "unknown", nil, fail(http.StatusNotImplemented, "Method '%s' not implemented", method)
}

func (s *Simulator) routeVM(method string, n *node, v *vm, seg []string, p params) (string, any, *apiError) {
	if err := s.vmPermission(method, v, seg); err != nil {
		return "qemu " + strings.Join(seg, " "), nil, err
	}
	switch {
	case len(seg) == 0 && method == http.MethodDelete:
		data, err := s.destroy(v, p)
		return "qemu delete", data, err
	case len(seg) == 2 && seg[0] == "status" && seg[1] == "current" && method == http.MethodGet:
		return "qemu status", s.vmStatus(v), nil
	case len(seg) == 2 && seg[0] == "status" && method == http.MethodPost:
		data, err := s.power(v, seg[1], p)
		return "qemu " + seg[1], data, err
	case len(seg) == 1 && seg[0] == "config" && method == http.MethodGet:
		return "qemu config", v.configView(), nil
	case len(seg) == 1 && seg[0] == "pending" && method == http.MethodGet:
		return "qemu pending", v.pendingView(), nil
	case len(seg) == 1 && seg[0] == "config" && (method == http.MethodPost || method == http.MethodPut):
		data, err := s.configure(v, p, method == http.MethodPost)
		return "qemu config " + method, data, err
	case len(seg) == 1 && seg[0] == "clone" && method == http.MethodPost:
		data, err := s.clone(v, p)
		return "qemu clone", data, err
	case len(seg) == 1 && seg[0] == "template" && method == http.MethodPost:
		data, err := s.makeTemplate(v, p)
		return "qemu template", data, err
	case len(seg) == 1 && seg[0] == "termproxy" && method == http.MethodPost:
		data, err := s.startTermproxy(v, p)
		return "qemu termproxy", data, err
	case len(seg) == 1 && seg[0] == "resize" && method == http.MethodPut:
		data, err := s.resize(v, p)
		return "qemu resize", data, err
	case len(seg) >= 1 && seg[0] == "snapshot":
		return s.routeSnapshot(method, v, seg[1:], p)
	case len(seg) == 2 && seg[0] == "agent" && seg[1] == "network-get-interfaces" && method == http.MethodGet:
		data, err := s.agentInterfaces(v)
		return "agent interfaces", data, err
	}
	return "unknown", nil, fail(http.StatusNotImplemented, "Method '%s /nodes/%s/qemu/%d/%s' not implemented", method, n.name, v.vmid, strings.Join(seg, "/"))
}

// onlineNode is a known node pveproxy can reach.
func (s *Simulator) onlineNode(name string) (*node, *apiError) {
	n, ok := s.nodes[name]
	if !ok {
		return nil, fail(http.StatusInternalServerError, "hostname lookup '%s' failed - failed to get address info for: %s: Name or service not known", name, name)
	}
	if !n.online {
		return nil, fail(595, "Connection refused")
	}
	return n, nil
}

// release is a version's major.minor ("8.2" of "8.2.4").
func release(version string) string {
	if i := strings.LastIndex(version, "."); strings.Count(version, ".") > 1 {
		return version[:i]
	}
	return version
}

// vmPermission makes the declarative checks of a VM's endpoints (those
// that depend on the parameters are in clone, configure and resize).
func (s *Simulator) vmPermission(method string, v *vm, seg []string) *apiError {
	path := vmPath(v.vmid)
	switch {
	case len(seg) == 0 && method == http.MethodDelete:
		return s.need(path, "VM.Allocate")
	case len(seg) == 1 && seg[0] == "template" && method == http.MethodPost:
		return s.need(path, "VM.Allocate")
	case len(seg) >= 1 && seg[0] == "status" && method == http.MethodPost:
		return s.need(path, "VM.PowerMgmt")
	case len(seg) >= 1 && method == http.MethodGet && (seg[0] == "status" || seg[0] == "config" || seg[0] == "pending"):
		return s.need(path, "VM.Audit")
	case len(seg) >= 1 && seg[0] == "agent":
		return s.need(path, s.agentPrivilege())
	case len(seg) == 1 && seg[0] == "termproxy":
		return s.need(path, "VM.Console")
	}
	return nil
}
