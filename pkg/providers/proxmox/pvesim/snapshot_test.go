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
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

// running clones the template into VM 101 and starts it.
func running(t *testing.T, c *proxmox.Client) *proxmox.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	tmpl, _ := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 101, Name: "snap", Full: true, Description: "owner"})
	if err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	vm := c.NodeRef("pve1").VirtualMachineRef(101)
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	return vm
}

// upidTask is the task of the UPID a POST or DELETE answered.
func upidTask(t *testing.T, c *proxmox.Client, method, path string, args map[string]any) *proxmox.Task {
	t.Helper()
	var upid proxmox.UPID
	var err error
	if method == http.MethodDelete {
		err = c.Delete(context.Background(), path, &upid)
	} else {
		err = c.Post(context.Background(), path, args, &upid)
	}
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	return proxmox.NewTask(upid, c)
}

// exit is a task's failure text ("" when it ended OK).
func exit(t *testing.T, task *proxmox.Task) string {
	t.Helper()
	err := wait(t, task)
	var failed *proxmox.TaskFailedError
	if errors.As(err, &failed) {
		return failed.ExitStatus
	}
	if err != nil {
		t.Fatal(err)
	}
	return ""
}

// form sends a form-encoded request and returns the status and body.
func form(t *testing.T, s *Simulator, method, path string, kv ...string) (int, string) {
	t.Helper()
	v := url.Values{}
	for i := 0; i < len(kv); i += 2 {
		v.Set(kv[i], kv[i+1])
	}
	req, _ := http.NewRequest(method, s.URL+path, strings.NewReader(v.Encode()))
	req.Header.Set("Authorization", fmt.Sprintf("PVEAPIToken=%s=%s", s.TokenID, s.Secret))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestSnapshots: a snapshot is in the config (snapstate prepare, the VM
// locked) from its task's start, so a second create of its name fails in
// its task, during it and after; rollback restores the config and the
// disks' sizes, keeps the description, resumes a VM whose memory the
// snapshot holds and leaves it stopped otherwise (or started, with
// start=1); delete re-parents; a missing snapshot fails the task, not
// the request; names are checked as pve-configid; destroying the VM
// takes its snapshots and their memory.
func TestSnapshots(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	vm := running(t, c)
	base := "/nodes/pve1/qemu/101/snapshot"

	s.SetTaskDelay(300 * time.Millisecond)
	first := upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "s1", "description": "before", "vmstate": 1})
	if snaps := s.Snapshots(101); len(snaps) != 1 || snaps[0].State != "prepare" || !snaps[0].Memory {
		t.Fatalf("during the create: %+v", snaps)
	}
	if err := vm.Ping(ctx); err != nil || vm.Lock != "snapshot" {
		t.Errorf("during the create the VM is locked %q (%v), want snapshot", vm.Lock, err)
	}
	again := upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "s1"})
	s.SetTaskDelay(30 * time.Millisecond)
	if got := exit(t, again); got != "VM is locked (snapshot)" {
		t.Errorf("a second create during the first: %q", got)
	}
	if got := exit(t, first); got != "" {
		t.Fatalf("the create: %q", got)
	}
	if got := exit(t, upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "s1"})); got != "snapshot name 's1' already used" {
		t.Errorf("a second create after the first: %q", got)
	}
	if got := s.Requests()["POST qemu snapshot"]; got != 3 {
		t.Errorf("%d creates counted, want 3", got)
	}
	// A change after s1, then s2 without memory, then a disk grown.
	if task, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "tags", Value: "after"}, proxmox.VirtualMachineOption{Name: "description", Value: "owner, changed"}); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if got := exit(t, upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "s2", "vmstate": 0})); got != "" {
		t.Fatal(got)
	}
	if task, err := vm.ResizeDisk(ctx, "scsi0", "+2G"); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	snaps, err := vm.Snapshots(ctx)
	if err != nil || len(snaps) != 3 || snaps[0].Name != "s2" || snaps[0].Parent != "s1" || snaps[0].Vmstate != 0 ||
		snaps[1].Name != "s1" || snaps[1].Parent != "" || snaps[1].Vmstate != 1 || snaps[1].Description != "before" || snaps[1].Snaptime == 0 ||
		snaps[2].Name != "current" || snaps[2].Parent != "s2" || snaps[2].Description != "You are here!" {
		t.Fatalf("list %+v, %v", snaps, err)
	}

	// Back to s1: its memory resumes the VM; tags go, the
	// description stays, the disk is 8 GiB again.
	if got := exit(t, upidTask(t, c, http.MethodPost, base+"/s1/rollback", nil)); got != "" {
		t.Fatal(got)
	}
	v := s.VMs()[0]
	if v.Status != "running" || v.Config["tags"] != nil || v.Config["description"] != "owner, changed" || v.Volumes["local-lvm:vm-101-disk-0"] != 8 {
		t.Errorf("after rolling back to s1: status %s, config %v, volumes %v", v.Status, v.Config, v.Volumes)
	}
	if _, err := vm.AgentGetNetworkIFaces(ctx); err != nil {
		t.Errorf("a VM resumed from its memory has its agent up: %v", err)
	}
	// Back to s2, which holds no memory: the running VM is stopped.
	if got := exit(t, upidTask(t, c, http.MethodPost, base+"/s2/rollback", nil)); got != "" {
		t.Fatal(got)
	}
	if v := s.VMs()[0]; v.Status != "stopped" || v.Config["tags"] != "after" {
		t.Errorf("after rolling back to s2: status %s, tags %v", v.Status, v.Config["tags"])
	}
	boots := s.VMs()[0].Boots
	if got := exit(t, upidTask(t, c, http.MethodPost, base+"/s2/rollback", map[string]any{"start": 1})); got != "" {
		t.Fatal(got)
	}
	if v := s.VMs()[0]; v.Status != "running" || v.Boots != boots+1 {
		t.Errorf("after rolling back to s2 with start: status %s, boots %d (was %d)", v.Status, v.Boots, boots)
	}
	if got := exit(t, upidTask(t, c, http.MethodPost, base+"/nope/rollback", nil)); got != "snapshot 'nope' does not exist" {
		t.Errorf("a rollback to a missing snapshot: %q", got)
	}

	// The snapshot's config, and its description changed.
	var cfg map[string]any
	if err := c.Get(ctx, base+"/s1/config", &cfg); err != nil || cfg["description"] != "before" || cfg["vmstate"] != "local-lvm:vm-101-state-s1" || cfg["name"] != "snap" {
		t.Errorf("s1's config %v, %v", cfg, err)
	}
	if err := c.Put(ctx, base+"/s1/config", map[string]any{"description": "renamed"}, nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, base+"/nope/config", &cfg); err == nil || !strings.Contains(err.Error(), "snapshot 'nope' does not exist") {
		t.Errorf("a missing snapshot's config: %v", err)
	}

	// Deleting s1 makes s2 a root; its memory goes.
	if got := exit(t, upidTask(t, c, http.MethodDelete, base+"/s1", nil)); got != "" {
		t.Fatal(got)
	}
	if snaps := s.Snapshots(101); len(snaps) != 1 || snaps[0].Name != "s2" || snaps[0].Parent != "" {
		t.Errorf("after deleting s1: %+v", snaps)
	}
	if got := exit(t, upidTask(t, c, http.MethodDelete, base+"/s1", nil)); got != "snapshot 's1' does not exist" {
		t.Errorf("deleting s1 again: %q", got)
	}
	for _, vol := range s.Volumes() {
		if strings.Contains(vol, "state-s1") {
			t.Errorf("s1's memory is left: %s", vol)
		}
	}

	// Names: pve-configid, 40 at most; current is reserved.
	for name, want := range map[string]string{
		"1abc":                  "invalid configuration ID '1abc'",
		"a":                     "invalid configuration ID 'a'",
		"a.b":                   "invalid configuration ID 'a.b'",
		strings.Repeat("a", 41): "value may only be 40 characters long",
	} {
		code, body := form(t, s, http.MethodPost, base, "snapname", name)
		var e struct{ Errors map[string]string }
		_ = json.Unmarshal([]byte(body), &e)
		if code != http.StatusBadRequest || !strings.Contains(e.Errors["snapname"], want) {
			t.Errorf("snapname %q: %d %s", name, code, body)
		}
	}
	if code, body := form(t, s, http.MethodPost, base, "snapname", strings.Repeat("a", 40)); code != http.StatusOK {
		t.Errorf("a 40-character name: %d %s", code, body)
	}
	if code, body := form(t, s, http.MethodPost, base, "snapname", "current"); code != http.StatusInternalServerError || !strings.Contains(body, "reserved name") {
		t.Errorf("snapname current: %d %s", code, body)
	}

	// A snapshot of a stopped VM keeps no memory, even when asked.
	if task, err := vm.Stop(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if got := exit(t, upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "off", "vmstate": 1})); got != "" {
		t.Fatal(got)
	}
	if snaps := s.Snapshots(101); snaps[0].Name != "off" || snaps[0].Memory {
		t.Errorf("a stopped VM's snapshot: %+v", snaps[0])
	}
	// An injected failure removes what the create prepared.
	s.FailTasks("qmsnapshot", "snapshot feature is not available")
	if got := exit(t, upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "failed"})); got != "snapshot feature is not available" {
		t.Errorf("the failed create: %q", got)
	}
	s.FailTasks("qmsnapshot", "")
	if err := vm.Ping(ctx); err != nil || vm.Lock != "" || len(s.Snapshots(101)) != 3 {
		t.Errorf("after a failed create: lock %q, snapshots %+v, %v", vm.Lock, s.Snapshots(101), err)
	}

	// Destroying the VM takes its snapshots.
	if task, err := vm.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true}); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if snaps := s.Snapshots(101); snaps != nil {
		t.Errorf("after destroying the VM: %+v", snaps)
	}
	for _, vol := range s.Volumes() {
		if strings.Contains(vol, "vm-101-") {
			t.Errorf("left behind: %s", vol)
		}
	}
}

// TestSnapshotPermissions: create and delete take VM.Snapshot; rollback
// and reading a snapshot's config take VM.Snapshot or
// VM.Snapshot.Rollback; the list takes VM.Audit.
func TestSnapshotPermissions(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	running(t, c)
	base := "/nodes/pve1/qemu/101/snapshot"
	if got := exit(t, upidTask(t, c, http.MethodPost, base, map[string]any{"snapname": "s1"})); got != "" {
		t.Fatal(got)
	}
	var upid proxmox.UPID
	s.SetACL([]ACL{{Path: "/vms", Privileges: []string{"VM.Audit", "VM.Snapshot.Rollback"}}})
	if err := c.Post(ctx, base, map[string]any{"snapname": "s2"}, &upid); err == nil || !strings.Contains(err.Error(), "Permission check failed (/vms/101, VM.Snapshot)") {
		t.Errorf("a create without VM.Snapshot: %v", err)
	}
	if err := c.Delete(ctx, base+"/s1", &upid); err == nil || !strings.Contains(err.Error(), "Permission check failed (/vms/101, VM.Snapshot)") {
		t.Errorf("a delete without VM.Snapshot: %v", err)
	}
	if err := c.Get(ctx, base+"/s1/config", &map[string]any{}); err != nil {
		t.Errorf("a snapshot's config with VM.Snapshot.Rollback: %v", err)
	}
	if got := exit(t, upidTask(t, c, http.MethodPost, base+"/s1/rollback", nil)); got != "" {
		t.Errorf("a rollback with VM.Snapshot.Rollback: %q", got)
	}
	s.SetACL([]ACL{{Path: "/vms", Privileges: []string{"VM.Audit", "VM.Snapshot"}}})
	if got := exit(t, upidTask(t, c, http.MethodPost, base+"/s1/rollback", nil)); got != "" {
		t.Errorf("a rollback with VM.Snapshot: %q", got)
	}
	s.SetACL([]ACL{{Path: "/vms", Privileges: []string{"VM.Audit"}}})
	if err := c.Post(ctx, base+"/s1/rollback", nil, &upid); err == nil || !strings.Contains(err.Error(), "(/vms/101, VM.Snapshot|VM.Snapshot.Rollback)") {
		t.Errorf("a rollback with neither: %v", err)
	}
	if err := c.Get(ctx, base, &[]map[string]any{}); err != nil {
		t.Errorf("the list with VM.Audit: %v", err)
	}
	s.SetACL([]ACL{{Path: "/vms", Privileges: []string{"VM.Snapshot"}}})
	if err := c.Get(ctx, base, &[]map[string]any{}); err == nil || !strings.Contains(err.Error(), "(/vms/101, VM.Audit)") {
		t.Errorf("the list without VM.Audit: %v", err)
	}
}

// TestSnapshotShapesMatchRecordings: the snapshot list and a snapshot's
// config decode with go-proxmox as the recordings of real Proxmox VE do,
// with their fields' kinds; create, rollback and delete answer a UPID of
// the recorded task types.
func TestSnapshotShapesMatchRecordings(t *testing.T) {
	recs := recordings(t)
	s, c := start(t)
	running(t, c)
	base := "/nodes/pve1/qemu/101/snapshot"
	for _, e := range []struct {
		method, sim, recorded string
		body                  []string
	}{
		{"POST", base, "/nodes/node1/qemu/100/snapshot", []string{"snapname", "snap1", "vmstate", "1", "description", "Before upgrade"}},
		{"POST", base, "/nodes/node1/qemu/100/snapshot", []string{"snapname", "snap2", "description", "After upgrade"}},
		{"POST", base + "/snap1/rollback", "/nodes/node1/qemu/100/snapshot/snap1/rollback", nil},
		{"DELETE", base + "/snap2", "/nodes/node1/qemu/100/snapshot/snap2", nil},
		{"POST", base, "/nodes/node1/qemu/100/snapshot", []string{"snapname", "snap2", "description", "After upgrade"}},
	} {
		code, body := form(t, s, e.method, e.sim, e.body...)
		if code != http.StatusOK {
			t.Fatalf("%s %s: %d %s", e.method, e.sim, code, body)
		}
		simType := upidType(t, body)
		for _, r := range recorded(t, recs, e.method, e.recorded) {
			if typ := upidType(t, r.body); typ != simType {
				t.Errorf("%s %s: the simulator's task is a %s, %s recorded a %s", e.method, e.sim, simType, r.version, typ)
			}
		}
		var env struct{ Data string }
		_ = json.Unmarshal([]byte(body), &env)
		task := proxmox.NewTask(proxmox.UPID(env.Data), c)
		if err := wait(t, task); err != nil {
			t.Fatalf("%s %s: %v", e.method, e.sim, err)
		}
	}
	t.Run("GET snapshot", func(t *testing.T) {
		sameShape(t, simGet(t, s, base), recorded(t, recs, "GET", "/nodes/node1/qemu/100/snapshot"),
			func() any { return &[]*proxmox.VirtualMachineSnapshot{} }, []string{"data.name", "data.description", "data.snaptime", "data.vmstate", "data.parent"})
	})
	t.Run("GET snapshot config", func(t *testing.T) {
		sameShape(t, simGet(t, s, base+"/snap2/config"), recorded(t, recs, "GET", "/nodes/node1/qemu/100/snapshot/snap1/config"),
			func() any { return &map[string]any{} }, []string{"data.description", "data.parent", "data.cores", "data.memory", "data.name"})
	})
}
