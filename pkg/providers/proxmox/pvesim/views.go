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
	"sort"
	"strconv"
	"strings"
	"time"
)

func (s *Simulator) nodeNames() []string {
	var out []string
	for n := range s.nodes {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

func (s *Simulator) nodeList() []map[string]any {
	var out []map[string]any
	for _, name := range s.nodeNames() {
		n := s.nodes[name]
		e := map[string]any{"node": name, "id": "node/" + name, "type": "node", "status": "offline", "level": "",
			"ssl_fingerprint": "80:D4:F2:DF:64:95:CD:8D:A0:82:82:AC:48:BA:C0:7A:1B:6B:87:8B:FE:B9:83:1C:95:4E:79:58:77:99:69:F5"}
		if n.online {
			e["status"], e["maxcpu"], e["maxmem"], e["mem"], e["cpu"], e["uptime"], e["maxdisk"], e["disk"] =
				"online", 16, int64(64)<<30, int64(8)<<30, 0.02, 86400, int64(500)<<30, int64(20)<<30
		}
		out = append(out, e)
	}
	return out
}

func nodeStatus(n *node, version string) map[string]any {
	return map[string]any{
		"uptime": 86400, "cpu": 0.02, "loadavg": []string{"0.10", "0.12", "0.09"}, "wait": 0, "idle": 0,
		"pveversion": "pve-manager/" + version + "/faa83925c9641325", "kversion": "Linux 6.8.12-1-pve #1 SMP PREEMPT_DYNAMIC PMX 6.8.12-1",
		"cpuinfo": map[string]any{"cpus": 16, "cores": 8, "sockets": 1, "model": "Simulated CPU", "mhz": "2400.000", "hvm": "1", "flags": "", "user_hz": 100},
		"memory":  map[string]any{"total": int64(64) << 30, "used": int64(8) << 30, "free": int64(56) << 30},
		"swap":    map[string]any{"total": 0, "used": 0, "free": 0},
		"rootfs":  map[string]any{"total": int64(100) << 30, "used": int64(10) << 30, "free": int64(90) << 30, "avail": int64(85) << 30},
		"ksm":     map[string]any{"shared": 0},
	}
}

func (s *Simulator) clusterStatus() []map[string]any {
	out := []map[string]any{{"type": "cluster", "id": "cluster", "name": "pvesim", "nodes": len(s.nodes), "quorate": 1, "version": 3}}
	for i, name := range s.nodeNames() {
		out = append(out, map[string]any{"type": "node", "id": "node/" + name, "name": name, "nodeid": i + 1,
			"online": map[bool]int{true: 1, false: 0}[s.nodes[name].online], "ip": fmt.Sprintf("192.0.2.%d", i+1), "local": map[bool]int{true: 1, false: 0}[i == 0], "level": ""})
	}
	return out
}

// nextID is the lowest free VMID from 100: it reserves nothing, so two
// callers may be given the same one, as on a real cluster. With vmid, it
// asserts that VMID is free.
func (s *Simulator) nextID(p params) (any, *apiError) {
	if v, ok := p["vmid"]; ok {
		id, err := strconv.Atoi(v)
		if err != nil {
			return nil, badParam("vmid", "type check ('integer') failed - got '"+v+"'")
		}
		if _, used := s.vms[id]; used {
			return nil, badParam("vmid", fmt.Sprintf("VM %d already exists", id))
		}
		return strconv.Itoa(id), nil
	}
	for id := 100; ; id++ {
		if _, used := s.vms[id]; !used {
			return strconv.Itoa(id), nil
		}
	}
}

func (s *Simulator) resources(typ string) []map[string]any {
	var out []map[string]any
	if typ == "" || typ == "node" {
		for _, n := range s.nodeList() {
			out = append(out, n)
		}
	}
	if typ == "" || typ == "vm" {
		for _, id := range s.vmIDs() {
			v := s.vms[id]
			if !s.allowed(vmPath(id), "VM.Audit") {
				continue
			}
			out = append(out, map[string]any{"id": fmt.Sprintf("qemu/%d", id), "type": "qemu", "node": v.node, "vmid": id,
				"name": v.name(), "status": v.status, "template": map[bool]int{true: 1, false: 0}[v.template],
				"maxmem": v.memoryMiB() << 20, "maxcpu": v.cpus(), "maxdisk": s.bootDiskBytes(v)})
		}
	}
	if typ == "" || typ == "storage" {
		for _, name := range s.nodeNames() {
			for _, st := range s.nodes[name].sortedStorages() {
				if !s.canSeeStorage(st.name) {
					continue
				}
				out = append(out, map[string]any{"id": "storage/" + name + "/" + st.name, "type": "storage", "node": name,
					"storage": st.name, "status": "available", "plugintype": st.typ, "content": strings.Join(st.content, ",")})
			}
		}
	}
	return out
}

func (s *Simulator) vmIDs() []int {
	var ids []int
	for id := range s.vms {
		ids = append(ids, id)
	}
	sort.Ints(ids)
	return ids
}

func networks(n *node) []map[string]any {
	out := []map[string]any{{"iface": "eno1", "type": "eth", "method": "manual", "method6": "manual", "families": []string{"inet"}, "exists": 1, "active": 1, "priority": 3}}
	for i, b := range n.bridges {
		out = append(out, map[string]any{"iface": b, "type": "bridge", "method": "manual", "method6": "manual", "families": []string{"inet"},
			"bridge_ports": "eno1", "bridge_stp": "off", "bridge_fd": "0", "bridge_vlan_aware": 1, "autostart": 1, "active": 1, "priority": 4 + i})
	}
	return out
}

func (n *node) sortedStorages() []*storage {
	var out []*storage
	for _, st := range n.storages {
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].name < out[j].name })
	return out
}

func (s *Simulator) storages(n *node) []map[string]any {
	var out []map[string]any
	for _, st := range n.sortedStorages() {
		if !s.canSeeStorage(st.name) {
			continue
		}
		out = append(out, s.storageEntry(st))
	}
	return out
}

func (s *Simulator) storageEntry(st *storage) map[string]any {
	var used int64
	for _, sz := range st.volumes {
		used += sz
	}
	total := int64(1) << 40
	return map[string]any{"storage": st.name, "type": st.typ, "content": strings.Join(st.content, ","), "active": 1, "enabled": 1,
		"shared": 0, "total": total, "used": used, "avail": total - used, "used_fraction": float64(used) / float64(total)}
}

func (st *storage) has(content string) bool {
	for _, c := range st.content {
		if c == content {
			return true
		}
	}
	return false
}

func (st *storage) contentList(filter string) []map[string]any {
	var names []string
	for v := range st.volumes {
		names = append(names, v)
	}
	sort.Strings(names)
	var out []map[string]any
	for _, v := range names {
		content, format := volumeContent(v)
		if filter != "" && filter != content {
			continue
		}
		e := map[string]any{"volid": st.name + ":" + v, "content": content, "format": format, "size": st.volumes[v], "ctime": time.Now().Unix()}
		if id, ok := volumeOwner(v); ok {
			e["vmid"] = id
		}
		out = append(out, e)
	}
	return out
}

// volumeOwner is the VMID in vm-ID-disk-N or base-ID-disk-N.
func volumeOwner(vol string) (int, bool) {
	parts := strings.Split(vol, "-")
	if len(parts) < 3 || (parts[0] != "vm" && parts[0] != "base") {
		return 0, false
	}
	id, err := strconv.Atoi(parts[1])
	return id, err == nil
}

func (s *Simulator) qemuList(n *node) []map[string]any {
	var out []map[string]any
	for _, id := range s.vmIDs() {
		v := s.vms[id]
		if v.node != n.name || !s.allowed(vmPath(id), "VM.Audit") {
			continue
		}
		e := map[string]any{"vmid": id, "name": v.name(), "status": v.status, "cpus": v.cpus(), "maxmem": v.memoryMiB() << 20,
			"maxdisk": s.bootDiskBytes(v), "uptime": v.uptime(), "mem": 0, "cpu": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0}
		if v.template {
			e["template"] = 1
		}
		if v.lock != "" {
			e["lock"] = v.lock
		}
		out = append(out, e)
	}
	return out
}

func (s *Simulator) vmStatus(v *vm) map[string]any {
	qmp := v.status
	if v.status == "running" && v.paused {
		qmp = "paused"
	}
	st := map[string]any{"vmid": v.vmid, "name": v.name(), "status": v.status, "qmpstatus": qmp, "cpus": v.cpus(),
		"maxmem": v.memoryMiB() << 20, "maxdisk": s.bootDiskBytes(v), "uptime": v.uptime(), "ha": map[string]any{"managed": 0},
		"agent": map[bool]int{true: 1, false: 0}[v.agentEnabled()], "mem": 0, "cpu": 0, "netin": 0, "netout": 0, "diskread": 0, "diskwrite": 0}
	if v.status == "running" {
		st["pid"] = 100000 + v.vmid
	}
	if v.template {
		st["template"] = 1
	}
	if v.lock != "" {
		st["lock"] = v.lock
	}
	return st
}

func (v *vm) name() string { n, _ := v.config["name"].(string); return n }

func (v *vm) uptime() int {
	if v.status != "running" {
		return 0
	}
	return int(time.Since(v.started).Seconds())
}

func (v *vm) cpus() int {
	return intOf(v.config["cores"], 1) * intOf(v.config["sockets"], 1)
}

func (v *vm) memoryMiB() int64 { return int64(intOf(v.config["memory"], 512)) }

func (v *vm) agentEnabled() bool {
	a := fmt.Sprint(v.config["agent"])
	return a == "1" || strings.HasPrefix(a, "1,") || strings.Contains(a, "enabled=1")
}

func intOf(x any, def int) int {
	switch n := x.(type) {
	case int:
		return n
	case string:
		if i, err := strconv.Atoi(n); err == nil {
			return i
		}
	}
	return def
}

func (s *Simulator) bootDiskBytes(v *vm) int64 {
	str, _ := v.config["scsi0"].(string)
	st, vol, ok := parseVolume(str)
	if !ok {
		return 0
	}
	return s.nodes[v.node].storages[st].volumes[vol]
}

// configView is GET config: the current values, with a digest.
func (v *vm) configView() map[string]any {
	out := map[string]any{"digest": fmt.Sprintf("%040x", len(v.config)*7919+v.vmid)}
	for k, val := range v.config {
		out[k] = val
	}
	return out
}

// pendingView is GET pending: every key with its value and pending change.
func (v *vm) pendingView() []map[string]any {
	var keys []string
	for k := range v.config {
		keys = append(keys, k)
	}
	for k := range v.pending {
		if _, ok := v.config[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []map[string]any
	for _, k := range keys {
		e := map[string]any{"key": k}
		if val, ok := v.config[k]; ok {
			e["value"] = val
		}
		if val, ok := v.pending[k]; ok {
			e["pending"] = val
		}
		if v.unplug[k] {
			e["delete"] = 1
		}
		out = append(out, e)
	}
	return out
}
