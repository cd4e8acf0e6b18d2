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
// Package pvesim is a Proxmox VE API simulator: an HTTPS server speaking the
// parts of /api2/json that banlieue's Proxmox provider uses, with the real
// API's rules where the provider depends on them — API-token authentication,
// each endpoint's privilege checks on its ACL path (permissions.go), a task
// (UPID) for every mutating call that runs for a set delay and ends with
// exitstatus OK or an error text, VMIDs that clone refuses when taken
// and /cluster/nextid does not reserve, running VMs that cannot be deleted,
// locks while a clone runs, unknown nodes and storages refused, faults on
// demand (a node down, a kind of task failing). VMs take snapshots, with
// or without their memory, roll back to them and delete them, as
// qemu-server does (snapshot.go). Images come in as real
// PVE takes them (importing.go): uploads streamed to files on disk,
// download-url fetching a URL, a VM created with import-from, made a
// template and cloned. A VM's serial console is served as PVE's
// termproxy and vncwebsocket, to users logged in with a password
// (console.go, access.go), with a stand-in shell where the guest would be.
// It is what vcsim is to the
// vSphere provider: tests and "banlieue dev" run it in process; the
// shipped binary does not hold it.
package pvesim

import (
	"crypto/rand"
	"crypto/tls"
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/firestoned/banlieue/pkg/pki"
)

// Version is the Proxmox VE release the simulator answers as by default.
const Version = "8.2.4"

// Options shape a simulated cluster.
type Options struct {
	// Nodes of the cluster (default: pve1, pve2, pve3, each with storages
	// local (dir: iso, snippets, images) and local-lvm (lvmthin: images)
	// and bridges vmbr0, vmbr1).
	Nodes []NodeSpec
	// Templates to create (default: VMID 9000 "debian-12-cloud" on the
	// first node, one 8 GiB disk on local-lvm).
	Templates []TemplateSpec
	// TokenID is USER@REALM!TOKENID, Secret its secret (defaults
	// banlieue@pve!provider and a fixed UUID-like secret).
	TokenID, Secret string
	// TaskDelay is how long every task runs (default 50 ms).
	TaskDelay time.Duration
	// AgentDelay is how long after a start the guest agent answers with
	// addresses (default 200 ms).
	AgentDelay time.Duration
	// Version is the release it answers as (default Version); from 9 on,
	// the guest agent takes VM.GuestAgent.Audit instead of VM.Monitor.
	// Upload and download-url take import content from 8.3 (.ova files
	// alone), disk images (.qcow2, .raw, .vmdk) in it from 8.4; a storage
	// holds import content only if its StorageSpec lists it.
	Version string
	// ACL restricts the token to these grants (default: none, the token
	// may do everything, as root@pam).
	ACL []ACL
	// Users are the accounts that log in with a password (POST
	// /access/ticket) and then send the ticket as the PVEAuthCookie
	// cookie, with the CSRFPreventionToken header on writes: what the
	// serial console takes where PVE refuses API tokens (console.go).
	Users []User
	// ServingIPs are more addresses its serving certificate names, beside
	// 127.0.0.1 (where it listens): the address pods of a real node reach
	// it at (devenv.Env.ExposeToPods). With none, httptest's certificate.
	ServingIPs []net.IP
}

// User is a PVE user (USER@REALM) with its password and grants (nil:
// everything, as root@pam).
type User struct {
	ID, Password string
	ACL          []ACL
}

// NodeSpec is one node.
type NodeSpec struct {
	Name     string
	Storages []StorageSpec
	Bridges  []string
}

// StorageSpec is one storage of a node: type dir or lvmthin (or any
// other PVE type, behaving as dir), with its content types.
type StorageSpec struct {
	Name, Type string
	Content    []string
}

// TemplateSpec is a template VM.
type TemplateSpec struct {
	Node    string
	VMID    int
	Name    string
	Storage string
	DiskGiB int
}

// Simulator is a running simulated cluster.
type Simulator struct {
	// URL is the API's base, https://127.0.0.1:PORT/api2/json.
	URL string
	// CA is the PEM certificate the server presents (self-signed).
	CA []byte
	// TokenID and Secret are the credentials it accepts.
	TokenID, Secret string

	server *httptest.Server
	mu     sync.Mutex
	opts   Options
	nodes  map[string]*node
	vms    map[int]*vm
	tasks  map[string]*task
	// failing: task type -> error text the next such tasks end with.
	failing map[string]string
	// acl is the token's grants; nil: everything.
	acl    []ACL
	seq    int
	leases int
	// files holds what uploads and downloads put on storages (and the
	// uploads in flight, as pveproxy's /var/tmp/pveupload-*): a
	// per-simulator temporary directory, removed by Close.
	files string
	// stop cancels the downloads running when the simulator closes.
	stop chan struct{}
	// Requests counts requests by "METHOD /path-pattern", for tests.
	requests map[string]int
	// users by ID; caller is who makes the request being routed (nil:
	// the token), under mu.
	users  map[string]*User
	caller *identity
	// ticketKey signs auth and VNC tickets (console.go).
	ticketKey []byte
	// terms are the termproxies by port; serials the running VMs'
	// serial sockets by "VMID/serialN" (console.go).
	terms   map[int]*termproxy
	serials map[string]*serialPort
}

type node struct {
	name     string
	online   bool
	storages map[string]*storage
	bridges  []string
}

type storage struct {
	name, typ string
	content   []string
	// volumes by volume name (vm-101-disk-0, iso/seed.iso): size in bytes.
	volumes map[string]int64
	// paths are the files on disk of the volumes uploaded or downloaded
	// (iso/NAME, import/NAME, vztmpl/NAME), by volume name.
	paths map[string]string
}

type vm struct {
	vmid    int
	node    string
	config  map[string]any
	pending map[string]any
	// unplug are keys deleted while the VM ran that PVE cannot unplug
	// live (IDE and SATA drives, EFI and TPM state): gone at the next
	// start, "delete": 1 in GET pending until then.
	unplug   map[string]bool
	status   string // running, stopped
	paused   bool
	lock     string
	started  time.Time
	template bool
	// pool is the resource pool the VM was created in ("" for none).
	pool string
	// cloneTask is the clone filling this VM while lock is "clone".
	cloneTask string
	// boots counts cold starts (a resume from hibernation is none).
	boots int
	// ignoresShutdown: the guest does not answer ACPI.
	ignoresShutdown bool
	// snapshots are the VM's snapshots (snapshot.go); nil for none yet.
	snapshots *snapshots
}

// New starts a simulator on 127.0.0.1.
func New(o Options) *Simulator {
	defaults(&o)
	s := &Simulator{TokenID: o.TokenID, Secret: o.Secret, opts: o, acl: o.ACL, nodes: map[string]*node{}, vms: map[int]*vm{},
		tasks: map[string]*task{}, failing: map[string]string{}, requests: map[string]int{}, stop: make(chan struct{}),
		users: map[string]*User{}, terms: map[int]*termproxy{}, serials: map[string]*serialPort{}}
	s.ticketKey = make([]byte, 32)
	if _, err := rand.Read(s.ticketKey); err != nil {
		panic(fmt.Sprintf("pvesim: ticket key: %v", err))
	}
	for i := range o.Users {
		u := o.Users[i]
		s.users[u.ID] = &u
	}
	dir, err := os.MkdirTemp("", "pvesim-")
	if err != nil {
		panic(fmt.Sprintf("pvesim: temporary directory: %v", err))
	}
	s.files = dir
	for _, n := range o.Nodes {
		nd := &node{name: n.Name, online: true, storages: map[string]*storage{}, bridges: n.Bridges}
		for _, st := range n.Storages {
			nd.storages[st.Name] = &storage{name: st.Name, typ: st.Type, content: st.Content, volumes: map[string]int64{}, paths: map[string]string{}}
		}
		s.nodes[n.Name] = nd
	}
	for _, t := range o.Templates {
		s.addTemplate(t)
	}
	s.server = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.server.Listener.Close()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(fmt.Sprintf("pvesim: listen: %v", err))
	}
	s.server.Listener = l
	s.server.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	var ca []byte
	if len(o.ServingIPs) > 0 {
		cert, caPEM, err := pki.LoopbackServing("pvesim", o.ServingIPs)
		if err != nil {
			panic(fmt.Sprintf("pvesim: serving certificate: %v", err))
		}
		s.server.TLS.Certificates, ca = []tls.Certificate{cert}, caPEM
	}
	s.server.StartTLS()
	s.URL = s.server.URL + "/api2/json"
	s.CA = ca
	if s.CA == nil {
		s.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.server.Certificate().Raw})
	}
	return s
}

func defaults(o *Options) {
	if o.Version == "" {
		o.Version = Version
	}
	if len(o.Nodes) == 0 {
		for _, n := range []string{"pve1", "pve2", "pve3"} {
			o.Nodes = append(o.Nodes, NodeSpec{Name: n, Bridges: []string{"vmbr0", "vmbr1"}, Storages: []StorageSpec{
				{Name: "local", Type: "dir", Content: []string{"iso", "vztmpl", "backup", "snippets", "images"}},
				{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}},
			}})
		}
	}
	if o.Templates == nil {
		o.Templates = []TemplateSpec{{Node: o.Nodes[0].Name, VMID: 9000, Name: "debian-12-cloud", Storage: "local-lvm", DiskGiB: 8}}
	}
	if o.TokenID == "" {
		o.TokenID = "banlieue@pve!provider"
	}
	if o.Secret == "" {
		o.Secret = "5f0c2a4e-9b1d-4c37-8e21-7a6d3b9f0e15"
	}
	if o.TaskDelay == 0 {
		o.TaskDelay = 50 * time.Millisecond
	}
	if o.AgentDelay == 0 {
		o.AgentDelay = 200 * time.Millisecond
	}
}

func (s *Simulator) addTemplate(t TemplateSpec) {
	vol := fmt.Sprintf("base-%d-disk-0", t.VMID)
	s.nodes[t.Node].storages[t.Storage].volumes[vol] = int64(t.DiskGiB) << 30
	s.vms[t.VMID] = &vm{vmid: t.VMID, node: t.Node, status: "stopped", template: true, pending: map[string]any{}, config: map[string]any{
		"name": t.Name, "cores": 1, "sockets": 1, "memory": 1024, "ostype": "l26", "scsihw": "virtio-scsi-pci",
		"scsi0": fmt.Sprintf("%s:%s,size=%dG", t.Storage, vol, t.DiskGiB), "net0": "virtio=BC:24:11:00:00:01,bridge=vmbr0",
		"boot": "order=scsi0", "template": 1, "agent": "1",
	}}
}

// Close stops the server and its downloads and removes the files that
// uploads and downloads left.
func (s *Simulator) Close() {
	s.mu.Lock()
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	// The console sessions: the server forgets hijacked connections.
	for key, p := range s.serials {
		close(p.gone)
		delete(s.serials, key)
	}
	s.mu.Unlock()
	s.server.Close()
	_ = os.RemoveAll(s.files)
}

// Client is an HTTP client that trusts the simulator's certificate.
func (s *Simulator) Client() *http.Client { return s.server.Client() }

// SetNodeOnline takes a node down (its requests fail with 595, as when
// pveproxy cannot reach it) or brings it back.
func (s *Simulator) SetNodeOnline(name string, online bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n, ok := s.nodes[name]; ok {
		n.online = online
	}
}

// FailTasks makes every later task of type (qmclone, qmconfig, qmstart,
// qmdestroy, ...) end with exitstatus msg; an empty msg stops that.
func (s *Simulator) FailTasks(taskType, msg string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if msg == "" {
		delete(s.failing, taskType)
		return
	}
	s.failing[taskType] = msg
}

// SetACL replaces the token's grants (nil: everything).
func (s *Simulator) SetACL(acl []ACL) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acl = acl
}

// SetSecret rotates the token's secret: from now on only the new one is
// accepted, as after "pveum user token modify --regenerate".
func (s *Simulator) SetSecret(secret string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.Secret = secret
}

// SetTaskDelay changes how long later tasks run (a long clone to crash a
// provider in).
func (s *Simulator) SetTaskDelay(d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.opts.TaskDelay = d
}

// RunningTasks counts the tasks of type (qmclone, qmdestroy, ...) still running.
func (s *Simulator) RunningTasks(taskType string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick(time.Now())
	n := 0
	for _, t := range s.tasks {
		if t.typ == taskType && !t.done {
			n++
		}
	}
	return n
}

// VM is a simulated VM as tests read it.
type VM struct {
	VMID   int
	Node   string
	Name   string
	Status string
	// Paused: running but suspended (qmpstatus paused).
	Paused   bool
	Template bool
	Lock     string
	// Boots is how many times the guest booted: a start from hibernation
	// resumes it instead.
	Boots  int
	Config map[string]any
	// Volumes are the VM's disk volumes (STORAGE:NAME) and their sizes in GiB.
	Volumes map[string]int64
}

// VMs lists the VMs (templates included), by VMID.
func (s *Simulator) VMs() []VM {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []VM
	for _, v := range s.vms {
		c := map[string]any{}
		for k, val := range v.config {
			c[k] = val
		}
		name, _ := v.config["name"].(string)
		out = append(out, VM{VMID: v.vmid, Node: v.node, Name: name, Status: v.status, Paused: v.paused, Template: v.template, Lock: v.lock, Boots: v.boots, Config: c, Volumes: s.volumesOf(v)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].VMID < out[j].VMID })
	return out
}

// Volumes are every volume of every storage (NODE/STORAGE:NAME), for
// checking that nothing is left behind.
func (s *Simulator) Volumes() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for _, n := range s.nodes {
		for _, st := range n.storages {
			for vol := range st.volumes {
				out = append(out, n.name+"/"+st.name+":"+vol)
			}
		}
	}
	sort.Strings(out)
	return out
}

// IgnoreShutdown makes the guest of VM vmid ignore (or, false, answer)
// the ACPI shutdown request, as a hung guest or one without ACPI does.
func (s *Simulator) IgnoreShutdown(vmid int, ignore bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if v := s.vms[vmid]; v != nil {
		v.ignoresShutdown = ignore
	}
}

// Requests is how many requests each route served ("POST clone", ...).
func (s *Simulator) Requests() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int{}
	for k, v := range s.requests {
		out[k] = v
	}
	return out
}

// volumesOf lists the disks a VM's config names, with sizes in GiB.
func (s *Simulator) volumesOf(v *vm) map[string]int64 {
	out := map[string]int64{}
	for key, val := range v.config {
		str, ok := val.(string)
		if !ok || !isDiskKey(key) || strings.Contains(str, "media=cdrom") {
			continue
		}
		st, vol, ok := parseVolume(str)
		if !ok {
			continue
		}
		if n := s.nodes[v.node]; n != nil && n.storages[st] != nil {
			out[st+":"+vol] = n.storages[st].volumes[vol] >> 30
		}
	}
	return out
}

// isDiskKey tells a disk key of a config: scsiN, virtioN, sataN, ideN,
// efidisk0, tpmstate0.
func isDiskKey(k string) bool {
	for _, p := range []string{"scsi", "virtio", "sata", "ide", "efidisk", "tpmstate"} {
		if rest, ok := strings.CutPrefix(k, p); ok && rest != "" && strings.Trim(rest, "0123456789") == "" {
			return k != "scsihw"
		}
	}
	return false
}

// parseVolume splits "STORAGE:VOLUME,opts" into storage and volume.
func parseVolume(s string) (storageName, volume string, ok bool) {
	head, _, _ := strings.Cut(s, ",")
	st, vol, ok := strings.Cut(head, ":")
	return st, vol, ok && st != "" && vol != ""
}
