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
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// lifecycle is everything the provider does to a cluster: inventory, the
// image check, a machine created (clone, grow, add a disk, EFI and TPM
// disks, NIC on a VLAN, seed) until the agent gives its address, resized,
// through every power state, snapshotted, rolled back and its snapshot
// deleted, deleted with its seed. It returns the first error.
func lifecycle(sim *pvesim.Simulator) error {
	ctx := context.Background()
	c, err := Connect(ctx, connection(sim, sim.Secret), Options{TaskPoll: 5 * time.Millisecond})
	if err != nil {
		return err
	}
	if _, err := c.Inventory(ctx); err != nil {
		return err
	}
	spec := machine("team.db", "5d1c2b3a-2222-4c5d-8e9f-0a1b2c3d4e5f")
	if ok, err := c.ImageExists(ctx, spec.Location, spec.Image); err != nil || !ok {
		return fmt.Errorf("image %s: found %v, %v", spec.Image, ok, err)
	}
	rec := &recorder{}
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	for deadline := time.Now().Add(5 * time.Second); err == nil && st.IPAddress == "" && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
		spec.TaskRef = rec.last()
		st, err = c.EnsureMachine(ctx, spec, rec.record)
	}
	if err != nil {
		return err
	}
	if st.IPAddress == "" {
		return fmt.Errorf("no address from the guest agent")
	}
	spec.CPUs, spec.Disks[1].SizeGiB = 4, 8
	spec.PowerOffMode = infrav1.PowerOffModeHard
	for _, power := range []infrav1.PowerState{infrav1.PowerStatePoweredOn, infrav1.PowerStateSuspended, infrav1.PowerStatePoweredOff, infrav1.PowerStatePoweredOn} {
		spec.PowerState = power
		if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
			return err
		}
	}
	// A snapshot taken, rolled back to and deleted.
	snap := providers.SnapshotSpec{Name: providers.SnapshotName(spec.InstanceUUID), Description: "team/db"}
	if _, err := c.CreateSnapshot(ctx, spec, snap, "", rec.record); err != nil {
		return err
	}
	if err := c.RevertSnapshot(ctx, spec, snap.Name, "", rec.record); err != nil {
		return err
	}
	if err := c.DeleteSnapshot(ctx, spec, snap.Name, "", rec.record); err != nil {
		return err
	}
	spec.TaskRef = rec.last()
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		return err
	}
	if vms, vols := namedVMs(sim, spec.Name), sim.Volumes(); len(vms) != 0 || slices.ContainsFunc(vols, func(v string) bool { return strings.Contains(v, spec.InstanceUUID) }) {
		return fmt.Errorf("left behind: VMs %v, volumes %v", vms, vols)
	}
	return nil
}

// without is grants less one privilege.
func without(grants []Grant, gi, pi int) []pvesim.ACL {
	var acl []pvesim.ACL
	for i, g := range grants {
		privs := slices.Clone(g.Privileges)
		if i == gi {
			privs = slices.Delete(privs, pi, pi+1)
		}
		acl = append(acl, pvesim.ACL{Path: g.Path, Privileges: privs})
	}
	return acl
}

// TestLeastPrivilege: on Proxmox VE 8 and 9 (whose agent privileges
// differ) the lifecycle succeeds with exactly Grants, and fails without
// any one of its privileges — with PVE's 403 naming it, or, for VM.Audit,
// whose absence hides VMs from listings instead, not finding the template.
func TestLeastPrivilege(t *testing.T) {
	for _, version := range []string{"8.2.4", "9.0.3"} {
		major := int(version[0] - '0')
		grants := Grants(major, "local")
		t.Run(version, func(t *testing.T) {
			sim := pvesim.New(pvesim.Options{Version: version, TaskDelay: 2 * time.Millisecond, AgentDelay: 5 * time.Millisecond, ACL: without(grants, -1, -1)})
			defer sim.Close()
			if err := lifecycle(sim); err != nil {
				t.Fatalf("with the documented grants: %v", err)
			}
			for gi, g := range grants {
				for pi, priv := range g.Privileges {
					sim := pvesim.New(pvesim.Options{Version: version, TaskDelay: 2 * time.Millisecond, AgentDelay: 5 * time.Millisecond, ACL: without(grants, gi, pi)})
					err := lifecycle(sim)
					sim.Close()
					switch {
					case err == nil:
						t.Errorf("without %s on %s the lifecycle still succeeds: the grant is more than the provider needs", priv, g.Path)
					case priv == "VM.Audit":
						if !strings.Contains(err.Error(), "found false") {
							t.Errorf("without VM.Audit: %v, want the template not found", err)
						}
					case !strings.Contains(err.Error(), "Permission check failed") || !strings.Contains(err.Error(), priv):
						t.Errorf("without %s on %s: %v, want a permission error naming it", priv, g.Path, err)
					}
				}
			}
		})
	}
}

// TestDocumentedRole: the pveum commands of the Proxmox page
// (docs/backends/proxmox.md) are those of Grants, for both major versions,
// so the documented role cannot drift from the one tested.
func TestDocumentedRole(t *testing.T) {
	readme, err := os.ReadFile("../../../docs/backends/proxmox.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, major := range []int{8, 9} {
		for _, cmd := range PveumCommands(Grants(major, "local"), "banlieue@pve!provider") {
			if !strings.Contains(string(readme), cmd) {
				t.Errorf("docs/backends/proxmox.md does not say, for Proxmox VE %d:\n%s", major, cmd)
			}
		}
	}
}
