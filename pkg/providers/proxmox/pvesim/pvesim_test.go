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
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
)

func start(t *testing.T) (*Simulator, *proxmox.Client) {
	t.Helper()
	s := New(Options{TaskDelay: 30 * time.Millisecond, AgentDelay: 50 * time.Millisecond})
	t.Cleanup(s.Close)
	return s, proxmox.NewClient(s.URL, proxmox.WithHTTPClient(s.Client()), proxmox.WithAPIToken(s.TokenID, s.Secret))
}

func wait(t *testing.T, task *proxmox.Task) error {
	t.Helper()
	return task.Wait(context.Background(), 10*time.Millisecond, 5*time.Second)
}

func TestAuthentication(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	if v, err := c.Version(ctx); err != nil || v.Version != Version {
		t.Fatalf("Version = %+v, %v", v, err)
	}
	for name, client := range map[string]*proxmox.Client{
		"no token":     proxmox.NewClient(s.URL, proxmox.WithHTTPClient(s.Client())),
		"wrong secret": proxmox.NewClient(s.URL, proxmox.WithHTTPClient(s.Client()), proxmox.WithAPIToken(s.TokenID, "guess")),
		"wrong token":  proxmox.NewClient(s.URL, proxmox.WithHTTPClient(s.Client()), proxmox.WithAPIToken("root@pam!other", s.Secret)),
	} {
		if _, err := client.Version(ctx); !errors.Is(err, proxmox.ErrNotAuthorized) {
			t.Errorf("%s: %v, want not authorized", name, err)
		}
	}
}

func TestCloneRules(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	cl, err := c.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// nextid reserves nothing: two callers get the same VMID.
	a, _ := cl.NextID(ctx)
	b, _ := cl.NextID(ctx)
	if a != 100 || b != a {
		t.Fatalf("nextid gave %d then %d, want 100 twice", a, b)
	}
	tmpl, err := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	if err != nil {
		t.Fatal(err)
	}
	_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: a, Name: "one", Full: true, Target: "pve2", Storage: "local-lvm", Description: "uid=1"})
	if err != nil {
		t.Fatal(err)
	}
	// The clone exists at once, locked until its task ends.
	if vms := s.VMs(); len(vms) != 2 || vms[0].Lock != "clone" {
		t.Fatalf("during the clone: %+v", vms)
	}
	if _, _, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: b, Name: "two", Full: true}); err == nil || !strings.Contains(err.Error(), "already exists") {
		t.Errorf("a second clone onto VMID %d: %v", b, err)
	}
	if err := wait(t, task); err != nil {
		t.Fatal(err)
	}
	vm, err := c.NodeRef("pve2").VirtualMachine(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	if vm.Name != "one" || vm.Lock != "" || vm.VirtualMachineConfig.Description != "uid=1" {
		t.Errorf("clone %+v", vm)
	}
	if !strings.HasPrefix(vm.VirtualMachineConfig.SCSIs["scsi0"], "local-lvm:vm-100-disk-0,size=8G") {
		t.Errorf("clone disk %q", vm.VirtualMachineConfig.SCSIs["scsi0"])
	}
	for name, opts := range map[string]*proxmox.VirtualMachineCloneOptions{
		"unknown node":    {NewID: 200, Full: true, Target: "pve9"},
		"unknown storage": {NewID: 201, Full: true, Storage: "fast"},
	} {
		if _, _, err := tmpl.Clone(ctx, opts); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := c.NodeRef("pve9").VirtualMachine(ctx, 9000); err == nil || !strings.Contains(err.Error(), "hostname lookup 'pve9' failed") {
		t.Errorf("an unknown node: %v", err)
	}
}

func TestPowerDeleteAndAgent(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	tmpl, _ := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	id, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 101, Name: "vm", Full: true})
	if err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	vm := c.NodeRef("pve1").VirtualMachineRef(id)
	task, err = vm.Config(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 4}, proxmox.VirtualMachineOption{Name: "scsi1", Value: "local-lvm:20"},
		proxmox.VirtualMachineOption{Name: "ipconfig0", Value: "ip=192.0.2.10/24,gw=192.0.2.1"})
	if err != nil || wait(t, task) != nil {
		t.Fatalf("config: %v", err)
	}
	if task, err = vm.ResizeDisk(ctx, "scsi0", "+2G"); err != nil || wait(t, task) != nil {
		t.Fatalf("resize: %v", err)
	}
	if _, err := vm.ResizeDisk(ctx, "scsi0", "4G"); err == nil || !strings.Contains(err.Error(), "shrinking") {
		t.Errorf("shrink: %v", err)
	}
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatalf("start: %v", err)
	}
	if _, err := vm.Delete(ctx, nil); err == nil || !strings.Contains(err.Error(), "is running") {
		t.Errorf("deleting a running VM: %v", err)
	}
	// While running, cores wait for the next start.
	if task, err = vm.Config(ctx, proxmox.VirtualMachineOption{Name: "cores", Value: 8}); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if err := vm.Ping(ctx); err != nil || vm.CPUs != 4 || *vm.VirtualMachineConfig.Cores != 4 {
		t.Errorf("running VM: cpus %d, cores %d, %v", vm.CPUs, *vm.VirtualMachineConfig.Cores, err)
	}
	var ifaces []*proxmox.AgentNetworkIface
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		if ifaces, err = vm.AgentGetNetworkIFaces(ctx); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil || len(ifaces) != 1 || ifaces[0].IPAddresses[0].IPAddress != "192.0.2.10" {
		t.Fatalf("agent interfaces %+v, %v", ifaces, err)
	}
	if task, err = vm.Stop(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if err := vm.Ping(ctx); err != nil || *vm.VirtualMachineConfig.Cores != 8 {
		t.Errorf("stopped VM: cores %d, %v", *vm.VirtualMachineConfig.Cores, err)
	}
	if got := s.VMs()[0].Volumes; len(got) != 2 || got["local-lvm:vm-101-disk-0"] != 10 || got["local-lvm:vm-101-disk-1"] != 20 {
		t.Errorf("volumes %v", got)
	}
	if task, err = vm.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true}); err != nil || wait(t, task) != nil {
		t.Fatalf("delete: %v", err)
	}
	for _, v := range s.Volumes() {
		if strings.Contains(v, "vm-101-") {
			t.Errorf("left behind: %s", v)
		}
	}
}

func TestFaults(t *testing.T) {
	s, c := start(t)
	ctx := context.Background()
	tmpl, _ := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	s.FailTasks("qmclone", "clone failed: storage full")
	_, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 150, Full: true})
	if err != nil {
		t.Fatal(err)
	}
	var failed *proxmox.TaskFailedError
	if err := wait(t, task); !errors.As(err, &failed) || failed.ExitStatus != "clone failed: storage full" {
		t.Fatalf("a failing clone: %v", err)
	}
	if len(s.VMs()) != 1 {
		t.Errorf("the failed clone left %v", s.VMs())
	}
	s.FailTasks("qmclone", "")
	s.SetNodeOnline("pve2", false)
	if _, err := c.NodeRef("pve2").VirtualMachines(ctx); !errors.Is(err, proxmox.ErrNodeUnreachable) {
		t.Errorf("a node down: %v", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 3 || nodes[1].Status != "offline" {
		t.Errorf("nodes %+v, %v", nodes, err)
	}
	if got := s.Requests()["POST qemu clone"]; got != 1 {
		t.Errorf("clone requests counted %d, want 1", got)
	}
	resp, err := s.Client().Get(s.URL + "/version")
	if err == nil {
		resp.Body.Close()
	}
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("an unauthenticated GET: %v %v", resp, err)
	}
}

// TestDriveDeletionWhileRunning: as qemu-server, a running VM's IDE drive
// is not unplugged: its deletion stays pending ("delete": 1) until the VM
// stops. A CD-ROM's medium changes live, ejected (none) included.
func TestDriveDeletionWhileRunning(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	tmpl, _ := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	id, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 102, Name: "cd", Full: true})
	if err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	vm := c.NodeRef("pve1").VirtualMachineRef(id)
	config := func(opts ...proxmox.VirtualMachineOption) {
		t.Helper()
		task, err := vm.Config(ctx, opts...)
		if err != nil || wait(t, task) != nil {
			t.Fatalf("config %v: %v", opts, err)
		}
		if err := vm.Ping(ctx); err != nil {
			t.Fatal(err)
		}
	}
	config(proxmox.VirtualMachineOption{Name: "ide2", Value: "local:cloudinit,media=cdrom"})
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatalf("start: %v", err)
	}
	config(proxmox.VirtualMachineOption{Name: "ide2", Value: "none,media=cdrom"})
	if got := vm.VirtualMachineConfig.IDEs["ide2"]; got != "none,media=cdrom" {
		t.Errorf("ejected while running: ide2 %q", got)
	}
	config(proxmox.VirtualMachineOption{Name: "delete", Value: "ide2"})
	var pending []map[string]any
	if err := c.Get(ctx, "/nodes/pve1/qemu/102/pending", &pending); err != nil {
		t.Fatal(err)
	}
	deleting := false
	for _, p := range pending {
		deleting = deleting || p["key"] == "ide2" && p["delete"] == float64(1)
	}
	if got := vm.VirtualMachineConfig.IDEs["ide2"]; got != "none,media=cdrom" || !deleting {
		t.Errorf("ide2 deleted while running: config %q, pending delete %v (%v)", got, deleting, pending)
	}
	if task, err = vm.Stop(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if err := vm.Ping(ctx); err != nil || vm.VirtualMachineConfig.IDEs["ide2"] != "" {
		t.Errorf("after the stop: ide2 %q, %v", vm.VirtualMachineConfig.IDEs["ide2"], err)
	}
}

// TestOSType: ostype is one of qemu-server's values (400 naming the
// enumeration otherwise, before any task), read back from the config, and
// pending on a running VM until its next start.
func TestOSType(t *testing.T) {
	_, c := start(t)
	ctx := context.Background()
	tmpl, _ := c.NodeRef("pve1").VirtualMachine(ctx, 9000)
	if got := tmpl.VirtualMachineConfig.OSType; got == nil || *got != "l26" {
		t.Errorf("the template's ostype %v, want l26", got)
	}
	id, task, err := tmpl.Clone(ctx, &proxmox.VirtualMachineCloneOptions{NewID: 103, Name: "os", Full: true})
	if err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	vm := c.NodeRef("pve1").VirtualMachineRef(id)
	ostype := func() string {
		t.Helper()
		if err := vm.Ping(ctx); err != nil {
			t.Fatal(err)
		}
		if p := vm.VirtualMachineConfig.OSType; p != nil {
			return *p
		}
		return ""
	}
	if _, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "ostype", Value: "w2k19"}); err == nil ||
		!strings.Contains(err.Error(), "does not have a value in the enumeration 'other, wxp, w2k, w2k3, w2k8, wvista, win7, win8, win10, win11, l24, l26, solaris'") {
		t.Errorf("ostype w2k19: %v, want refused", err)
	}
	for _, want := range OSTypes {
		task, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "ostype", Value: want})
		if err != nil || wait(t, task) != nil {
			t.Fatalf("ostype %s: %v", want, err)
		}
		if got := ostype(); got != want {
			t.Errorf("ostype %q, want %q", got, want)
		}
	}
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatalf("start: %v", err)
	}
	if task, err = vm.Config(ctx, proxmox.VirtualMachineOption{Name: "ostype", Value: "win11"}); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if got := ostype(); got != "solaris" {
		t.Errorf("running: ostype %q, want solaris until the next start", got)
	}
	if task, err = vm.Stop(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if task, err = vm.Start(ctx); err != nil || wait(t, task) != nil {
		t.Fatal(err)
	}
	if got := ostype(); got != "win11" {
		t.Errorf("after a restart: ostype %q, want win11", got)
	}
}
