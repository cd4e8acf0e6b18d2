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
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"
)

// VM snapshots, as qemu-server's API2/Qemu.pm and pve-guest-common's
// AbstractConfig.pm take them:
//
//   - GET  snapshot: the snapshots and the "current" pseudo-entry (VM.Audit);
//   - POST snapshot: snapname, description, vmstate; a qmsnapshot task
//     (VM.Snapshot);
//   - GET  snapshot/NAME: its sub-resources (anyone);
//   - GET  snapshot/NAME/config (VM.Snapshot or VM.Snapshot.Rollback),
//     PUT  snapshot/NAME/config: description (VM.Snapshot);
//   - POST snapshot/NAME/rollback: start; a qmrollback task (VM.Snapshot
//     or VM.Snapshot.Rollback: either suffices, as in PVE);
//   - DELETE snapshot/NAME: force; a qmdelsnapshot task (VM.Snapshot).
//
// As in PVE, the API refuses only a malformed or reserved name before the
// task: a name already used, a VM locked by another task, a snapshot that
// does not exist are the task's failure (its exitstatus), not the
// request's. A snapshot is in the VM's config from its task's start, with
// snapstate "prepare" and the VM locked "snapshot"; its task's end
// commits it. A rollback stops a running VM first and leaves it stopped,
// unless the snapshot holds its memory (vmstate), which resumes it, or
// start=1 starts it.

// snapshot is one snapshot of a VM: the config (and disk sizes) it keeps.
type snapshot struct {
	name, description, parent string
	snaptime                  time.Time
	// vmstate is the volume ID of the saved memory ("" for none).
	vmstate string
	// snapstate is "prepare" while its create task runs, "delete" while
	// its delete task runs, "" otherwise.
	snapstate string
	config    map[string]any
	// sizes of the disk volumes (STORAGE:NAME) when it was taken.
	sizes map[string]int64
}

// snapshots are a VM's snapshots and its config's parent (the snapshot
// "current" descends from).
type snapshots struct {
	byName map[string]*snapshot
	parent string
}

func (v *vm) snaps() *snapshots {
	if v.snapshots == nil {
		v.snapshots = &snapshots{byName: map[string]*snapshot{}}
	}
	return v.snapshots
}

// pve-snapshot-name is a pve-configid: a letter, then letters, digits,
// '_' and '-' (at least two characters), 40 at most.
var snapName = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9_-]+$`)

func checkSnapName(name string) *apiError {
	switch {
	case name == "":
		return badParam("snapname", "property is missing and it is not optional")
	case len(name) > 40:
		return badParam("snapname", "value may only be 40 characters long")
	case !snapName.MatchString(name):
		return badParam("snapname", fmt.Sprintf("invalid format - invalid configuration ID '%s'", name))
	}
	return nil
}

// routeSnapshot serves qemu/VMID/snapshot[/NAME[/config|/rollback]].
func (s *Simulator) routeSnapshot(method string, v *vm, seg []string, p params) (string, any, *apiError) {
	path := vmPath(v.vmid)
	switch {
	case len(seg) == 0 && method == http.MethodGet:
		if err := s.need(path, "VM.Audit"); err != nil {
			return "qemu snapshot list", nil, err
		}
		return "qemu snapshot list", s.snapshotList(v), nil
	case len(seg) == 0 && method == http.MethodPost:
		if err := s.need(path, "VM.Snapshot"); err != nil {
			return "qemu snapshot", nil, err
		}
		data, err := s.createSnapshot(v, p)
		return "qemu snapshot", data, err
	}
	if len(seg) == 0 {
		return "unknown", nil, fail(http.StatusNotImplemented, "Method '%s /nodes/%s/qemu/%d/snapshot' not implemented", method, v.node, v.vmid)
	}
	name := seg[0]
	if err := checkSnapName(name); err != nil {
		return "qemu snapshot", nil, err
	}
	switch {
	case len(seg) == 1 && method == http.MethodGet:
		return "qemu snapshot index", []map[string]any{{"cmd": "rollback"}, {"cmd": "config"}}, nil
	case len(seg) == 1 && method == http.MethodDelete:
		if err := s.need(path, "VM.Snapshot"); err != nil {
			return "qemu snapshot delete", nil, err
		}
		return "qemu snapshot delete", s.deleteSnapshot(v, name, p), nil
	case len(seg) == 2 && seg[1] == "config" && method == http.MethodGet:
		if err := s.needAny(path, "VM.Snapshot", "VM.Snapshot.Rollback"); err != nil {
			return "qemu snapshot config", nil, err
		}
		data, err := s.snapshotConfig(v, name)
		return "qemu snapshot config", data, err
	case len(seg) == 2 && seg[1] == "config" && method == http.MethodPut:
		if err := s.need(path, "VM.Snapshot"); err != nil {
			return "qemu snapshot config PUT", nil, err
		}
		return "qemu snapshot config PUT", nil, s.describeSnapshot(v, name, p)
	case len(seg) == 2 && seg[1] == "rollback" && method == http.MethodPost:
		if err := s.needAny(path, "VM.Snapshot", "VM.Snapshot.Rollback"); err != nil {
			return "qemu snapshot rollback", nil, err
		}
		return "qemu snapshot rollback", s.rollback(v, name, p), nil
	}
	return "unknown", nil, fail(http.StatusNotImplemented, "Method '%s /nodes/%s/qemu/%d/snapshot/%s' not implemented", method, v.node, v.vmid, strings.Join(seg, "/"))
}

// snapshotList is GET snapshot: each snapshot (name, description,
// snaptime, vmstate 0/1, parent and snapstate when set), newest first
// (PVE's order is its hash's, none in particular), then "current".
func (s *Simulator) snapshotList(v *vm) []map[string]any {
	sn := v.snaps()
	var list []*snapshot
	for _, x := range sn.byName {
		list = append(list, x)
	}
	sort.Slice(list, func(i, j int) bool {
		if !list[i].snaptime.Equal(list[j].snaptime) {
			return list[i].snaptime.After(list[j].snaptime)
		}
		return list[i].name > list[j].name
	})
	out := []map[string]any{}
	for _, x := range list {
		e := map[string]any{"name": x.name, "description": x.description, "snaptime": x.snaptime.Unix(),
			"vmstate": map[bool]int{true: 1, false: 0}[x.vmstate != ""]}
		if x.parent != "" {
			e["parent"] = x.parent
		}
		if x.snapstate != "" {
			e["snapstate"] = x.snapstate
		}
		out = append(out, e)
	}
	current := map[string]any{"name": "current", "description": "You are here!", "digest": v.configView()["digest"],
		"running": map[bool]int{true: 1, false: 0}[v.status == "running"]}
	if sn.parent != "" {
		current["parent"] = sn.parent
	}
	return append(out, current)
}

// createSnapshot starts a qmsnapshot task. Its checks (a template, a
// lock, the name already used) are the task's, made as it starts; when
// they pass, the snapshot is in the config at once (snapstate prepare,
// the VM locked "snapshot"), with the memory of a running VM asked to
// keep it, and the task's end commits it.
func (s *Simulator) createSnapshot(v *vm, p params) (any, *apiError) {
	name := p["snapname"]
	if err := checkSnapName(name); err != nil {
		return nil, err
	}
	if name == "current" || strings.EqualFold(name, "pending") {
		return nil, fail(http.StatusInternalServerError, "unable to use snapshot name '%s' (reserved name)", name)
	}
	id := strconv.Itoa(v.vmid)
	sn := v.snaps()
	var refusal string
	switch {
	case v.template:
		refusal = "you can't take a snapshot if it's a template"
	case v.lock != "":
		refusal = fmt.Sprintf("VM is locked (%s)", v.lock)
	case sn.byName[name] != nil:
		refusal = fmt.Sprintf("snapshot name '%s' already used", name)
	}
	if refusal != "" {
		return s.startTask(v.node, "qmsnapshot", id, func() string { return refusal }), nil
	}
	snap := &snapshot{name: name, description: p["description"], parent: sn.parent, snaptime: time.Now(), snapstate: "prepare",
		config: snapshotConfigOf(v.config), sizes: s.volumesOf(v)}
	if p["vmstate"] == "1" && v.status == "running" {
		snap.vmstate = s.saveSnapshotState(v, name)
		snap.config["runningmachine"] = "pc-i440fx-8.1+pve0"
	}
	sn.byName[name] = snap
	v.lock = "snapshot"
	upid := s.startTask(v.node, "qmsnapshot", id, func() string {
		if sn.byName[name] != snap {
			return fmt.Sprintf("snapshot '%s' vanished", name)
		}
		snap.snapstate = ""
		sn.parent = name
		if v.lock == "snapshot" {
			v.lock = ""
		}
		return ""
	})
	// A failed create deletes what it prepared (snapshot_create's
	// cleanup) and unlocks the VM.
	s.tasks[upid].undo = func() {
		if sn.byName[name] == snap {
			s.dropVolume(v, snap.vmstate)
			delete(sn.byName, name)
		}
		if v.lock == "snapshot" {
			v.lock = ""
		}
	}
	return upid, nil
}

// snapshotConfigOf is what a snapshot keeps of a config: everything but
// the description, a hibernated VM's vmstate and unused volumes
// (__snapshot_copy_config).
func snapshotConfigOf(cfg map[string]any) map[string]any {
	out := map[string]any{}
	for k, val := range cfg {
		if k == "description" || k == "vmstate" || strings.HasPrefix(k, "unused") {
			continue
		}
		out[k] = val
	}
	return out
}

// saveSnapshotState writes a running VM's memory to vm-VMID-state-NAME,
// on the storage of its first disk (pvesim's stand-in for PVE's
// vmstatestorage choice), and returns its volume ID.
func (s *Simulator) saveSnapshotState(v *vm, name string) string {
	for _, k := range sortedKeys(v.config) {
		str, ok := v.config[k].(string)
		if !ok || !isDiskKey(k) || strings.Contains(str, "media=cdrom") {
			continue
		}
		storageName, _, _ := parseVolume(str)
		st := s.nodes[v.node].storages[storageName]
		if st == nil {
			continue
		}
		vol := fmt.Sprintf("vm-%d-state-%s", v.vmid, name)
		st.volumes[vol] = v.memoryMiB() << 20
		return storageName + ":" + vol
	}
	return ""
}

// dropVolume deletes a volume (STORAGE:NAME) of the VM's node.
func (s *Simulator) dropVolume(v *vm, volid string) {
	if storageName, vol, ok := parseVolume(volid); ok {
		if st := s.nodes[v.node].storages[storageName]; st != nil {
			delete(st.volumes, vol)
		}
	}
}

// dropSnapshots deletes a destroyed VM's snapshots and their memory.
func (s *Simulator) dropSnapshots(v *vm) {
	if v.snapshots == nil {
		return
	}
	for _, x := range v.snapshots.byName {
		s.dropVolume(v, x.vmstate)
	}
	v.snapshots = nil
}

// snapshotConfig is GET snapshot/NAME/config: the config it keeps, with
// its own description, snaptime, parent, vmstate and snapstate.
func (s *Simulator) snapshotConfig(v *vm, name string) (any, *apiError) {
	x := v.snaps().byName[name]
	if x == nil {
		return nil, fail(http.StatusInternalServerError, "snapshot '%s' does not exist", name)
	}
	out := map[string]any{}
	for k, val := range x.config {
		out[k] = val
	}
	out["snaptime"] = x.snaptime.Unix()
	if x.description != "" {
		out["description"] = x.description
	}
	if x.parent != "" {
		out["parent"] = x.parent
	}
	if x.vmstate != "" {
		out["vmstate"] = x.vmstate
	}
	if x.snapstate != "" {
		out["snapstate"] = x.snapstate
	}
	return out, nil
}

// describeSnapshot is PUT snapshot/NAME/config: a new description.
func (s *Simulator) describeSnapshot(v *vm, name string, p params) *apiError {
	d, ok := p["description"]
	if !ok {
		return nil
	}
	if err := locked(v); err != nil {
		return err
	}
	x := v.snaps().byName[name]
	if x == nil {
		return fail(http.StatusInternalServerError, "snapshot '%s' does not exist", name)
	}
	x.description = d
	return nil
}

// rollback starts a qmrollback task. As it starts, it checks the snapshot
// (there, complete) and the lock, locks the VM "rollback" and stops it
// when running; its end puts the snapshot's config (keeping the VM's
// description and unused volumes; disks the snapshot lacks become
// unused) and disk sizes back and makes the snapshot the parent, then
// resumes the VM from the snapshot's memory, or starts it with start=1.
func (s *Simulator) rollback(v *vm, name string, p params) any {
	id := strconv.Itoa(v.vmid)
	sn := v.snaps()
	snap := sn.byName[name]
	var refusal string
	switch {
	case v.template:
		refusal = "you can't rollback if vm is a template"
	case snap == nil:
		refusal = fmt.Sprintf("snapshot '%s' does not exist", name)
	case snap.snapstate != "":
		refusal = fmt.Sprintf("unable to rollback to incomplete snapshot (snapstate = %s)", snap.snapstate)
	case v.lock != "":
		refusal = fmt.Sprintf("VM is locked (%s)", v.lock)
	}
	if refusal != "" {
		return s.startTask(v.node, "qmrollback", id, func() string { return refusal })
	}
	if v.status == "running" {
		v.status, v.paused = "stopped", false
		s.dropSerials(v.vmid)
	}
	v.lock = "rollback"
	start := p["start"] == "1"
	upid := s.startTask(v.node, "qmrollback", id, func() string {
		if sn.byName[name] != snap {
			return fmt.Sprintf("snapshot '%s' does not exist", name)
		}
		cfg := map[string]any{}
		for k, val := range snap.config {
			if k != "runningmachine" {
				cfg[k] = val
			}
		}
		var unused []string
		for k, val := range v.config {
			str, ok := val.(string)
			switch {
			case k == "description" || strings.HasPrefix(k, "unused"):
				cfg[k] = val
			case ok && isDiskKey(k) && !strings.Contains(str, "media=cdrom") && !sameVolume(snap.config, str):
				head, _, _ := strings.Cut(str, ",")
				unused = append(unused, head)
			}
		}
		sort.Strings(unused)
		for _, vol := range unused {
			for i := 0; ; i++ {
				if _, taken := cfg[fmt.Sprintf("unused%d", i)]; !taken {
					cfg[fmt.Sprintf("unused%d", i)] = vol
					break
				}
			}
		}
		for volid, gib := range snap.sizes {
			if storageName, vol, ok := parseVolume(volid); ok {
				if st := s.nodes[v.node].storages[storageName]; st != nil {
					if _, exists := st.volumes[vol]; exists {
						st.volumes[vol] = gib << 30
					}
				}
			}
		}
		v.config, v.pending, v.unplug = cfg, map[string]any{}, nil
		sn.parent = name
		v.lock = ""
		switch {
		case snap.vmstate != "":
			// Resumed where it was: the guest (and its agent) already up.
			v.status, v.paused, v.started = "running", false, time.Now().Add(-s.opts.AgentDelay)
		case start:
			v.status, v.paused, v.started = "running", false, time.Now()
			v.boots++
		}
		return ""
	})
	s.tasks[upid].undo = func() {
		if v.lock == "rollback" {
			v.lock = ""
		}
	}
	return upid
}

// sameVolume: cfg has a disk on the volume of value (STORAGE:NAME,...).
func sameVolume(cfg map[string]any, value string) bool {
	want, _, _ := strings.Cut(value, ",")
	for k, val := range cfg {
		if str, ok := val.(string); ok && isDiskKey(k) {
			if head, _, _ := strings.Cut(str, ","); head == want {
				return true
			}
		}
	}
	return false
}

// deleteSnapshot starts a qmdelsnapshot task. As it starts, it checks
// the snapshot and the lock, locks the VM "snapshot-delete" and marks the
// snapshot snapstate delete; its end removes it and its memory, its
// children (and "current") descending from its parent instead.
func (s *Simulator) deleteSnapshot(v *vm, name string, p params) any {
	id := strconv.Itoa(v.vmid)
	sn := v.snaps()
	snap := sn.byName[name]
	var refusal string
	switch {
	case snap == nil:
		refusal = fmt.Sprintf("snapshot '%s' does not exist", name)
	case v.lock != "" && p["force"] != "1":
		refusal = fmt.Sprintf("VM is locked (%s)", v.lock)
	}
	if refusal != "" {
		return s.startTask(v.node, "qmdelsnapshot", id, func() string { return refusal })
	}
	snap.snapstate = "delete"
	v.lock = "snapshot-delete"
	upid := s.startTask(v.node, "qmdelsnapshot", id, func() string {
		if sn.byName[name] == snap {
			for _, x := range sn.byName {
				if x.parent == name {
					x.parent = snap.parent
				}
			}
			if sn.parent == name {
				sn.parent = snap.parent
			}
			s.dropVolume(v, snap.vmstate)
			delete(sn.byName, name)
		}
		if v.lock == "snapshot-delete" {
			v.lock = ""
		}
		return ""
	})
	s.tasks[upid].undo = func() {
		if v.lock == "snapshot-delete" {
			v.lock = ""
		}
	}
	return upid
}

// Snapshot is a VM's snapshot as tests read it.
type Snapshot struct {
	Name, Description, Parent string
	// Memory: it holds the VM's memory (vmstate).
	Memory bool
	// State is "prepare" while its create task runs, "delete" while its
	// delete task runs, "" when complete.
	State string
	// Config is the VM config it keeps.
	Config map[string]any
}

// Snapshots lists VM vmid's snapshots, newest first (nil for no VM).
func (s *Simulator) Snapshots(vmid int) []Snapshot {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.tick(time.Now())
	v := s.vms[vmid]
	if v == nil {
		return nil
	}
	var out []Snapshot
	for _, e := range s.snapshotList(v) {
		if e["name"] == "current" {
			continue
		}
		x := v.snapshots.byName[e["name"].(string)]
		cfg := map[string]any{}
		for k, val := range x.config {
			cfg[k] = val
		}
		out = append(out, Snapshot{Name: x.name, Description: x.description, Parent: x.parent, Memory: x.vmstate != "", State: x.snapstate, Config: cfg})
	}
	return out
}
