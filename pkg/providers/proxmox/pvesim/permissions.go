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
	"strconv"
	"strings"
)

// ACL grants privileges on a path and on everything below it, as
// "pveum acl modify PATH -token ID -role ROLE" does (propagation on). A
// simulator without ACLs lets its token do everything, as root@pam.
type ACL struct {
	Path       string
	Privileges []string
}

// The checks below are those Proxmox VE makes on the endpoints the
// simulator serves (qemu-server's API2/Qemu.pm, pve-storage's
// API2/Storage/Content.pm, pve-manager's node and cluster handlers): the
// same privilege on the same path, the same "any of" choices, listings
// filtered instead of refused.

// allowed tells whether the token holds priv on path.
func (s *Simulator) allowed(path, priv string) bool {
	acl := s.acl
	if s.caller != nil && s.caller.user != nil {
		acl = s.caller.user.ACL
	}
	if acl == nil {
		return true
	}
	for _, a := range acl {
		if a.Path == "/" || path == a.Path || strings.HasPrefix(path, strings.TrimSuffix(a.Path, "/")+"/") {
			if contains(a.Privileges, priv) {
				return true
			}
		}
	}
	return false
}

// need is PVE's "perm" check: every privilege, each on path.
func (s *Simulator) need(path string, privs ...string) *apiError {
	for _, p := range privs {
		if !s.allowed(path, p) {
			return denied(path, p)
		}
	}
	return nil
}

// needAny is PVE's check with any => 1: one of the privileges suffices.
func (s *Simulator) needAny(path string, privs ...string) *apiError {
	for _, p := range privs {
		if s.allowed(path, p) {
			return nil
		}
	}
	return denied(path, strings.Join(privs, "|"))
}

// denied is pveproxy's 403.
func denied(path, priv string) *apiError {
	return fail(http.StatusForbidden, "Permission check failed (%s, %s)", path, priv)
}

func vmPath(vmid int) string { return "/vms/" + strconv.Itoa(vmid) }

func storagePath(name string) string { return "/storage/" + name }

// auditStorage is the check of a storage's reads (status, content).
func (s *Simulator) auditStorage(name string) *apiError {
	return s.needAny(storagePath(name), "Datastore.Audit", "Datastore.AllocateSpace")
}

// canSeeStorage is the listings' filter: the storages the token may read.
func (s *Simulator) canSeeStorage(name string) bool { return s.auditStorage(name) == nil }

// agentPrivilege is what reading the guest agent takes: VM.Monitor until
// PVE 8, VM.GuestAgent.Audit from PVE 9 (which dropped VM.Monitor).
func (s *Simulator) agentPrivilege() string {
	major, _, _ := strings.Cut(s.opts.Version, ".")
	if n, _ := strconv.Atoi(major); n >= 9 {
		return "VM.GuestAgent.Audit"
	}
	return "VM.Monitor"
}

// Config options by the privilege that changes them (qemu-server's
// $cpuoptions, $memoryoptions, $hwtypeoptions, $generaloptions,
// $diskoptions, $cloudinitoptions).
var optionPrivilege = map[string]string{
	"cores": "VM.Config.CPU", "cpu": "VM.Config.CPU", "cpulimit": "VM.Config.CPU", "cpuunits": "VM.Config.CPU",
	"numa": "VM.Config.CPU", "smp": "VM.Config.CPU", "sockets": "VM.Config.CPU", "vcpus": "VM.Config.CPU",
	"memory": "VM.Config.Memory", "balloon": "VM.Config.Memory", "shares": "VM.Config.Memory",
	"acpi": "VM.Config.HWType", "hotplug": "VM.Config.HWType", "kvm": "VM.Config.HWType", "machine": "VM.Config.HWType",
	"scsihw": "VM.Config.HWType", "smbios1": "VM.Config.HWType", "tablet": "VM.Config.HWType", "vga": "VM.Config.HWType",
	"watchdog": "VM.Config.HWType", "serial0": "VM.Config.HWType",
	"agent": "VM.Config.Options", "autostart": "VM.Config.Options", "bios": "VM.Config.Options",
	"description": "VM.Config.Options", "name": "VM.Config.Options", "onboot": "VM.Config.Options",
	"ostype": "VM.Config.Options", "protection": "VM.Config.Options",
	"boot": "VM.Config.Disk", "bootdisk": "VM.Config.Disk", "vmstatestorage": "VM.Config.Disk",
}

// cloudInitOption is what VM.Config.Cloudinit or VM.Config.Network may set.
var cloudInitOption = regexp.MustCompile(`^(cicustom|cipassword|citype|ciuser|ciupgrade|nameserver|searchdomain|sshkeys|ipconfig\d+)$`)

// configPermission checks a config change: each option set or deleted by
// its privilege, drives by VM.Config.Disk (VM.Config.CDROM for a CD-ROM)
// with the storage access a new or attached volume takes, NICs by
// VM.Config.Network and SDN.Use on their bridge (and VLAN).
func (s *Simulator) configPermission(v *vm, changes map[string]string, drop []string) *apiError {
	for _, k := range sortedKeysS(changes) {
		if err := s.optionPermission(v, k, changes[k]); err != nil {
			return err
		}
		if err := s.valuePermission(v, k, changes[k]); err != nil {
			return err
		}
	}
	for _, k := range drop {
		cur, _ := v.config[k].(string)
		if err := s.optionPermission(v, k, cur); err != nil {
			return err
		}
	}
	return nil
}

func (s *Simulator) optionPermission(v *vm, k, val string) *apiError {
	path := vmPath(v.vmid)
	switch {
	case k == "tags":
		return nil
	case isDiskKey(k):
		if strings.Contains(val, "media=cdrom") {
			return s.need(path, "VM.Config.CDROM")
		}
		return s.need(path, "VM.Config.Disk")
	case strings.HasPrefix(k, "net"):
		return s.need(path, "VM.Config.Network")
	case cloudInitOption.MatchString(k):
		return s.needAny(path, "VM.Config.Cloudinit", "VM.Config.Network")
	case strings.HasPrefix(k, "unused"):
		return nil
	}
	if priv, ok := optionPrivilege[k]; ok {
		return s.need(path, priv)
	}
	return fail(http.StatusInternalServerError, "only root can set '%s' config", k)
}

// valuePermission is the access a value takes beyond the option: storage
// for a new disk or an attached volume, SDN.Use for a NIC's bridge.
func (s *Simulator) valuePermission(v *vm, k, val string) *apiError {
	if strings.HasPrefix(k, "net") {
		bridge, tag := nicBridge(val)
		path := "/sdn/zones/localnetwork/" + bridge
		if tag != "" {
			path += "/" + tag
		}
		return s.need(path, "SDN.Use")
	}
	if !isDiskKey(k) {
		return nil
	}
	file, _, _ := strings.Cut(val, ",")
	st, vol, ok := strings.Cut(file, ":")
	switch {
	case !ok || vol == "cloudinit":
		return nil
	case newDisk.MatchString(file):
		return s.need(storagePath(st), "Datastore.AllocateSpace")
	case strings.HasPrefix(vol, "iso/"):
		return s.needAny(storagePath(st), "Datastore.AllocateSpace", "Datastore.Audit")
	case strings.HasPrefix(vol, fmt.Sprintf("vm-%d-", v.vmid)):
		return nil // the VM's own volume
	}
	return s.need(storagePath(st), "Datastore.Allocate")
}

// nicBridge is a NIC value's bridge and VLAN tag.
func nicBridge(val string) (bridge, tag string) {
	for _, f := range strings.Split(val, ",") {
		if b, ok := strings.CutPrefix(f, "bridge="); ok {
			bridge = b
		}
		if t, ok := strings.CutPrefix(f, "tag="); ok {
			tag = t
		}
	}
	return bridge, tag
}

// clonePermission: VM.Clone on the source, VM.Allocate on the new VMID,
// Datastore.AllocateSpace on the target storage or on each disk's.
func (s *Simulator) clonePermission(v *vm, newid int, storageName string) *apiError {
	if err := s.need(vmPath(v.vmid), "VM.Clone"); err != nil {
		return err
	}
	if err := s.need(vmPath(newid), "VM.Allocate"); err != nil {
		return err
	}
	for _, k := range sortedKeys(v.config) {
		str, ok := v.config[k].(string)
		if !ok || !isDiskKey(k) || strings.Contains(str, "media=cdrom") {
			continue
		}
		st, _, ok := parseVolume(str)
		if !ok {
			continue
		}
		if storageName != "" {
			st = storageName
		}
		if err := s.need(storagePath(st), "Datastore.AllocateSpace"); err != nil {
			return err
		}
	}
	return nil
}
