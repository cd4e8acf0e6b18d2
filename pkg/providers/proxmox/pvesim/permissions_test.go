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
	"context"
	"strings"
	"testing"

	proxmox "github.com/luthermonson/go-proxmox"
)

// TestPermissions: PVE's checks as the simulator makes them — a 403
// naming path and privilege, grants inherited by sub-paths and not by
// siblings, listings filtered rather than refused, ipconfig settable with
// either of its two privileges, a NIC's VLAN its own SDN path, the agent's
// privilege by version, and a token without ACLs allowed everything.
func TestPermissions(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	get := func(path string) error { return c.Get(ctx, path, &[]map[string]any{}) }
	s.SetACL([]ACL{{Path: "/vms/9000", Privileges: []string{"VM.Audit"}}, {Path: "/storage/local", Privileges: []string{"Datastore.Audit"}}})
	if err := c.Get(ctx, "/nodes/pve1/qemu/9000/config", &map[string]any{}); err != nil {
		t.Errorf("VM.Audit on /vms/9000 reads its config: %v", err)
	}
	var vms []map[string]any
	if err := c.Get(ctx, "/cluster/resources?type=vm", &vms); err != nil || len(vms) != 1 {
		t.Errorf("resources: %v, %v; want the one VM audited", vms, err)
	}
	var storages []map[string]any
	if err := c.Get(ctx, "/nodes/pve1/storage", &storages); err != nil || len(storages) != 1 || storages[0]["storage"] != "local" {
		t.Errorf("storages %v, %v; want local alone", storages, err)
	}
	for path, want := range map[string]string{
		"/nodes/pve1/status":                    "(/nodes/pve1, Sys.Audit)",
		"/nodes/pve1/storage/local-lvm/content": "(/storage/local-lvm, Datastore.Audit|Datastore.AllocateSpace)",
	} {
		if err := get(path); err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), want) {
			t.Errorf("GET %s: %v, want 403 %s", path, err, want)
		}
	}
	vm := &proxmox.VirtualMachine{}
	if err := c.Post(ctx, "/nodes/pve1/qemu/9000/clone", map[string]any{"newid": 100}, vm); err == nil || !strings.Contains(err.Error(), "(/vms/9000, VM.Clone)") {
		t.Errorf("clone without VM.Clone: %v", err)
	}

	s.SetACL([]ACL{{Path: "/", Privileges: []string{"VM.Audit", "VM.Config.Network"}}})
	var upid string
	if err := c.Post(ctx, "/nodes/pve1/qemu/9000/config", map[string]any{"ipconfig0": "ip=dhcp"}, &upid); err != nil {
		t.Errorf("ipconfig with VM.Config.Network: %v", err)
	}
	if err := c.Post(ctx, "/nodes/pve1/qemu/9000/config", map[string]any{"net0": "virtio,bridge=vmbr1,tag=20"}, &upid); err == nil || !strings.Contains(err.Error(), "(/sdn/zones/localnetwork/vmbr1/20, SDN.Use)") {
		t.Errorf("a NIC on VLAN 20 without SDN.Use: %v", err)
	}
	s.SetACL([]ACL{{Path: "/", Privileges: []string{"VM.Audit", "VM.Config.Network"}}, {Path: "/sdn/zones/localnetwork/vmbr1/20", Privileges: []string{"SDN.Use"}}})
	if err := c.Post(ctx, "/nodes/pve1/qemu/9000/config", map[string]any{"net0": "virtio,bridge=vmbr1,tag=20"}, &upid); err != nil {
		t.Errorf("a NIC on VLAN 20 with SDN.Use there: %v", err)
	}
	if err := c.Post(ctx, "/nodes/pve1/qemu/9000/config", map[string]any{"net0": "virtio,bridge=vmbr1,tag=30"}, &upid); err == nil || !strings.Contains(err.Error(), "vmbr1/30, SDN.Use") {
		t.Errorf("VLAN 30 with SDN.Use on VLAN 20 only: %v", err)
	}
	if err := c.Post(ctx, "/nodes/pve1/qemu/9000/config", map[string]any{"memory": "4096"}, &upid); err == nil || !strings.Contains(err.Error(), "VM.Config.Memory") {
		t.Errorf("memory without VM.Config.Memory: %v", err)
	}

	s.SetACL(nil)
	if err := get("/nodes/pve1/storage/local-lvm/content"); err != nil {
		t.Errorf("a token without ACLs: %v", err)
	}
	for version, priv := range map[string]string{"8.2.4": "VM.Monitor", "9.0.3": "VM.GuestAgent.Audit"} {
		v := New(Options{Version: version, ACL: []ACL{}})
		vc := proxmox.NewClient(v.URL, proxmox.WithHTTPClient(v.Client()), proxmox.WithAPIToken(v.TokenID, v.Secret))
		err := vc.Get(ctx, "/nodes/pve1/qemu/9000/agent/network-get-interfaces", &map[string]any{})
		v.Close()
		if err == nil || !strings.Contains(err.Error(), "(/vms/9000, "+priv+")") {
			t.Errorf("PVE %s agent without privileges: %v, want %s named", version, err, priv)
		}
	}
}
