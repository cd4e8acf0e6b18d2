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
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	goproxmox "github.com/luthermonson/go-proxmox"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

func simulate(t *testing.T) (*pvesim.Simulator, *Client) {
	t.Helper()
	sim := pvesim.New(pvesim.Options{TaskDelay: 20 * time.Millisecond, AgentDelay: 50 * time.Millisecond})
	t.Cleanup(sim.Close)
	c, err := Connect(context.Background(), connection(sim, sim.Secret), Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

func connection(sim *pvesim.Simulator, secret string) providers.Connection {
	return providers.Connection{Endpoint: sim.URL, CABundle: sim.CA, Credentials: providers.Credentials{Username: sim.TokenID, Password: secret}}
}

// recorder keeps what a machine reconciler would write to status.taskRef.
type recorder struct {
	mu   sync.Mutex
	refs []string
	// before, when set, runs at each record (a racing client, a crash).
	before func(ref string) error
}

func (r *recorder) record(_ context.Context, ref string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.before != nil {
		if err := r.before(ref); err != nil {
			return err
		}
	}
	r.refs = append(r.refs, ref)
	return nil
}

func (r *recorder) last() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.refs) == 0 {
		return ""
	}
	return r.refs[len(r.refs)-1]
}

func machine(name, uid string) providers.MachineSpec {
	return providers.MachineSpec{
		Name: name, HostName: name, InstanceUUID: uid, Location: failuredomain.Location{Host: "pve1"}, Image: "debian-12-cloud",
		CPUs: 2, MemoryMiB: 2048, Firmware: "efi-secure", TPM: true, PowerState: infrav1.PowerStatePoweredOn, UserData: []byte("#cloud-config\nhostname: " + name + "\n"),
		Disks: []providers.Disk{{Name: "root", SizeGiB: 20, Target: "local-lvm"}, {Name: "data", SizeGiB: 5, Target: "local-lvm"}},
		NICs:  []providers.NIC{{Name: "eth0", Bridge: "vmbr1", VLAN: 20, Static: &providers.StaticIP{Address: "192.0.2.50", Prefix: 24, Gateway: "192.0.2.1"}}},
	}
}

func namedVMs(sim *pvesim.Simulator, name string) []pvesim.VM {
	var out []pvesim.VM
	for _, v := range sim.VMs() {
		if v.Name == name {
			out = append(out, v)
		}
	}
	return out
}

func TestConnectAndInventory(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	if _, err := Connect(ctx, connection(sim, "wrong"), Options{}); !errors.Is(err, providers.ErrConnect) || !strings.Contains(err.Error(), "token was refused") {
		t.Errorf("a wrong token: %v", err)
	}
	locs, err := c.Inventory(ctx)
	if err != nil || len(locs) != 3 || locs[0].Host != "pve1" {
		t.Fatalf("inventory %v, %v", locs, err)
	}
	for _, tc := range []struct {
		node, ref string
		want      bool
	}{{"pve1", "debian-12-cloud", true}, {"pve1", "9000", true}, {"pve2", "debian-12-cloud", false}, {"pve1", "ubuntu", false}, {"", "debian-12-cloud", true}, {"", "ubuntu", false}} {
		if got, err := c.ImageExists(ctx, failuredomain.Location{Host: tc.node}, tc.ref); err != nil || got != tc.want {
			t.Errorf("ImageExists(%s, %s) = %v, %v", tc.node, tc.ref, got, err)
		}
	}
}

// TestMachineLifecycle: a full clone sized, on its bridge and VLAN, with
// EFI secure boot, a vTPM, a cloud-init seed and its static address from
// the agent; the VMID recorded before the clone; converging again changes
// nothing; a CPU change restarts it; power states; deleting leaves no VM,
// volume or seed.
func TestMachineLifecycle(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	spec := machine("team.web", "0b9a3c4e-1111-4a5b-9c8d-7e6f5a4b3c2d")
	rec := &recorder{}
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(rec.refs[0], "pve1/100") || strings.Count(rec.refs[0], "/") != 1 {
		t.Errorf("the first record %q is not the VMID alone, before the clone", rec.refs[0])
	}
	if !st.Created || st.ProviderID != "proxmox://"+spec.InstanceUUID || st.CPUs != 2 || st.MemoryMiB != 2048 || st.Firmware != "efi-secure" || !st.TPM ||
		!slices.Equal(st.DiskSizesGiB, []int64{20, 5}) || !slices.Equal(st.Networks, []string{"vmbr1"}) || st.PowerState != infrav1.PowerStatePoweredOn || st.Handle != "pve1/100" {
		t.Errorf("status %+v", st)
	}
	vm := namedVMs(sim, "team.web")[0]
	for key, want := range map[string]string{"net0": "bridge=vmbr1,tag=20", "ipconfig0": "ip=192.0.2.50/24,gw=192.0.2.1",
		"ide2": "local:iso/banlieue-" + spec.InstanceUUID + ".iso,media=cdrom", "description": "banlieue-uid: " + spec.InstanceUUID} {
		if got, _ := vm.Config[key].(string); !strings.Contains(got, want) {
			t.Errorf("config %s = %q, want it to contain %q", key, got, want)
		}
	}
	// The address comes from the guest agent once it answers.
	deadline := time.Now().Add(5 * time.Second)
	for st.IPAddress == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		spec.TaskRef = rec.last()
		if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
	}
	if st.IPAddress != "192.0.2.50" || st.Created {
		t.Errorf("again: address %q, created %v", st.IPAddress, st.Created)
	}
	before := sim.Requests()
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	after := sim.Requests()
	for _, mutating := range []string{"POST qemu clone", "POST qemu config POST", "PUT qemu resize", "POST qemu start", "POST upload"} {
		if after[mutating] != before[mutating] {
			t.Errorf("converging a converged VM sent %s", mutating)
		}
	}
	// Once built, the caller no longer reads the user data: converging
	// without it changes nothing, the seed included.
	omitted := spec
	omitted.UserData, omitted.UserDataOmitted = nil, true
	if _, err := c.EnsureMachine(ctx, omitted, rec.record); err != nil {
		t.Errorf("converging without the user data: %v", err)
	}
	if again := sim.Requests(); again["POST upload"] != after["POST upload"] || again["POST qemu config POST"] != after["POST qemu config POST"] {
		t.Errorf("converging without the user data changed the VM or its seed")
	}
	// A VM that must be built is not built without it.
	fresh := omitted
	fresh.Name, fresh.InstanceUUID = "team.web-1", "0b9a3c4e-1111-4a5b-9c8d-7e6f5a4b3c2e"
	if _, err := c.EnsureMachine(ctx, fresh, rec.record); !errors.Is(err, providers.ErrUserDataNeeded) {
		t.Errorf("building a VM without its user data: %v, want ErrUserDataNeeded", err)
	}
	if left := namedVMs(sim, fresh.Name); len(left) != 0 {
		t.Errorf("a VM was built without its user data: %v", left)
	}
	// The CPU change's restart and each state in one call: Hard, as a
	// soft power-off waits for the guest across calls (TestPowerOffModes,
	// TestResizeHonoursPowerOffMode).
	spec.PowerOffMode = infrav1.PowerOffModeHard
	spec.CPUs = 4
	if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil || st.CPUs != 4 || st.PowerState != infrav1.PowerStatePoweredOn || st.Restarting {
		t.Errorf("after a CPU change: %+v, %v", st, err)
	}
	for _, want := range []infrav1.PowerState{infrav1.PowerStateSuspended, infrav1.PowerStatePoweredOff, infrav1.PowerStatePoweredOn} {
		spec.PowerState = want
		if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil || st.PowerState != want {
			t.Errorf("power %s: %s, %v", want, st.PowerState, err)
		}
	}
	spec.TaskRef = rec.last()
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if left := namedVMs(sim, "team.web"); len(left) != 0 {
		t.Errorf("left %v", left)
	}
	for _, v := range sim.Volumes() {
		if strings.Contains(v, "vm-100-") || strings.Contains(v, spec.InstanceUUID) {
			t.Errorf("left behind: %s", v)
		}
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Errorf("deleting again: %v", err)
	}
}

// TestNextIDRace: another client takes the VMID nextid gave between the
// record and the clone; the clone is refused and the next VMID is used,
// the other VM untouched.
func TestNextIDRace(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	other := goproxmox.NewClient(sim.URL, goproxmox.WithHTTPClient(sim.Client()), goproxmox.WithAPIToken(sim.TokenID, sim.Secret))
	raced := false
	rec := &recorder{before: func(ref string) error {
		if raced || ref != "pve1/100" {
			return nil
		}
		raced = true
		tmpl, err := other.NodeRef("pve1").VirtualMachine(ctx, 9000)
		if err != nil {
			return err
		}
		_, task, err := tmpl.Clone(ctx, &goproxmox.VirtualMachineCloneOptions{NewID: 100, Name: "someone-else", Full: true})
		if err != nil {
			return err
		}
		return task.Wait(ctx, 10*time.Millisecond, 5*time.Second)
	}}
	st, err := c.EnsureMachine(ctx, machine("team.db", "5d4c3b2a-2222-4a5b-9c8d-7e6f5a4b3c2d"), rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if st.Handle != "pve1/101" || !raced {
		t.Errorf("handle %s (raced %v), want pve1/101", st.Handle, raced)
	}
	if vms := namedVMs(sim, "someone-else"); len(vms) != 1 || vms[0].VMID != 100 || strings.Contains(fmt.Sprint(vms[0].Config["description"]), "banlieue") {
		t.Errorf("the other client's VM: %+v", vms)
	}
}

// TestCrashMidClone: the provider dies once the clone started (its record
// of the task fails); started again with the VMID it had recorded, it
// waits for the clone and builds on that VM: exactly one VM. A VM of the
// same name without the object's mark is never taken for it.
func TestCrashMidClone(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	spec := machine("team.cache", "9e8d7c6b-3333-4a5b-9c8d-7e6f5a4b3c2d")
	crash := errors.New("provider killed")
	rec := &recorder{before: func(ref string) error {
		if strings.Count(ref, "/") == 2 {
			return crash
		}
		return nil
	}}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); !errors.Is(err, crash) {
		t.Fatalf("the crash: %v", err)
	}
	if vms := namedVMs(sim, "team.cache"); len(vms) != 1 || vms[0].Lock != "clone" {
		t.Fatalf("mid-clone: %+v", vms)
	}
	restarted, err := Connect(ctx, connection(sim, sim.Secret), Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	spec.TaskRef = rec.last()
	rec.before = nil
	st, err := restarted.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if st.Created || len(namedVMs(sim, "team.cache")) != 1 {
		t.Errorf("after the restart: created %v, VMs %d", st.Created, len(namedVMs(sim, "team.cache")))
	}
	if got := sim.Requests()["POST qemu clone"]; got != 1 {
		t.Errorf("%d clones, want 1", got)
	}
	// A stranger's VM of the same name.
	spec2 := machine("team.cache", "77777777-4444-4a5b-9c8d-7e6f5a4b3c2d")
	if _, err := restarted.EnsureMachine(ctx, spec2, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	if vms := namedVMs(sim, "team.cache"); len(vms) != 2 {
		t.Errorf("another object's VM was taken for this one: %d VMs", len(vms))
	}
}

// TestCloneOntoAnotherNode: the template is on pve1; a machine of pve2 is
// a full clone onto pve2.
func TestCloneOntoAnotherNode(t *testing.T) {
	sim, c := simulate(t)
	spec := machine("team.far", "1a2b3c4d-5555-4a5b-9c8d-7e6f5a4b3c2d")
	spec.Location.Host = "pve2"
	st, err := c.EnsureMachine(context.Background(), spec, (&recorder{}).record)
	if err != nil {
		t.Fatal(err)
	}
	if vms := namedVMs(sim, "team.far"); len(vms) != 1 || vms[0].Node != "pve2" || !strings.HasPrefix(st.Handle, "pve2/") {
		t.Errorf("VMs %+v, handle %s", vms, st.Handle)
	}
}

// TestTemplateNotADecoy (issue 31): a plain VM named exactly like the
// template (a tenant's VM "<namespace>.<name>" can be), on the node a
// machine is built on, is never cloned in its place: only a template is.
func TestTemplateNotADecoy(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	small := func(name, uid string) providers.MachineSpec {
		s := machine(name, uid)
		s.Location.Host, s.Disks = "pve2", s.Disks[:1]
		return s
	}
	if _, err := c.EnsureMachine(ctx, small("team.control", "1a2b3c4d-6666-4a5b-9c8d-7e6f5a4b3c2d"), (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	// The decoy, on pve2, has a disk no clone of the template has.
	decoy := machine("debian-12-cloud", "1a2b3c4d-7777-4a5b-9c8d-7e6f5a4b3c2d")
	decoy.Location.Host = "pve2"
	decoy.Disks = append(decoy.Disks, providers.Disk{Name: "scratch", SizeGiB: 7, Target: "local-lvm"})
	if _, err := c.EnsureMachine(ctx, decoy, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureMachine(ctx, small("team.after", "1a2b3c4d-8888-4a5b-9c8d-7e6f5a4b3c2d"), (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	control, after := namedVMs(sim, "team.control"), namedVMs(sim, "team.after")
	if len(control) != 1 || len(after) != 1 || len(after[0].Volumes) != len(control[0].Volumes) {
		t.Errorf("a clone beside a decoy named like the template has volumes %v, one made before it %v", after, control)
	}
	// The template is pve1's; the decoy on pve2 does not count as it.
	if ok, err := c.ImageExists(ctx, failuredomain.Location{Host: "pve2"}, "debian-12-cloud"); ok || err != nil {
		t.Errorf("ImageExists on pve2 = %v, %v; want false: only a template is the image", ok, err)
	}
	for _, v := range namedVMs(sim, "debian-12-cloud") {
		if v.Node == "pve2" && v.Template {
			t.Errorf("the decoy became a template: %+v", v)
		}
	}
}

// TestSeedRemovedAfterFirstBoot: the cloud-init seed (the user data, on
// storage other VMs share) is attached until the guest has booted, then
// ejected and deleted, and never uploaded or attached again: not by a
// later reconcile with the user data given, not by a restarted provider.
// pvesim plays the guest: its agent answers, with the address of
// ipconfig0, AgentDelay after the start, as a guest that ran cloud-init's
// network stage would. A removal cut off between its steps (the ISO's
// deletion failing) goes on from where it stopped.
func TestSeedRemovedAfterFirstBoot(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	spec := machine("team.boot", "5e6f7a8b-2222-4c3d-8e9f-0a1b2c3d4e5f")
	iso := "pve1/local:iso/banlieue-" + spec.InstanceUUID + ".iso"
	seeded := func() (ide2, description string, onStorage bool) {
		t.Helper()
		vms := namedVMs(sim, spec.Name)
		if len(vms) != 1 {
			t.Fatalf("%d VMs named %s", len(vms), spec.Name)
		}
		ide2, _ = vms[0].Config["ide2"].(string)
		description, _ = vms[0].Config["description"].(string)
		return ide2, description, slices.Contains(sim.Volumes(), iso)
	}
	rec := &recorder{}
	// The first boot fails to remove the seed: its deletion task fails.
	sim.FailTasks("imgdel", "simulated storage failure")
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if ide2, _, onStorage := seeded(); !strings.HasPrefix(ide2, "local:iso/banlieue-"+spec.InstanceUUID+".iso,") || !onStorage {
		t.Fatalf("before the guest booted: ide2 %q, ISO on storage %v", ide2, onStorage)
	}
	deadline := time.Now().Add(5 * time.Second)
	for st.IPAddress == "" && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
		spec.TaskRef = rec.last()
		st, err = c.EnsureMachine(ctx, spec, rec.record)
	}
	if st.IPAddress == "" || err == nil || !strings.Contains(err.Error(), "simulated storage failure") {
		t.Fatalf("the guest's address %q and %v, want the address and the failed deletion", st.IPAddress, err)
	}
	if ide2, desc, onStorage := seeded(); ide2 != "none,media=cdrom" || !onStorage || !strings.Contains(desc, "banlieue-seed: ejected") {
		t.Fatalf("after a failed deletion: ide2 %q, ISO on storage %v, description %q", ide2, onStorage, desc)
	}

	sim.FailTasks("imgdel", "")
	spec.TaskRef = rec.last()
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	ide2, desc, onStorage := seeded()
	if ide2 != "none,media=cdrom" || onStorage || !strings.Contains(desc, "banlieue-seed: removed") || !strings.Contains(desc, ownerMark(spec.InstanceUUID)) {
		t.Fatalf("after the first boot: ide2 %q, ISO on storage %v, description %q", ide2, onStorage, desc)
	}

	// Again, and from a restarted provider, with the user data given: no
	// upload, no config change, the seed stays gone.
	before := sim.Requests()
	restarted, err := Connect(ctx, connection(sim, sim.Secret), Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	for _, client := range []*Client{c, restarted} {
		spec.TaskRef = rec.last()
		if _, err := client.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
	}
	after := sim.Requests()
	for _, mutating := range []string{"POST upload", "POST qemu config POST", "DELETE storage delete", "POST qemu start"} {
		if after[mutating] != before[mutating] {
			t.Errorf("converging after the seed's removal sent %s", mutating)
		}
	}
	if ide2, _, onStorage := seeded(); ide2 != "none,media=cdrom" || onStorage {
		t.Errorf("the seed came back: ide2 %q, ISO on storage %v", ide2, onStorage)
	}
	// Deleting the VM does not miss a seed that is gone already.
	spec.TaskRef = rec.last()
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
}

// TestSeedState: the description line that records the seed's state.
func TestSeedState(t *testing.T) {
	for _, tc := range []struct{ desc, state, ejected string }{
		{"banlieue-uid: u", "", "banlieue-uid: u\nbanlieue-seed: ejected"},
		{"banlieue-uid: u\nbanlieue-seed: ejected", "ejected", "banlieue-uid: u\nbanlieue-seed: ejected"},
		{"banlieue-uid: u\nbanlieue-seed: removed\nnotes", "removed", "banlieue-uid: u\nnotes\nbanlieue-seed: ejected"},
	} {
		if got := seedState(tc.desc); got != tc.state {
			t.Errorf("seedState(%q) = %q, want %q", tc.desc, got, tc.state)
		}
		if got := withSeedState(tc.desc, seedEjected); got != tc.ejected {
			t.Errorf("withSeedState(%q) = %q, want %q", tc.desc, got, tc.ejected)
		}
	}
}

// TestFirmwareLeftAsBuilt: a machine naming no firmware (neither its class
// nor its image does) keeps the firmware its VM has: an EFI VM is not
// switched to SeaBIOS, which it could not boot with.
func TestFirmwareLeftAsBuilt(t *testing.T) {
	sim, c := simulate(t)
	ctx := context.Background()
	spec := machine("team.efi", "3c4d5e6f-1111-4a5b-9c8d-7e6f5a4b3c2d")
	spec.Firmware, spec.TPM, spec.Disks = "efi", false, spec.Disks[:1]
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	spec.Firmware, spec.TaskRef = "", rec.last()
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	vms := namedVMs(sim, spec.Name)
	if len(vms) != 1 {
		t.Fatalf("%d VMs named %s", len(vms), spec.Name)
	}
	if bios, _ := vms[0].Config["bios"].(string); bios != "ovmf" || st.Firmware != "efi" {
		t.Errorf("with no firmware named: bios %q, reported %q; want ovmf and efi kept", bios, st.Firmware)
	}
}
