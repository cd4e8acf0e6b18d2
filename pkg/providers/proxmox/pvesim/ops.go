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

// locked refuses changes to a VM a task holds.
func locked(v *vm) *apiError {
	if v.lock != "" {
		return fail(http.StatusInternalServerError, "VM is locked (%s)", v.lock)
	}
	return nil
}

// clone copies v (a template: linked or full; a VM: full only) into newid
// on target. The new VM exists at once, locked, as on a real cluster; the
// task fills it and unlocks it.
func (s *Simulator) clone(v *vm, p params) (any, *apiError) {
	newid, err := strconv.Atoi(p["newid"])
	if err != nil || newid < 100 {
		return nil, badParam("newid", "value must be at least 100")
	}
	if err := s.clonePermission(v, newid, p["storage"]); err != nil {
		return nil, err
	}
	if _, used := s.vms[newid]; used {
		return nil, fail(http.StatusInternalServerError, "unable to create VM %d: config file already exists", newid)
	}
	if err := locked(v); err != nil {
		return nil, err
	}
	target := v.node
	if t := p["target"]; t != "" {
		n, aerr := s.onlineNode(t)
		if aerr != nil {
			return nil, aerr
		}
		target = n.name
	}
	full := p["full"] == "1" || !v.template
	if !full && target != v.node {
		return nil, fail(http.StatusInternalServerError, "Linked clone feature for VM %d is not available on another node", v.vmid)
	}
	if !v.template && p["full"] == "0" {
		return nil, fail(http.StatusInternalServerError, "Linked clone feature is not supported for a VM that is not a template")
	}
	storageName := p["storage"]
	if storageName != "" {
		st, ok := s.nodes[target].storages[storageName]
		if !ok {
			return nil, fail(http.StatusInternalServerError, "storage '%s' does not exist", storageName)
		}
		if !st.has("images") {
			return nil, fail(http.StatusInternalServerError, "storage '%s' does not support vm images", storageName)
		}
	}
	cfg := map[string]any{}
	for k, val := range v.config {
		if k != "template" {
			cfg[k] = val
		}
	}
	if name := p["name"]; name != "" {
		cfg["name"] = name
	}
	if d, ok := p["description"]; ok {
		cfg["description"] = d
	}
	// A new MAC per NIC, as PVE gives clones.
	for k, val := range cfg {
		if str, ok := val.(string); ok && strings.HasPrefix(k, "net") {
			cfg[k] = macRe.ReplaceAllString(str, "${1}"+mac(newid, k))
		}
	}
	nv := &vm{vmid: newid, node: target, config: cfg, pending: map[string]any{}, status: "stopped", lock: "clone"}
	s.vms[newid] = nv
	src := v
	upid := s.startTask(v.node, "qmclone", strconv.Itoa(v.vmid), func() string {
		if _, ok := s.vms[newid]; !ok {
			return "clone target vanished"
		}
		s.copyDisks(src, nv, storageName)
		nv.lock, nv.cloneTask = "", ""
		return ""
	})
	nv.cloneTask = upid
	return upid, nil
}

var macRe = regexp.MustCompile(`((?:virtio|e1000|vmxnet3|rtl8139)=)[0-9A-Fa-f:]{17}`)

func mac(vmid int, key string) string {
	idx, _ := strconv.Atoi(strings.TrimPrefix(key, "net"))
	return fmt.Sprintf("BC:24:11:%02X:%02X:%02X", (vmid>>8)&0xff, vmid&0xff, idx)
}

// copyDisks gives the clone its own volumes of the source's sizes.
func (s *Simulator) copyDisks(src, dst *vm, storageName string) {
	n := 0
	for _, key := range sortedKeys(dst.config) {
		str, ok := dst.config[key].(string)
		if !ok || !isDiskKey(key) || strings.Contains(str, "media=cdrom") {
			continue
		}
		st, vol, ok := parseVolume(str)
		if !ok {
			continue
		}
		size := s.nodes[src.node].storages[st].volumes[vol]
		if storageName != "" {
			st = storageName
		}
		newVol := fmt.Sprintf("vm-%d-disk-%d", dst.vmid, n)
		n++
		s.nodes[dst.node].storages[st].volumes[newVol] = size
		_, opts, _ := strings.Cut(str, ",")
		dst.config[key] = st + ":" + newVol + "," + opts
	}
}

func sortedKeys(m map[string]any) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Drives a running VM cannot lose: qemu-server does not unplug them live
// (vmconfig_hotplug_pending), so deleting one stays pending. A CD-ROM's
// medium, ide2=none,media=cdrom included, changes live. A serial port
// is no drive but is not unplugged live either.
var coldDrive = regexp.MustCompile(`^(efidisk|ide|sata|tpmstate|serial)\d+$`)

// Keys a running VM takes only at its next start (PVE keeps them pending;
// ostype is none of qemu-server's fast_plug_option.
// Nor are serial ports hot-plugged: QEMU's -chardev/-device of serialN are
// made at start.)
var coldKeys = map[string]bool{"cores": true, "sockets": true, "memory": true, "bios": true, "machine": true, "cpu": true, "efidisk0": true, "tpmstate0": true, "ostype": true,
	"serial0": true, "serial1": true, "serial2": true, "serial3": true}

// OSTypes are the values of a VM's ostype (qemu-server's enum, PVE 8 and 9).
var OSTypes = []string{"other", "wxp", "w2k", "w2k3", "w2k8", "wvista", "win7", "win8", "win10", "win11", "l24", "l26", "solaris"}

var knownKey = regexp.MustCompile(`^(name|description|cores|sockets|memory|bios|machine|cpu|ostype|scsihw|boot|agent|tags|onboot|serial[0-3]|vga|smbios1|nameserver|searchdomain|ciuser|cipassword|citype|efidisk0|tpmstate0|net\d+|scsi\d+|virtio\d+|sata\d+|ide\d+|ipconfig\d+|unused\d+)$`)

// configure changes a VM's config: async (POST, a qmconfig task) or sync
// (PUT). New disks are "STORAGE:SIZE_GIB"; "delete" lists keys to drop.
func (s *Simulator) configure(v *vm, p params, async bool) (any, *apiError) {
	if err := locked(v); err != nil {
		return nil, err
	}
	changes := map[string]string{}
	for k, val := range p {
		switch k {
		case "delete", "digest", "skiplock", "background_delay":
			continue
		}
		if !knownKey.MatchString(k) {
			return nil, badParam(k, "property is not defined in schema and the schema does not allow additional properties")
		}
		if err := s.checkValue(v, k, val); err != nil {
			return nil, err
		}
		changes[k] = val
	}
	var drop []string
	if d := p["delete"]; d != "" {
		drop = strings.Split(d, ",")
	}
	if err := s.configPermission(v, changes, drop); err != nil {
		return nil, err
	}
	apply := func() string {
		for _, k := range drop {
			if v.status == "running" && coldDrive.MatchString(k) {
				// qemu-server skips their hot unplug: the deletion waits.
				if v.unplug == nil {
					v.unplug = map[string]bool{}
				}
				v.unplug[k] = true
				continue
			}
			s.detach(v, k)
		}
		for _, k := range sortedKeysS(changes) {
			delete(v.unplug, k) // a value set replaces a pending deletion
			val := s.allocate(v, k, changes[k])
			if v.status == "running" && coldKeys[k] {
				v.pending[k] = val
				continue
			}
			v.config[k] = val
		}
		return ""
	}
	if !async {
		apply()
		return nil, nil
	}
	return s.startTask(v.node, "qmconfig", strconv.Itoa(v.vmid), apply), nil
}

func sortedKeysS(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

var newDisk = regexp.MustCompile(`^([A-Za-z0-9_-]+):(\d+)(,.*)?$`)

// checkValue refuses what PVE refuses before starting a task.
func (s *Simulator) checkValue(v *vm, k, val string) *apiError {
	switch {
	case k == "cores" || k == "sockets" || k == "memory":
		if n, err := strconv.Atoi(val); err != nil || n < 1 {
			return badParam(k, "type check ('integer') failed - got '"+val+"'")
		}
	case k == "bios":
		if val != "seabios" && val != "ovmf" {
			return badParam(k, "value '"+val+"' does not have a value in the enumeration 'seabios, ovmf'")
		}
	case k == "ostype":
		if !contains(OSTypes, val) {
			return badParam(k, "value '"+val+"' does not have a value in the enumeration '"+strings.Join(OSTypes, ", ")+"'")
		}
	case strings.HasPrefix(k, "net"):
		if !strings.Contains(val, "bridge=") {
			return badParam(k, "a network device needs a bridge")
		}
		br := bridgeRe.FindStringSubmatch(val)[1]
		if !contains(s.nodes[v.node].bridges, br) {
			return fail(http.StatusInternalServerError, "bridge '%s' does not exist", br)
		}
	case isDiskKey(k) && !strings.Contains(val, "media=cdrom"):
		st, _, ok := parseVolume(val)
		if !ok {
			return badParam(k, "invalid format - unable to parse drive options")
		}
		if _, exists := s.nodes[v.node].storages[st]; !exists {
			return fail(http.StatusInternalServerError, "storage '%s' does not exist", st)
		}
	case strings.HasPrefix(k, "ide") && strings.Contains(val, "media=cdrom"):
		st, vol, ok := parseVolume(val)
		if ok && st != "none" {
			store, exists := s.nodes[v.node].storages[st]
			if !exists {
				return fail(http.StatusInternalServerError, "storage '%s' does not exist", st)
			}
			if _, has := store.volumes[vol]; !has && vol != "cloudinit" {
				return fail(http.StatusInternalServerError, "volume '%s:%s' does not exist", st, vol)
			}
		}
	}
	return nil
}

func contains(list []string, x string) bool {
	for _, l := range list {
		if l == x {
			return true
		}
	}
	return false
}

// allocate turns "STORAGE:SIZE" into a new volume of the VM.
func (s *Simulator) allocate(v *vm, k, val string) any {
	if strings.HasPrefix(k, "net") && !macRe.MatchString(val) {
		// A NIC given without its MAC gets one, as PVE generates.
		model, rest, _ := strings.Cut(val, ",")
		return model + "=" + mac(v.vmid, k) + "," + rest
	}
	m := newDisk.FindStringSubmatch(val)
	if m == nil || !isDiskKey(k) || strings.Contains(val, "media=cdrom") {
		if n, err := strconv.Atoi(val); err == nil && (k == "cores" || k == "sockets" || k == "memory") {
			return n
		}
		return val
	}
	st := s.nodes[v.node].storages[m[1]]
	size, _ := strconv.ParseInt(m[2], 10, 64)
	bytes := size << 30
	switch k {
	case "efidisk0":
		bytes = 4 << 20
	case "tpmstate0":
		bytes = 4 << 20
	}
	vol := fmt.Sprintf("vm-%d-disk-%d", v.vmid, s.nextDisk(v.vmid))
	st.volumes[vol] = bytes
	opts := m[3]
	if k != "efidisk0" && k != "tpmstate0" {
		opts = fmt.Sprintf(",size=%dG", size) + opts
	}
	return m[1] + ":" + vol + opts
}

func (s *Simulator) nextDisk(vmid int) int {
	used := map[int]bool{}
	prefix := fmt.Sprintf("vm-%d-disk-", vmid)
	for _, n := range s.nodes {
		for _, st := range n.storages {
			for vol := range st.volumes {
				if rest, ok := strings.CutPrefix(vol, prefix); ok {
					i, _ := strconv.Atoi(rest)
					used[i] = true
				}
			}
		}
	}
	for i := 0; ; i++ {
		if !used[i] {
			return i
		}
	}
}

// detach drops a key; a disk's volume stays, as unusedN, as in PVE.
func (s *Simulator) detach(v *vm, k string) {
	val, ok := v.config[k].(string)
	delete(v.config, k)
	delete(v.pending, k)
	if !ok || !isDiskKey(k) || strings.Contains(val, "media=cdrom") {
		return
	}
	for i := 0; ; i++ {
		key := fmt.Sprintf("unused%d", i)
		if _, taken := v.config[key]; !taken {
			head, _, _ := strings.Cut(val, ",")
			v.config[key] = head
			return
		}
	}
}

var sizeRe = regexp.MustCompile(`size=(\d+)G`)

// resize grows a disk: SIZE or +SIZE (in G); shrinking is refused.
func (s *Simulator) resize(v *vm, p params) (any, *apiError) {
	if err := s.need(vmPath(v.vmid), "VM.Config.Disk"); err != nil {
		return nil, err
	}
	if err := locked(v); err != nil {
		return nil, err
	}
	disk := p["disk"]
	str, ok := v.config[disk].(string)
	if !ok || !isDiskKey(disk) {
		return nil, fail(http.StatusInternalServerError, "disk '%s' does not exist", disk)
	}
	st, vol, _ := parseVolume(str)
	if err := s.need(storagePath(st), "Datastore.AllocateSpace"); err != nil {
		return nil, err
	}
	cur := s.nodes[v.node].storages[st].volumes[vol] >> 30
	arg := strings.TrimSuffix(p["size"], "G")
	grow := strings.HasPrefix(arg, "+")
	n, err := strconv.ParseInt(strings.TrimPrefix(arg, "+"), 10, 64)
	if err != nil {
		return nil, badParam("size", "value does not match the regex pattern")
	}
	want := n
	if grow {
		want = cur + n
	}
	if want < cur {
		return nil, fail(http.StatusInternalServerError, "shrinking disks is not supported")
	}
	return s.startTask(v.node, "qmresize", strconv.Itoa(v.vmid), func() string {
		s.nodes[v.node].storages[st].volumes[vol] = want << 30
		v.config[disk] = sizeRe.ReplaceAllString(v.config[disk].(string), fmt.Sprintf("size=%dG", want))
		return ""
	}), nil
}

// power runs start, stop, shutdown, reboot, reset, suspend or resume.
// suspend with todisk=1 hibernates as PVE does: the VM is locked
// "suspending" while its memory is written to a state volume (on
// statestorage, else the storage of its first disk: pvesim's stand-in for
// PVE's choice), then it stops with the lock "suspended" and the volume in
// its config as vmstate; start resumes from that volume and drops it.
// A guest that ignores shutdown (IgnoreShutdown) fails the shutdown task
// unless forceStop=1 stops it; PVE's task waits up to its timeout for the
// guest first, pvesim's ends after the TaskDelay.
func (s *Simulator) power(v *vm, action string, p params) (any, *apiError) {
	typ := map[string]string{"start": "qmstart", "stop": "qmstop", "shutdown": "qmshutdown", "reboot": "qmreboot",
		"reset": "qmreset", "suspend": "qmsuspend", "resume": "qmresume"}[action]
	if typ == "" {
		return nil, fail(http.StatusNotImplemented, "Method 'POST status/%s' not implemented", action)
	}
	if v.template {
		return nil, fail(http.StatusInternalServerError, "you can't start a vm if it's a template")
	}
	if err := locked(v); err != nil && action != "stop" && !(action == "start" && v.lock == "suspended") {
		return nil, err
	}
	toDisk := action == "suspend" && p["todisk"] == "1"
	if toDisk {
		if v.status != "running" {
			return nil, fail(http.StatusInternalServerError, "VM %d not running", v.vmid)
		}
		v.lock = "suspending"
	}
	return s.startTask(v.node, typ, strconv.Itoa(v.vmid), func() string {
		switch action {
		case "start":
			if v.status == "running" {
				return fmt.Sprintf("VM %d already running", v.vmid)
			}
			if v.lock == "suspended" {
				s.dropState(v)
				v.status, v.paused, v.lock, v.started = "running", false, "", time.Now()
				return ""
			}
			s.applyPending(v)
			v.status, v.paused, v.started = "running", false, time.Now()
			v.boots++
		case "shutdown":
			if v.ignoresShutdown && p["forceStop"] != "1" {
				return "VM quit/powerdown failed - got timeout"
			}
			v.status, v.paused = "stopped", false
			s.dropSerials(v.vmid)
			s.applyPending(v)
		case "stop":
			v.status, v.paused = "stopped", false
			s.dropSerials(v.vmid)
			s.applyPending(v)
		case "reboot", "reset":
			if v.status != "running" {
				return fmt.Sprintf("VM %d not running", v.vmid)
			}
			s.applyPending(v)
			v.started = time.Now()
		case "suspend":
			if v.status != "running" {
				return fmt.Sprintf("VM %d not running", v.vmid)
			}
			if toDisk {
				s.saveState(v, p["statestorage"])
				v.status, v.paused, v.lock = "stopped", false, "suspended"
				s.dropSerials(v.vmid)
				return ""
			}
			v.paused = true
		case "resume":
			v.paused = false
		}
		return ""
	}), nil
}

// saveState writes a hibernating VM's memory to a state volume.
func (s *Simulator) saveState(v *vm, storage string) {
	if storage == "" {
		for _, k := range sortedKeys(v.config) {
			if str, ok := v.config[k].(string); ok && isDiskKey(k) && !strings.Contains(str, "media=cdrom") {
				storage, _, _ = parseVolume(str)
				break
			}
		}
	}
	st := s.nodes[v.node].storages[storage]
	if st == nil {
		return
	}
	vol := fmt.Sprintf("vm-%d-state-suspend-%s", v.vmid, time.Now().Format("2006-01-02"))
	st.volumes[vol] = v.memoryMiB() << 20
	v.config["vmstate"] = storage + ":" + vol
}

// dropState deletes a resumed VM's state volume and its vmstate key.
func (s *Simulator) dropState(v *vm) {
	if str, ok := v.config["vmstate"].(string); ok {
		if storage, vol, ok := parseVolume(str); ok && s.nodes[v.node].storages[storage] != nil {
			delete(s.nodes[v.node].storages[storage].volumes, vol)
		}
	}
	delete(v.config, "vmstate")
}

func (s *Simulator) applyPending(v *vm) {
	for k, val := range v.pending {
		v.config[k] = val
	}
	v.pending = map[string]any{}
	for k := range v.unplug {
		s.detach(v, k)
	}
	v.unplug = nil
}

// destroy deletes a stopped VM; purge and destroy-unreferenced-disks also
// remove its unused and unreferenced volumes.
func (s *Simulator) destroy(v *vm, p params) (any, *apiError) {
	if v.status == "running" {
		return nil, fail(http.StatusInternalServerError, "VM %d is running - destroy failed", v.vmid)
	}
	if err := locked(v); err != nil {
		return nil, err
	}
	all := p["destroy-unreferenced-disks"] == "1" || p["purge"] == "1"
	return s.startTask(v.node, "qmdestroy", strconv.Itoa(v.vmid), func() string {
		for key, val := range v.config {
			str, ok := val.(string)
			if !ok || !(isDiskKey(key) || strings.HasPrefix(key, "unused")) || strings.Contains(str, "media=cdrom") {
				continue
			}
			if st, vol, ok := parseVolume(str); ok {
				delete(s.nodes[v.node].storages[st].volumes, vol)
			}
		}
		if all {
			s.dropVolumes(v)
		}
		s.dropSnapshots(v)
		delete(s.vms, v.vmid)
		return ""
	}), nil
}

// dropVolumes removes every volume named after the VM on its node.
func (s *Simulator) dropVolumes(v *vm) {
	for _, st := range s.nodes[v.node].storages {
		for vol := range st.volumes {
			if id, ok := volumeOwner(vol); ok && id == v.vmid && strings.HasPrefix(vol, "vm-") {
				delete(st.volumes, vol)
			}
		}
	}
}

var (
	ipRe     = regexp.MustCompile(`ip=([0-9.]+)/(\d+)`)
	anyMAC   = regexp.MustCompile(`[0-9A-Fa-f:]{17}`)
	bridgeRe = regexp.MustCompile(`bridge=([^,]+)`)
)

// agentInterfaces is the guest agent's network-get-interfaces: the
// address of ipconfig0 when static, else one the simulated DHCP gives.
func (s *Simulator) agentInterfaces(v *vm) (any, *apiError) {
	switch {
	case v.status != "running":
		return nil, fail(http.StatusInternalServerError, "VM %d is not running", v.vmid)
	case !v.agentEnabled():
		return nil, fail(http.StatusInternalServerError, "No QEMU guest agent configured")
	case time.Since(v.started) < s.opts.AgentDelay:
		return nil, fail(http.StatusInternalServerError, "QEMU guest agent is not running")
	}
	ifaces := []map[string]any{{"name": "lo", "hardware-address": "00:00:00:00:00:00",
		"ip-addresses": []map[string]any{{"ip-address": "127.0.0.1", "ip-address-type": "ipv4", "prefix": 8}}}}
	for i := 0; i < 8; i++ {
		netv, ok := v.config[fmt.Sprintf("net%d", i)].(string)
		if !ok {
			continue
		}
		m := anyMAC.FindString(netv)
		addr, prefix := fmt.Sprintf("10.%d.%d.%d", 20+i, (v.vmid/250)%250, v.vmid%250+2), 24
		if ipc, ok := v.config[fmt.Sprintf("ipconfig%d", i)].(string); ok {
			if mm := ipRe.FindStringSubmatch(ipc); mm != nil {
				addr = mm[1]
				prefix, _ = strconv.Atoi(mm[2])
			}
		}
		ifaces = append(ifaces, map[string]any{"name": fmt.Sprintf("eth%d", i), "hardware-address": strings.ToLower(m),
			"ip-addresses": []map[string]any{{"ip-address": addr, "ip-address-type": "ipv4", "prefix": prefix}}})
	}
	return map[string]any{"result": ifaces}, nil
}
