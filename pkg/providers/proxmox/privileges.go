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
package proxmox

import (
	"fmt"
	"strings"
)

// Grant is a set of Proxmox VE privileges on an ACL path (and below it).
type Grant struct {
	Role       string
	Path       string
	Privileges []string
}

// Grants are the privileges the provider uses, no more: what to give its
// API token on a cluster of Proxmox VE major version pveMajor whose seeds
// go to isoStorage. TestLeastPrivilege runs the machine lifecycle with
// them against the simulator, which checks each endpoint as Proxmox VE
// does, and again without each privilege in turn: every one is needed.
//
// Why each: VM.Audit (find templates and VMs, read config and status),
// VM.Clone and VM.Allocate (the full clone onto a new VMID, destroy),
// VM.Config.CPU, .Memory (size), .Disk (grow, add, EFI and TPM state
// disks), .Network (NICs and their ipconfig), .Options (firmware, agent),
// .HWType (the SMBIOS UUID, the serial port serial0: socket), .CDROM
// (attach the seed), VM.PowerMgmt, VM.Snapshot (take, roll back and
// delete snapshots: qemu-server's rollback takes VM.Snapshot or
// VM.Snapshot.Rollback, so the narrower one would add nothing),
// the guest agent's addresses (VM.Monitor until 8, VM.GuestAgent.Audit
// from 9), Datastore.AllocateSpace (disks on any storage), SDN.Use (a
// NIC on a bridge or VLAN); on the seed storage only, uploading an ISO
// (Datastore.AllocateTemplate) and deleting it (Datastore.Allocate:
// Proxmox VE has no narrower privilege to delete a volume a VM does not
// own, so keep seeds on a storage of their own). Imported images
// (spec.import) are uploaded as import content to the image storage, or
// the node's first storage holding import content, and deleted once
// their template is made: that storage needs the same two privileges
// (isoStorage, when it is the one).
func Grants(pveMajor int, isoStorage string) []Grant {
	agent := "VM.Monitor"
	if pveMajor >= 9 {
		agent = "VM.GuestAgent.Audit"
	}
	return []Grant{
		{Role: "BanlieueProvider", Path: "/", Privileges: []string{
			"VM.Audit", "VM.Allocate", "VM.Clone", "VM.Config.CPU", "VM.Config.Memory", "VM.Config.Disk",
			"VM.Config.Network", "VM.Config.Options", "VM.Config.HWType", "VM.Config.CDROM", "VM.PowerMgmt", "VM.Snapshot", agent,
			"Datastore.AllocateSpace", "SDN.Use",
		}},
		{Role: "BanlieueSeeds", Path: "/storage/" + isoStorage, Privileges: []string{"Datastore.AllocateTemplate", "Datastore.Allocate"}},
	}
}

// PveumCommands are the shell commands that create the roles of Grants
// and give them to token (USER@REALM!TOKENID).
func PveumCommands(grants []Grant, token string) []string {
	var out []string
	for _, g := range grants {
		out = append(out, fmt.Sprintf("pveum role add %s -privs %q", g.Role, strings.Join(g.Privileges, " ")))
	}
	for _, g := range grants {
		out = append(out, fmt.Sprintf("pveum acl modify %s -token '%s' -role %s", g.Path, token, g.Role))
	}
	return out
}
