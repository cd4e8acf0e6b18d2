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
	"errors"
	"strings"
	"testing"
	"time"

	goproxmox "github.com/luthermonson/go-proxmox"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// built is a running machine of spec on sim, and its VM.
func built(t *testing.T, sim *pvesim.Simulator, c *Client, spec providers.MachineSpec) pvesim.VM {
	t.Helper()
	if _, err := c.EnsureMachine(context.Background(), spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	vms := namedVMs(sim, spec.Name)
	if len(vms) != 1 || vms[0].Status != "running" {
		t.Fatalf("built %+v", vms)
	}
	return vms[0]
}

// status is the VM's power status in the simulator.
func status(t *testing.T, sim *pvesim.Simulator, name string) string {
	t.Helper()
	vms := namedVMs(sim, name)
	if len(vms) != 1 {
		t.Fatalf("%d VMs named %s", len(vms), name)
	}
	return vms[0].Status
}

func TestSnapshotLimits(t *testing.T) {
	_, c := simulate(t)
	var s providers.Snapshots = c
	if got := s.SnapshotLimits(); got != (providers.SnapshotLimits{MaxPerVM: 0, Memory: true, RevertRunning: true}) {
		t.Errorf("limits %+v", got)
	}
	if _, ok := providers.SnapshotsOf(c); !ok {
		t.Error("SnapshotsOf does not see the Proxmox VE backend's snapshots")
	}
}

// TestSnapshots: create records its task and, asked again, returns the
// snapshot it made without a second request; the list holds banlieue's
// snapshots only (not one taken by hand); a revert to a snapshot with
// memory leaves the running VM running, one without memory leaves it
// stopped, with the config it had; a revert to a missing snapshot is
// ErrNoSnapshot; delete twice is fine; a missing VM is ErrNoMachine,
// except to delete.
func TestSnapshots(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	spec := machine("team.snap", "6a7b8c9d-1111-4a5b-9c8d-7e6f5a4b3c2d")
	vm := built(t, sim, c, spec)
	withMemory := providers.SnapshotSpec{Name: providers.SnapshotName("11111111-aaaa-4bbb-8ccc-000000000001"), Description: "team/with-memory", IncludeMemory: true}
	diskOnly := providers.SnapshotSpec{Name: providers.SnapshotName("22222222-bbbb-4bbb-8ccc-000000000002"), Description: "team/disk-only"}

	rec := &recorder{}
	first, err := c.CreateSnapshot(ctx, spec, withMemory, "", rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if first.Name != withMemory.Name || first.Ref != withMemory.Name || !first.Memory || time.Since(first.CreationTime) > time.Minute {
		t.Errorf("created %+v", first)
	}
	if len(rec.refs) != 1 || !strings.HasPrefix(rec.refs[0], "pve1/100/UPID:pve1:") || !strings.Contains(rec.refs[0], ":qmsnapshot:100:") {
		t.Errorf("records %v, want the qmsnapshot task's", rec.refs)
	}
	again, err := c.CreateSnapshot(ctx, spec, withMemory, "", rec.record)
	if err != nil || again != first {
		t.Errorf("created again: %+v, %v; want %+v", again, err, first)
	}
	if got := sim.Requests()["POST qemu snapshot"]; got != 1 {
		t.Errorf("%d snapshot requests, want 1", got)
	}
	// A change after the first snapshot, then the second, then another.
	other := goproxmox.NewClient(sim.URL, goproxmox.WithHTTPClient(sim.Client()), goproxmox.WithAPIToken(sim.TokenID, sim.Secret))
	ovm := other.NodeRef("pve1").VirtualMachineRef(vm.VMID)
	if task, err := ovm.Config(ctx, goproxmox.VirtualMachineOption{Name: "tags", Value: "after-first"}); err != nil || task.Wait(ctx, 10*time.Millisecond, 5*time.Second) != nil {
		t.Fatal(err)
	}
	if info, err := c.CreateSnapshot(ctx, spec, diskOnly, "", rec.record); err != nil || info.Memory {
		t.Fatalf("disk-only snapshot %+v, %v", info, err)
	}
	if task, err := ovm.Config(ctx, goproxmox.VirtualMachineOption{Name: "tags", Value: "after-second"}); err != nil || task.Wait(ctx, 10*time.Millisecond, 5*time.Second) != nil {
		t.Fatal(err)
	}
	// One taken by hand is not banlieue's.
	var upid goproxmox.UPID
	if err := other.Post(ctx, "/nodes/pve1/qemu/100/snapshot", map[string]any{"snapname": "manual"}, &upid); err != nil {
		t.Fatal(err)
	}
	if err := goproxmox.NewTask(upid, other).Wait(ctx, 10*time.Millisecond, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	list, err := c.ListSnapshots(ctx, spec)
	if err != nil || len(list) != 2 {
		t.Fatalf("list %+v, %v", list, err)
	}
	byName := map[string]providers.SnapshotInfo{}
	for _, s := range list {
		byName[s.Name] = s
	}
	if byName[withMemory.Name] != first || !byName[withMemory.Name].Memory || byName[diskOnly.Name].Memory || byName[diskOnly.Name].Name == "" {
		t.Errorf("list %+v", list)
	}

	// Back to the snapshot with memory: running, as it was then.
	if err := c.RevertSnapshot(ctx, spec, withMemory.Name, "", rec.record); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(rec.last(), ":qmrollback:100:") {
		t.Errorf("the rollback's task was not recorded: %s", rec.last())
	}
	vms := namedVMs(sim, spec.Name)
	if vms[0].Status != "running" || vms[0].Config["tags"] != nil || !strings.Contains(vms[0].Config["description"].(string), ownerMark(spec.InstanceUUID)) {
		t.Errorf("after reverting to the snapshot with memory: %s, tags %v, description %v", vms[0].Status, vms[0].Config["tags"], vms[0].Config["description"])
	}
	// Back to the disk-only one, from a running VM: stopped.
	if err := c.RevertSnapshot(ctx, spec, diskOnly.Name, "", rec.record); err != nil {
		t.Fatal(err)
	}
	if vms := namedVMs(sim, spec.Name); vms[0].Status != "stopped" || vms[0].Config["tags"] != "after-first" {
		t.Errorf("after reverting to the disk-only snapshot: %s, tags %v", vms[0].Status, vms[0].Config["tags"])
	}
	if err := c.RevertSnapshot(ctx, spec, providers.SnapshotName("99999999-bbbb-4bbb-8ccc-000000000009"), "", rec.record); !errors.Is(err, providers.ErrNoSnapshot) {
		t.Errorf("reverting to a missing snapshot: %v", err)
	}

	// Delete, twice.
	for i := 0; i < 2; i++ {
		if err := c.DeleteSnapshot(ctx, spec, withMemory.Name, "", rec.record); err != nil {
			t.Fatalf("delete %d: %v", i+1, err)
		}
	}
	if got := sim.Requests()["DELETE qemu snapshot delete"]; got != 1 {
		t.Errorf("%d delete requests, want 1", got)
	}
	if list, err := c.ListSnapshots(ctx, spec); err != nil || len(list) != 1 || list[0].Name != diskOnly.Name {
		t.Errorf("after the delete: %+v, %v", list, err)
	}
	if snaps := sim.Snapshots(vm.VMID); len(snaps) != 2 {
		t.Errorf("the simulator holds %+v, want the disk-only and the manual snapshot", snaps)
	}

	// A VM that is not there.
	gone := machine("team.gone", "6a7b8c9d-9999-4a5b-9c8d-7e6f5a4b3c2d")
	if _, err := c.ListSnapshots(ctx, gone); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("listing a missing VM's snapshots: %v", err)
	}
	if _, err := c.CreateSnapshot(ctx, gone, diskOnly, "", rec.record); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("snapshotting a missing VM: %v", err)
	}
	if err := c.RevertSnapshot(ctx, gone, diskOnly.Name, "", rec.record); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("reverting a missing VM: %v", err)
	}
	if err := c.DeleteSnapshot(ctx, gone, diskOnly.Name, "", rec.record); err != nil {
		t.Errorf("deleting a missing VM's snapshot: %v", err)
	}
	// Deleting the machine takes its snapshots.
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if snaps := sim.Snapshots(vm.VMID); snaps != nil {
		t.Errorf("after deleting the machine: %+v", snaps)
	}
}

// killAt is a recorder whose provider dies once it recorded a task of
// typ: the task is in the record, the call's context ends.
func killAt(typ string, cancel context.CancelFunc) *recorder {
	return &recorder{before: func(ref string) error {
		if strings.Contains(ref, ":"+typ+":") {
			cancel()
		}
		return nil
	}}
}

// TestCrashMidSnapshot: a provider killed while its snapshot task runs
// makes exactly one snapshot, with one request, whether it recorded the
// task (the restarted one awaits it) or died before the record (the
// restarted one finds the snapshot in its task's prepare state and
// waits for it).
func TestCrashMidSnapshot(t *testing.T) {
	for _, recorded := range []bool{true, false} {
		name := map[bool]string{true: "recorded", false: "unrecorded"}[recorded]
		t.Run(name, func(t *testing.T) {
			sim, c := simulate(t)
			spec := machine("team.crash", "7b8c9d0e-2222-4a5b-9c8d-7e6f5a4b3c2d")
			built(t, sim, c, spec)
			snap := providers.SnapshotSpec{Name: providers.SnapshotName("22222222-aaaa-4bbb-8ccc-000000000001"), IncludeMemory: true}
			sim.SetTaskDelay(time.Second)
			ctx, cancel := context.WithCancel(context.Background())
			rec := killAt("qmsnapshot", cancel)
			if !recorded {
				crash := errors.New("provider killed")
				rec = &recorder{before: func(ref string) error {
					if strings.Contains(ref, ":qmsnapshot:") {
						return crash
					}
					return nil
				}}
			}
			if _, err := c.CreateSnapshot(ctx, spec, snap, "", rec.record); err == nil {
				t.Fatal("the killed provider's call succeeded")
			}
			cancel()
			if snaps := sim.Snapshots(100); len(snaps) != 1 || snaps[0].State != "prepare" {
				t.Fatalf("mid-snapshot: %+v", snaps)
			}
			sim.SetTaskDelay(20 * time.Millisecond)
			restarted, err := Connect(context.Background(), connection(sim, sim.Secret), Options{TaskPoll: 10 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			resume := rec.last()
			if recorded != strings.Contains(resume, ":qmsnapshot:") {
				t.Fatalf("recorded %q", resume)
			}
			info, err := restarted.CreateSnapshot(context.Background(), spec, snap, resume, (&recorder{}).record)
			if err != nil || info.Name != snap.Name || !info.Memory {
				t.Fatalf("after the restart: %+v, %v", info, err)
			}
			if snaps := sim.Snapshots(100); len(snaps) != 1 || snaps[0].State != "" {
				t.Errorf("snapshots %+v, want exactly one, complete", snaps)
			}
			if got := sim.Requests()["POST qemu snapshot"]; got != 1 {
				t.Errorf("%d snapshot requests, want 1", got)
			}
		})
	}
}

// TestCrashMidRevertAndDelete: a revert or delete resumed from its
// recorded task awaits it and asks nothing again.
func TestCrashMidRevertAndDelete(t *testing.T) {
	sim, c := simulate(t)
	spec := machine("team.resume", "8c9d0e1f-3333-4a5b-9c8d-7e6f5a4b3c2d")
	built(t, sim, c, spec)
	snap := providers.SnapshotSpec{Name: providers.SnapshotName("33333333-aaaa-4bbb-8ccc-000000000001")}
	if _, err := c.CreateSnapshot(context.Background(), spec, snap, "", (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	for _, step := range []struct {
		typ, route string
		call       func(ctx context.Context, resume string, rec *recorder) error
	}{
		{"qmrollback", "POST qemu snapshot rollback", func(ctx context.Context, resume string, rec *recorder) error {
			return c.RevertSnapshot(ctx, spec, snap.Name, resume, rec.record)
		}},
		{"qmdelsnapshot", "DELETE qemu snapshot delete", func(ctx context.Context, resume string, rec *recorder) error {
			return c.DeleteSnapshot(ctx, spec, snap.Name, resume, rec.record)
		}},
	} {
		sim.SetTaskDelay(500 * time.Millisecond)
		ctx, cancel := context.WithCancel(context.Background())
		rec := killAt(step.typ, cancel)
		if err := step.call(ctx, "", rec); err == nil {
			t.Fatalf("%s: the killed provider's call succeeded", step.typ)
		}
		cancel()
		if sim.RunningTasks(step.typ) != 1 {
			t.Fatalf("%s: not running after the kill", step.typ)
		}
		sim.SetTaskDelay(20 * time.Millisecond)
		if err := step.call(context.Background(), rec.last(), &recorder{}); err != nil {
			t.Fatalf("%s resumed: %v", step.typ, err)
		}
		if got := sim.Requests()[step.route]; got != 1 {
			t.Errorf("%s: %d requests, want 1", step.typ, got)
		}
	}
	if status(t, sim, spec.Name) != "stopped" {
		t.Errorf("after the resumed revert to a snapshot without memory the VM is %s", status(t, sim, spec.Name))
	}
	if snaps := sim.Snapshots(100); len(snaps) != 0 {
		t.Errorf("after the resumed delete: %+v", snaps)
	}
}

// TestSnapshotWithoutPrivilege: a token without VM.Snapshot is refused
// with Proxmox VE's 403 naming the VM's path and the privilege, and
// nothing is made.
func TestSnapshotWithoutPrivilege(t *testing.T) {
	grants := Grants(8, "local")
	var acl []pvesim.ACL
	for _, g := range grants {
		var privs []string
		for _, p := range g.Privileges {
			if p != "VM.Snapshot" {
				privs = append(privs, p)
			}
		}
		acl = append(acl, pvesim.ACL{Path: g.Path, Privileges: privs})
	}
	sim := pvesim.New(pvesim.Options{TaskDelay: 20 * time.Millisecond, AgentDelay: 50 * time.Millisecond, ACL: acl})
	t.Cleanup(sim.Close)
	c, err := Connect(context.Background(), connection(sim, sim.Secret), Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spec := machine("team.denied", "9d0e1f2a-4444-4a5b-9c8d-7e6f5a4b3c2d")
	built(t, sim, c, spec)
	snap := providers.SnapshotSpec{Name: providers.SnapshotName("44444444-aaaa-4bbb-8ccc-000000000001")}
	_, err = c.CreateSnapshot(context.Background(), spec, snap, "", (&recorder{}).record)
	if err == nil || !strings.Contains(err.Error(), "403") || !strings.Contains(err.Error(), "Permission check failed (/vms/100, VM.Snapshot)") {
		t.Errorf("a snapshot without VM.Snapshot: %v", err)
	}
	if snaps := sim.Snapshots(100); len(snaps) != 0 {
		t.Errorf("snapshots %+v", snaps)
	}
}
