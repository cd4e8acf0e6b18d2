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
package vsphere

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	kwait "k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
	vsim "github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// recorder keeps the task references EnsureMachine records, in order.
type recorder struct{ refs []string }

func (r *recorder) record(_ context.Context, ref string) error {
	r.refs = append(r.refs, ref)
	return nil
}

// tasks are the non-empty references recorded.
func (r *recorder) tasks() int {
	n := 0
	for _, ref := range r.refs {
		if ref != "" {
			n++
		}
	}
	return n
}

// template turns one VM of dc into a template and returns its name.
func template(t *testing.T, c *Client, dc string) string {
	t.Helper()
	name, err := vsim.MarkTemplate(context.Background(), c.gc.Client, dc, "")
	if err != nil {
		t.Fatal(err)
	}
	return name
}

func vmProps(t *testing.T, c *Client, dc, name string) *mo.VirtualMachine {
	t.Helper()
	vm := vmNamed(t, c, dc, name)
	var m mo.VirtualMachine
	if err := vm.Properties(context.Background(), vm.Reference(), []string{"config", "runtime", "guest"}, &m); err != nil {
		t.Fatal(err)
	}
	return &m
}

func extraConfig(m *mo.VirtualMachine, key string) string {
	for _, o := range m.Config.ExtraConfig {
		if v := o.GetOptionValue(); v != nil && v.Key == key {
			s, _ := v.Value.(string)
			return s
		}
	}
	return ""
}

// TestEnsureMachine: one call builds the whole VM (instance UUID, firmware,
// vTPM, NICs on the chosen port groups, grown and added disks, cloud-init
// guestinfo, power); a second call changes nothing; the clone is recorded
// before it is waited for; delete destroys it.
func TestEnsureMachine(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")

	spec := providers.MachineSpec{
		Name: "ns-web-0", InstanceUUID: "6f1c0e2a-8b7d-4c55-9a0e-1d2c3b4a5f60",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C1"}, Image: tmpl, CPUs: 2, MemoryMiB: 2048,
		Firmware: "efi-secure", TPM: true,
		NICs: []providers.NIC{
			{Name: "eth0", Network: "VM Network"},
			{Name: "eth1", Network: "DC0_DVPG0", Static: &providers.StaticIP{Address: "192.0.2.10", Prefix: 24, Gateway: "192.0.2.1", Nameservers: []string{"192.0.2.53"}}},
		},
		Disks:      []providers.Disk{{SizeGiB: 20}, {SizeGiB: 50}},
		UserData:   []byte("#cloud-config\nhostname: web-0\n"),
		PowerState: infrav1.PowerStatePoweredOn,
	}
	var rec recorder
	reconfigures := providers.BackendRequests.WithLabelValues("vsphere", "ReconfigVM_Task")
	before := testutil.ToFloat64(reconfigures)
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if st.InstanceUUID != spec.InstanceUUID || st.BIOSUUID == "" || st.PowerState != infrav1.PowerStatePoweredOn || st.CPUs != 2 || st.MemoryMiB != 2048 {
		t.Errorf("status %+v", st)
	}
	if st.BIOSUUID != spec.InstanceUUID || st.ProviderID != "vsphere://"+spec.InstanceUUID {
		t.Errorf("BIOS UUID %q, providerID %q: want the instance UUID, the ID the provider planned", st.BIOSUUID, st.ProviderID)
	}
	if st.Firmware != "efi-secure" || !st.TPM {
		t.Errorf("firmware %q tpm %t, want efi-secure with a vTPM", st.Firmware, st.TPM)
	}
	if fmt.Sprint(st.DiskSizesGiB) != "[20 50]" {
		t.Errorf("disks %v GiB, want [20 50]", st.DiskSizesGiB)
	}
	if len(st.Networks) != 2 || st.Networks[0] != "VM Network" || st.Networks[1] != "DC0_DVPG0" {
		t.Errorf("networks %v, want VM Network and DC0_DVPG0", st.Networks)
	}
	// Three reconfigures: the firmware switch secure boot needs first,
	// the rest of the configuration, then guestinfo for the added NIC's
	// MAC. Only the clone, whose VM does not exist while it runs, is
	// recorded in status: vCenter lists the reconfigures in the VM's
	// recentTask (TestInterruptedReconfigure).
	if got := testutil.ToFloat64(reconfigures) - before; got != 3 {
		t.Errorf("%v reconfigures, want 3", got)
	}
	if rec.tasks() != 1 || len(rec.refs) != 1 {
		t.Errorf("recorded %v, want the clone's task reference", rec.refs)
	}

	m := vmProps(t, c, "DC0", spec.Name)
	ud, _ := base64.StdEncoding.DecodeString(extraConfig(m, "guestinfo.userdata"))
	if string(ud) != string(spec.UserData) || extraConfig(m, "guestinfo.userdata.encoding") != "base64" {
		t.Errorf("guestinfo.userdata %q", ud)
	}
	raw, _ := base64.StdEncoding.DecodeString(extraConfig(m, "guestinfo.metadata"))
	var md struct {
		InstanceID string `json:"instance-id"`
		Hostname   string `json:"local-hostname"`
		Network    struct {
			Ethernets map[string]struct {
				Match     map[string]string `json:"match"`
				DHCP4     bool              `json:"dhcp4"`
				Addresses []string          `json:"addresses"`
			} `json:"ethernets"`
		} `json:"network"`
	}
	if err := json.Unmarshal(raw, &md); err != nil {
		t.Fatalf("guestinfo.metadata %q: %v", raw, err)
	}
	eth1 := md.Network.Ethernets["eth1"]
	if md.InstanceID != spec.InstanceUUID || md.Hostname != spec.Name || !md.Network.Ethernets["eth0"].DHCP4 ||
		fmt.Sprint(eth1.Addresses) != "[192.0.2.10/24]" || eth1.Match["macaddress"] == "" {
		t.Errorf("metadata %s", raw)
	}

	// Steady state: nothing to do, no task.
	rec = recorder{}
	before = testutil.ToFloat64(reconfigures)
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if rec.tasks() != 0 || testutil.ToFloat64(reconfigures) != before {
		t.Errorf("a second EnsureMachine recorded %d tasks and reconfigured %v times", rec.tasks(), testutil.ToFloat64(reconfigures)-before)
	}

	// The address alone, as the reconciler polls it: what observe reads;
	// not steady once the VM is off when on is asked, or missing.
	addr, steady, err := c.GuestAddress(ctx, spec)
	if err != nil || !steady || addr != st.IPAddress {
		t.Errorf("GuestAddress = %q, %v, %v; want %q, steady", addr, steady, err, st.IPAddress)
	}
	off := spec
	off.PowerState = infrav1.PowerStatePoweredOff
	if _, steady, err := c.GuestAddress(ctx, off); err != nil || steady {
		t.Errorf("GuestAddress of a VM on, asked off: steady %v, %v", steady, err)
	}
	missing := spec
	missing.InstanceUUID = "6f1c0e2a-8b7d-4c55-9a0e-1d2c3b4a5f6f"
	if _, steady, err := c.GuestAddress(ctx, missing); err != nil || steady {
		t.Errorf("GuestAddress of a missing VM: steady %v, %v", steady, err)
	}

	// Once built, the caller no longer reads the user data: converging
	// without it runs no task and keeps the guestinfo the VM was given.
	omitted := spec
	omitted.UserData, omitted.UserDataOmitted = nil, true
	if _, err := c.EnsureMachine(ctx, omitted, rec.record); err != nil || rec.tasks() != 0 {
		t.Errorf("converging without the user data: %v, %d tasks", err, rec.tasks())
	}
	if ud, _ := base64.StdEncoding.DecodeString(extraConfig(vmProps(t, c, "DC0", spec.Name), "guestinfo.userdata")); string(ud) != string(spec.UserData) {
		t.Errorf("guestinfo.userdata after converging without it: %q", ud)
	}
	// A VM that must be built is not built without it.
	fresh := omitted
	fresh.Name, fresh.InstanceUUID = "ns-web-1", "6f1c0e2a-8b7d-4c55-9a0e-1d2c3b4a5f61"
	if _, err := c.EnsureMachine(ctx, fresh, rec.record); !errors.Is(err, providers.ErrUserDataNeeded) {
		t.Errorf("building a VM without its user data: %v, want ErrUserDataNeeded", err)
	}
	if l, err := c.locate(ctx, "DC0"); err != nil {
		t.Fatal(err)
	} else if vm, err := lookup(ctx, l.f, fresh.Name); err != nil || vm != nil {
		t.Errorf("a VM was built without its user data: %v, %v", vm, err)
	}

	// A changed port group and a third NIC reach the VM.
	spec.NICs[0].Network = "DC0_DVPG0"
	spec.NICs = append(spec.NICs, providers.NIC{Name: "eth2", Network: "VM Network"})
	if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if len(st.Networks) != 3 || st.Networks[0] != "DC0_DVPG0" || st.Networks[2] != "VM Network" {
		t.Errorf("networks after the change %v", st.Networks)
	}

	// Another object with the same name (a different UID) is not given
	// this VM: the clone fails on the name instead.
	other := spec
	other.InstanceUUID = "0a1b2c3d-0000-4000-8000-000000000001"
	if _, err := c.EnsureMachine(ctx, other, rec.record); err == nil || !strings.Contains(err.Error(), "another instance UUID") {
		t.Errorf("same name, other UID: err = %v", err)
	}

	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	l, _ := c.locate(ctx, "DC0")
	if vm, err := findMachine(ctx, l, spec); err != nil || vm != nil {
		t.Errorf("after delete: %v, %v", vm, err)
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Errorf("deleting a VM already gone: %v", err)
	}
}

// TestResumeTask: a task recorded by an interrupted call is waited for; a
// reference vCenter does not know is ignored.
func TestResumeTask(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	f := find.NewFinder(c.gc.Client, false)
	vm, err := f.VirtualMachine(ctx, "/DC0/vm/DC0_C0_RP0_VM0")
	if err != nil {
		t.Fatal(err)
	}
	task, err := vm.PowerOff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{task.Reference().Value, "task-does-not-exist"} {
		if err := c.resume(ctx, ref); err != nil {
			t.Errorf("resume %s: %v", ref, err)
		}
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"runtime.powerState"}, &m); err != nil || m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
		t.Errorf("power state after the resumed task: %v %v", m.Runtime.PowerState, err)
	}
}

// TestDisksOnTheirDatastores: each added disk lands on the datastore its
// storage target names, with its provisioning (thin, thick, eagerly
// scrubbed), as vcsim reports the backing.
func TestDisksOnTheirDatastores(t *testing.T) {
	ctx := context.Background()
	model := simulator.VPX()
	model.Datastore = 2 // LocalDS_0 and LocalDS_1
	_, conn := vcsimModel(t, model)
	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	tmpl := template(t, c, "DC0")
	spec := providers.MachineSpec{
		Name: "ns-db-0", InstanceUUID: "7a2d1f3b-9c8e-4d66-8b1f-2e3d4c5b6a71",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		Disks: []providers.Disk{
			{Name: "root", SizeGiB: 10, Target: "LocalDS_0"},
			{Name: "data", SizeGiB: 20, Target: "LocalDS_1", Provisioning: "eagerZeroed"},
			{Name: "logs", SizeGiB: 5, Target: "LocalDS_1", Provisioning: "thick"},
			{Name: "scratch", SizeGiB: 5, Target: "LocalDS_0"},
		},
		PowerState: infrav1.PowerStatePoweredOff,
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	m := vmProps(t, c, "DC0", spec.Name)
	var got []string
	for _, d := range object.VirtualDeviceList(m.Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil)) {
		b := d.(*types.VirtualDisk).Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		ds := strings.TrimPrefix(strings.SplitN(b.FileName, "]", 2)[0], "[")
		got = append(got, fmt.Sprintf("%s thin=%t eager=%t", ds, ptrBool(b.ThinProvisioned), ptrBool(b.EagerlyScrub)))
	}
	want := []string{"LocalDS_0", "LocalDS_1 thin=false eager=true", "LocalDS_1 thin=false eager=false", "LocalDS_0 thin=true eager=false"}
	if len(got) != len(want) {
		t.Fatalf("disks %v", got)
	}
	for i := range want {
		if i == 0 {
			if !strings.HasPrefix(got[0], want[0]) {
				t.Errorf("boot disk %s, want on %s", got[0], want[0])
			}
			continue
		}
		if got[i] != want[i] {
			t.Errorf("disk %d: %s, want %s", i, got[i], want[i])
		}
	}
}

func ptrBool(b *bool) bool { return b != nil && *b }

// TestBootDiskProvisioning: the clone's boot disk is thin, thick or eagerly
// scrubbed as disk 0's provisioning asks, whatever the template's backing
// is, on its storage target or beside the template. vCenter honours the
// clone's relocate disk locator; vcsim ignores it, and the repo's
// simulator package steps in there (vsim.HonourCloneDiskBacking, in
// vcsimModel): this test checks the locator banlieue sends, through it.
func TestBootDiskProvisioning(t *testing.T) {
	ctx := context.Background()
	model := simulator.VPX()
	model.Datastore = 2
	_, conn := vcsimModel(t, model)
	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	tmpl := template(t, c, "DC0")
	for i, tc := range []struct {
		provisioning, target string
		thin, eager          bool
	}{
		{"thick", "LocalDS_1", false, false},
		{"eagerZeroed", "", false, true},
		{"thin", "LocalDS_1", true, false},
		{"", "", true, false},
	} {
		spec := providers.MachineSpec{
			Name: fmt.Sprintf("ns-boot-%d", i), InstanceUUID: fmt.Sprintf("5b0d6c1e-2f3a-4b5c-8d7e-9f0a1b2c3d%02d", i),
			Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
			Disks:      []providers.Disk{{Name: "root", SizeGiB: 10, Target: tc.target, Provisioning: tc.provisioning}},
			PowerState: infrav1.PowerStatePoweredOff,
		}
		if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
			t.Fatal(err)
		}
		disks := object.VirtualDeviceList(vmProps(t, c, "DC0", spec.Name).Config.Hardware.Device).SelectByType((*types.VirtualDisk)(nil))
		if len(disks) != 1 {
			t.Fatalf("%q: %d disks, want 1", tc.provisioning, len(disks))
		}
		b := disks[0].(*types.VirtualDisk).Backing.(*types.VirtualDiskFlatVer2BackingInfo)
		if thin, eager := ptrBool(b.ThinProvisioned), ptrBool(b.EagerlyScrub); thin != tc.thin || eager != tc.eager {
			t.Errorf("boot disk %q: thin=%t eager=%t, want thin=%t eager=%t", tc.provisioning, thin, eager, tc.thin, tc.eager)
		}
		if tc.target != "" && !strings.HasPrefix(b.FileName, "["+tc.target+"]") {
			t.Errorf("boot disk %q: %s, want on %s", tc.provisioning, b.FileName, tc.target)
		}
	}
}

// TestIgnitionGuestInfo: an Ignition guest gets its config and, for its
// static address, Afterburn's network kernel arguments (its NIC named by
// the MAC vCenter gave it), and none of cloud-init's keys.
func TestIgnitionGuestInfo(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	config := `{"ignition":{"version":"3.4.0"}}`
	spec := providers.MachineSpec{
		Name: "ns-ign-0", HostName: "ign-0", InstanceUUID: "2c4e6a8b-1d3f-4a5b-8c7d-9e0f1a2b3c4d",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		NICs:     []providers.NIC{{Name: "eth0", Network: "VM Network", Static: &providers.StaticIP{Address: "192.0.2.20", Prefix: 24, Gateway: "192.0.2.1"}}},
		UserData: []byte(config), UserDataFormat: providers.UserDataIgnition, PowerState: infrav1.PowerStatePoweredOff,
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	m := vmProps(t, c, "DC0", spec.Name)
	data, _ := base64.StdEncoding.DecodeString(extraConfig(m, "guestinfo.ignition.config.data"))
	if string(data) != config || extraConfig(m, "guestinfo.ignition.config.data.encoding") != "base64" {
		t.Errorf("guestinfo.ignition.config.data %q", data)
	}
	macs := macAddresses(object.VirtualDeviceList(m.Config.Hardware.Device))
	want := "ifname=eth0:" + strings.ToLower(macs[0]) + " ip=192.0.2.20::192.0.2.1:255.255.255.0:ign-0:eth0:none"
	if got := extraConfig(m, "guestinfo.afterburn.initrd.network-kargs"); got != want {
		t.Errorf("network kargs %q, want %q", got, want)
	}
	for _, k := range []string{"guestinfo.userdata", "guestinfo.metadata"} {
		if extraConfig(m, k) != "" {
			t.Errorf("an Ignition guest got cloud-init's %s", k)
		}
	}
}

// TestTemplateNetworkAndHotAdd: interfaces that name no port group are on
// the template's network (its adapter as it is, an added one on the
// network of its first); the hot-add flags are set before power-on.
func TestTemplateNetworkAndHotAdd(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	tm := vmProps(t, c, "DC0", tmpl)
	tnics := object.VirtualDeviceList(tm.Config.Hardware.Device).SelectByType((*types.VirtualEthernetCard)(nil))
	if len(tnics) != 1 {
		t.Fatalf("the template has %d NICs, the test wants 1", len(tnics))
	}
	want := networkName(ctx, c.gc.Client, tnics[0].(types.BaseVirtualEthernetCard))
	spec := providers.MachineSpec{
		Name: "ns-nics-0", InstanceUUID: "3d5f7a9c-2e4a-4b6c-9d8e-0f1a2b3c4d5e",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		NICs: []providers.NIC{{Name: "eth0"}, {Name: "eth1"}}, PowerState: infrav1.PowerStatePoweredOn,
		Options: map[string]string{machinespec.OptionCPUHotAdd: "true", machinespec.OptionMemoryHotAdd: "false"},
	}
	st, err := c.EnsureMachine(ctx, spec, (&recorder{}).record)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st.Networks) != fmt.Sprint([]string{want, want}) {
		t.Errorf("networks %v, want both on the template's %q", st.Networks, want)
	}
	// The class's hotAddCPU (not hotAddMemory) was applied before power-on.
	m := vmProps(t, c, "DC0", spec.Name)
	if !ptr.Deref(m.Config.CpuHotAddEnabled, false) || ptr.Deref(m.Config.MemoryHotAddEnabled, false) {
		t.Errorf("hot add: cpu %v memory %v, want true and false", ptr.Deref(m.Config.CpuHotAddEnabled, false), ptr.Deref(m.Config.MemoryHotAddEnabled, false))
	}
}

func TestNeedsPowerOff(t *testing.T) {
	cfg := func(hotCPU, hotMem bool) *types.VirtualMachineConfigInfo {
		return &types.VirtualMachineConfigInfo{Hardware: types.VirtualHardware{NumCPU: 2, MemoryMB: 2048},
			CpuHotAddEnabled: &hotCPU, MemoryHotAddEnabled: &hotMem}
	}
	for _, tc := range []struct {
		name string
		cfg  *types.VirtualMachineConfigInfo
		cs   types.VirtualMachineConfigSpec
		want bool
	}{
		{"nothing changes", cfg(false, false), types.VirtualMachineConfigSpec{}, false},
		{"more CPUs, hot add on", cfg(true, false), types.VirtualMachineConfigSpec{NumCPUs: 4}, false},
		{"more CPUs, hot add off", cfg(false, true), types.VirtualMachineConfigSpec{NumCPUs: 4}, true},
		{"fewer CPUs, hot add on", cfg(true, true), types.VirtualMachineConfigSpec{NumCPUs: 1}, true},
		{"more memory, hot add on", cfg(false, true), types.VirtualMachineConfigSpec{MemoryMB: 4096}, false},
		{"more memory, hot add off", cfg(true, false), types.VirtualMachineConfigSpec{MemoryMB: 4096}, true},
		{"less memory, hot add on", cfg(true, true), types.VirtualMachineConfigSpec{MemoryMB: 1024}, true},
	} {
		if got := needsPowerOff(tc.cfg, tc.cs); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestInterruptedReconfigure: a reconfigure left running by an interrupted
// call (its context cancelled while vcsim holds the task, as a provider
// killed mid-task leaves it) is waited for by the next call, found in the
// VM's recentTask, not sent again: the disk it adds is added once.
func TestInterruptedReconfigure(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	spec := providers.MachineSpec{
		Name: "ns-slow-0", InstanceUUID: "0b4f7e1c-2d3a-4e5f-8a9b-1c2d3e4f5a6b",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: template(t, c, "DC0"), CPUs: 1, MemoryMiB: 512,
		Disks: []providers.Disk{{SizeGiB: 20}}, PowerState: infrav1.PowerStatePoweredOff,
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	spec.Disks = append(spec.Disks, providers.Disk{SizeGiB: 5})

	// vcsim runs reconfigures 2 s late, the VM readable meanwhile.
	simulator.TaskDelay.MethodDelay = map[string]int{"ReconfigVm": 2000, "LockHandoff": 0}
	defer func() { simulator.TaskDelay.MethodDelay = nil }()
	interrupted, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := c.EnsureMachine(interrupted, spec, (&recorder{}).record)
		done <- err
	}()
	if err := kwait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		select {
		case err := <-done:
			t.Fatalf("the call ended (%v) before its reconfigure was seen running", err)
		default:
		}
		return runningTasks(t, c, spec.Name) > 0, nil
	}); err != nil {
		t.Fatalf("the reconfigure never started: %v", err)
	}
	cancel()
	// govmomi's wait reports a cancelled wait as done (awaitTask).
	if err := <-done; !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "waiting for task") {
		t.Fatalf("the interrupted call returned %v, want it cancelled waiting for its task", err)
	}

	reconfigures := providers.BackendRequests.WithLabelValues("vsphere", "ReconfigVM_Task")
	before := testutil.ToFloat64(reconfigures)
	st, err := c.EnsureMachine(ctx, spec, (&recorder{}).record)
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(st.DiskSizesGiB) != "[20 5]" {
		t.Errorf("disks %v GiB after the resumed reconfigure, want [20 5]", st.DiskSizesGiB)
	}
	if got := testutil.ToFloat64(reconfigures) - before; got != 0 {
		t.Errorf("the next call reconfigured %v times, want 0 (the running task does it)", got)
	}
}

// vmNamed is the VM named name in dc.
func vmNamed(t *testing.T, c *Client, dc, name string) *object.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	l, err := c.locate(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	vm, err := lookup(ctx, l.f, name)
	if err != nil || vm == nil {
		t.Fatalf("VM %s: %v", name, err)
	}
	return vm
}

// runningTasks counts the tasks queued or running on the VM named name.
func runningTasks(t *testing.T, c *Client, name string) int {
	t.Helper()
	ctx := context.Background()
	vm := vmNamed(t, c, "DC0", name)
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"recentTask"}, &m); err != nil || len(m.RecentTask) == 0 {
		return 0
	}
	tasks, err := taskStates(ctx, vm.Client(), m.RecentTask)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, task := range tasks {
		if inFlight(task) {
			n++
		}
	}
	return n
}

// TestTaskStatesSkipsExpired: one task vCenter no longer knows among a VM's
// recent tasks fails vCenter's read of them all; the others are still read.
func TestTaskStatesSkipsExpired(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	vm, err := find.NewFinder(c.gc.Client, false).VirtualMachine(ctx, "/DC0/vm/DC0_C0_RP0_VM0")
	if err != nil {
		t.Fatal(err)
	}
	task, err := vm.PowerOff(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx); err != nil {
		t.Fatal(err)
	}
	gone := types.ManagedObjectReference{Type: "Task", Value: "task-gone"}
	tasks, err := taskStates(ctx, c.gc.Client, []types.ManagedObjectReference{gone, task.Reference()})
	if err != nil {
		t.Fatal(err)
	}
	if len(tasks) != 1 || tasks[0].Self != task.Reference() || tasks[0].Info.State != types.TaskInfoStateSuccess {
		t.Errorf("tasks %+v, want the power-off task alone, succeeded", tasks)
	}
}

// TestPoolAndFolderAnchored: a VSphereMachine's resourcePool and folder
// are looked up under its failure domain (the cluster's root pool, the
// datacenter's VM folder), never across vCenter: a pool of another
// cluster or a folder of another datacenter is not found by its name,
// and an absolute path or a managed object reference is refused before
// any lookup, where the finder would have taken it as it is.
func TestPoolAndFolderAnchored(t *testing.T) {
	ctx := context.Background()
	model := simulator.VPX()
	model.Datacenter, model.Cluster, model.Pool = 2, 2, 1 // DCn_Cm_RP1 under each cluster
	_, conn := vcsimModel(t, model)
	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	f := find.NewFinder(c.gc.Client, false)
	foreign, err := f.ResourcePool(ctx, "/DC0/host/DC0_C1/Resources/DC0_C1_RP1")
	if err != nil {
		t.Fatal(err)
	}
	for _, dc := range []string{"DC0", "DC1"} {
		d, err := f.Datacenter(ctx, dc)
		if err != nil {
			t.Fatal(err)
		}
		folders, err := d.Folders(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := folders.VmFolder.CreateFolder(ctx, "team-"+dc); err != nil {
			t.Fatal(err)
		}
	}
	tmpl := template(t, c, "DC0")
	for i, tc := range []struct {
		pool, folder string
		ok           bool
	}{
		{"DC0_C0_RP1", "team-DC0", true},
		{"DC0_C1_RP1", "", false}, // another cluster's pool, by name
		{"", "team-DC1", false},   // another datacenter's folder, by name
		{"/DC0/host/DC0_C1/Resources/DC0_C1_RP1", "", false},
		{foreign.Reference().Value, "", false}, // resgroup-N, a reference the finder takes as it is
		{"ResourcePool:" + foreign.Reference().Value, "", false},
		{"../DC0_C1/Resources/DC0_C1_RP1", "", false},
		{"", "/DC1/vm/team-DC1", false},
		{"", "../../DC1/vm/team-DC1", false},
	} {
		spec := providers.MachineSpec{
			Name: fmt.Sprintf("ns-anchored-%d", i), InstanceUUID: fmt.Sprintf("5c0e3a1d-7b2f-4e8a-9d6c-%012d", i),
			Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOff,
			Options: map[string]string{machinespec.OptionResourcePool: tc.pool, machinespec.OptionFolder: tc.folder},
		}
		_, err := c.EnsureMachine(ctx, spec, (&recorder{}).record)
		switch {
		case tc.ok && err != nil:
			t.Errorf("pool %q folder %q: %v", tc.pool, tc.folder, err)
		case !tc.ok && err == nil:
			t.Errorf("pool %q folder %q: built", tc.pool, tc.folder)
		case tc.ok:
			vm, err := f.VirtualMachine(ctx, "/DC0/vm/team-DC0/"+spec.Name)
			if err != nil {
				t.Fatalf("not in folder team-DC0: %v", err)
			}
			var m mo.VirtualMachine
			if err := vm.Properties(ctx, vm.Reference(), []string{"resourcePool"}, &m); err != nil || m.ResourcePool == nil {
				t.Fatalf("pool of %s: %v", spec.Name, err)
			}
			var pool mo.ResourcePool
			if err := vm.Properties(ctx, *m.ResourcePool, []string{"name"}, &pool); err != nil || pool.Name != "DC0_C0_RP1" {
				t.Errorf("built in pool %q (%v), want DC0_C0_RP1", pool.Name, err)
			}
		}
	}
}

// TestDeleteFindsTheVMAnywhere (issue 31): a machine whose datacenter was
// edited after its VM was built is deleted by its instance UUID wherever
// the VM is; the delete used to look in the new datacenter only, find
// nothing, and let the machine go with its VM running.
func TestDeleteFindsTheVMAnywhere(t *testing.T) {
	ctx := context.Background()
	model := simulator.VPX()
	model.Datacenter = 2
	_, conn := vcsimModel(t, model)
	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Logout(ctx)
	spec := providers.MachineSpec{
		Name: "ns-moved-0", InstanceUUID: "9b1c2d3e-4f5a-4b6c-8d7e-1f2a3b4c5d6e",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: template(t, c, "DC0"), CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOn,
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	edited := spec
	edited.Location = failuredomain.Location{Datacenter: "DC1", Cluster: "DC1_C0"}
	if err := c.DeleteMachine(ctx, edited, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	ref, err := object.NewSearchIndex(c.gc.Client).FindByUuid(ctx, nil, spec.InstanceUUID, true, ptr.To(true))
	if err != nil || ref != nil {
		t.Errorf("the VM built in DC0 survived a delete naming DC1: %v %v", ref, err)
	}
}

// guestBoots plays the guest of vm: vcsim runs no guest, and reports
// VMware Tools not running and no address for a VM it powered on. The test
// steps in as the guest that booted, read its guestinfo and brought its
// network up: vcsim's SET.guest.* keys set what Tools would report.
func guestBoots(t *testing.T, c *Client, dc, name, ip string) {
	t.Helper()
	ctx := context.Background()
	task, err := vmNamed(t, c, dc, name).Reconfigure(ctx, types.VirtualMachineConfigSpec{ExtraConfig: []types.BaseOptionValue{
		&types.OptionValue{Key: "SET.guest.toolsRunningStatus", Value: string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)},
		&types.OptionValue{Key: "SET.guest.ipAddress", Value: ip},
	}})
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("playing the guest of %s: %v", name, err)
	}
}

// TestBootstrapDataRemoved: the user data (possibly Cluster API's join
// token) stays in guestinfo only until the guest consumed it. Before
// that (off, on without Tools) it is there; once Tools run and report an
// address, the next EnsureMachine, or the address poll alone, removes it
// and marks the VM; later calls, from this client or a restarted
// provider's, with the user data given again, never write it back. The
// metadata stays (cloud-init finds its datasource by it at every boot).
func TestBootstrapDataRemoved(t *testing.T) {
	ctx := context.Background()
	_, conn := vcsim(t)
	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Logout(context.Background()) })
	tmpl := template(t, c, "DC0")
	spec := providers.MachineSpec{
		Name: "ns-boot-0", InstanceUUID: "8a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5d",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		NICs:     []providers.NIC{{Name: "eth0", Network: "VM Network"}},
		UserData: []byte("#cloud-config\nruncmd: [kubeadm join --token abcdef.0123456789abcdef]\n"), PowerState: infrav1.PowerStatePoweredOn,
	}
	present := func(c *Client, name string) bool {
		t.Helper()
		m := vmProps(t, c, "DC0", name)
		if extraConfig(m, "guestinfo.metadata") == "" {
			t.Errorf("%s lost its guestinfo.metadata", name)
		}
		ud, enc := extraConfig(m, "guestinfo.userdata"), extraConfig(m, "guestinfo.userdata.encoding")
		if (ud == "") != (enc == "") {
			t.Errorf("%s: guestinfo.userdata %q with encoding %q", name, ud, enc)
		}
		if removed := extraConfig(m, userDataRemoved) == "true"; removed == (ud != "") {
			t.Errorf("%s: guestinfo.userdata present %t, marked removed %t", name, ud != "", removed)
		}
		return ud != ""
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	// On, but vcsim's VM runs no Tools and has no address: not consumed.
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	if addr, _, err := c.GuestAddress(ctx, spec); err != nil || addr != "" {
		t.Fatalf("GuestAddress before the guest booted: %q, %v", addr, err)
	}
	if !present(c, spec.Name) {
		t.Fatal("guestinfo.userdata missing before the guest consumed it")
	}

	guestBoots(t, c, "DC0", spec.Name, "192.0.2.41")
	st, err := c.EnsureMachine(ctx, spec, (&recorder{}).record)
	if err != nil {
		t.Fatal(err)
	}
	if st.IPAddress != "192.0.2.41" {
		t.Errorf("address %q, want the guest's", st.IPAddress)
	}
	if present(c, spec.Name) {
		t.Fatal("guestinfo.userdata still there after the guest consumed it")
	}

	// Another reconcile, and one by a restarted provider (a new session,
	// no cache), with the user data given again: nothing is written.
	reconfigures := providers.BackendRequests.WithLabelValues("vsphere", "ReconfigVM_Task")
	before := testutil.ToFloat64(reconfigures)
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	restarted, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { restarted.Logout(context.Background()) })
	if _, err := restarted.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(reconfigures) - before; got != 0 {
		t.Errorf("%v reconfigures after the removal, want none", got)
	}
	if present(restarted, spec.Name) {
		t.Error("guestinfo.userdata written back after the removal")
	}

	// The address poll alone (a converged VM is polled so, not converged
	// again) removes it as well.
	polled := spec
	polled.Name, polled.InstanceUUID = "ns-boot-1", "8a1b2c3d-4e5f-4a6b-8c7d-0e1f2a3b4c5e"
	if _, err := c.EnsureMachine(ctx, polled, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	guestBoots(t, c, "DC0", polled.Name, "192.0.2.42")
	if addr, steady, err := c.GuestAddress(ctx, polled); err != nil || !steady || addr != "192.0.2.42" {
		t.Fatalf("GuestAddress = %q, %v, %v", addr, steady, err)
	}
	if present(c, polled.Name) {
		t.Error("guestinfo.userdata still there after the address poll saw the guest's address")
	}
}

// TestBootstrapRemoval: what says the guest consumed its bootstrap data,
// and what is removed then.
func TestBootstrapRemoval(t *testing.T) {
	running := string(types.VirtualMachineToolsRunningStatusGuestToolsRunning)
	on, off := types.VirtualMachinePowerStatePoweredOn, types.VirtualMachinePowerStatePoweredOff
	for _, tc := range []struct {
		name     string
		power    types.VirtualMachinePowerState
		guest    *types.GuestInfo
		consumed bool
	}{
		{"off", off, &types.GuestInfo{ToolsRunningStatus: running, IpAddress: "192.0.2.1"}, false},
		{"on, no guest info", on, nil, false},
		{"on, Tools not running", on, &types.GuestInfo{ToolsRunningStatus: string(types.VirtualMachineToolsRunningStatusGuestToolsNotRunning), IpAddress: "192.0.2.1"}, false},
		{"on, Tools running, no address", on, &types.GuestInfo{ToolsRunningStatus: running}, false},
		{"on, Tools running, an address", on, &types.GuestInfo{ToolsRunningStatus: running, IpAddress: "192.0.2.1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := mo.VirtualMachine{Runtime: types.VirtualMachineRuntimeInfo{PowerState: tc.power}, Guest: tc.guest}
			if got := bootstrapConsumed(m); got != tc.consumed {
				t.Errorf("consumed %t, want %t", got, tc.consumed)
			}
		})
	}

	opt := func(kv ...string) []types.BaseOptionValue {
		var o []types.BaseOptionValue
		for i := 0; i < len(kv); i += 2 {
			o = append(o, &types.OptionValue{Key: kv[i], Value: kv[i+1]})
		}
		return o
	}
	for _, tc := range []struct {
		name  string
		extra []types.BaseOptionValue
		want  string
	}{
		{"cloud-init", opt("guestinfo.userdata", "x", "guestinfo.userdata.encoding", "base64", "guestinfo.metadata", "m", "guestinfo.metadata.encoding", "base64"),
			"guestinfo.userdata= guestinfo.userdata.encoding= banlieue.userdata.removed=true"},
		{"ignition", opt("guestinfo.ignition.config.data", "x", "guestinfo.ignition.config.data.encoding", "base64", "guestinfo.afterburn.initrd.network-kargs", "k"),
			"guestinfo.ignition.config.data= guestinfo.ignition.config.data.encoding= banlieue.userdata.removed=true"},
		{"removed already", opt("guestinfo.userdata", "x", "banlieue.userdata.removed", "true"), ""},
		{"no user data", opt("guestinfo.metadata", "m"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, o := range bootstrapRemoval(tc.extra) {
				v := o.GetOptionValue()
				got = append(got, fmt.Sprintf("%s=%v", v.Key, v.Value))
			}
			if strings.Join(got, " ") != tc.want {
				t.Errorf("removal %q, want %q", strings.Join(got, " "), tc.want)
			}
		})
	}
}

// TestCustomizationOnMoreNICsThanTheTemplate: static addresses without
// user data go through vCenter's guest customization, which maps one
// adapter per NIC of the clone. The NICs the template lacks are added by
// the clone itself, so the mapping matches (vCenter, and vcsim, fail a
// clone whose mapping does not with NicSettingMismatch, and a retry would
// find the clone and power it on with neither the addresses nor the host
// name). vcsim runs no guest: the guest's host name and addresses it
// reports are those its customization applied.
func TestCustomizationOnMoreNICsThanTheTemplate(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	spec := providers.MachineSpec{
		Name: "ns-custom-0", HostName: "custom-0", InstanceUUID: "4e6a8c0e-3f5b-4c7d-8e9f-1a2b3c4d5e6f",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
		NICs: []providers.NIC{
			{Name: "eth0", Network: "VM Network", Static: &providers.StaticIP{Address: "192.0.2.30", Prefix: 24, Gateway: "192.0.2.1"}},
			{Name: "eth1", Network: "DC0_DVPG0", Static: &providers.StaticIP{Address: "198.51.100.30", Prefix: 24}},
		},
		PowerState: infrav1.PowerStatePoweredOn,
	}
	var rec recorder
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if len(st.Networks) != 2 || st.Networks[1] != "DC0_DVPG0" {
		t.Errorf("networks %v, want two, the second on DC0_DVPG0", st.Networks)
	}
	m := vmProps(t, c, "DC0", spec.Name)
	if m.Guest == nil || m.Guest.HostName != "custom-0" {
		t.Fatalf("guest %+v, want the customized host name custom-0", m.Guest)
	}
	var addrs []string
	for _, n := range m.Guest.Net {
		addrs = append(addrs, n.IpAddress...)
	}
	for _, want := range []string{"192.0.2.30", "198.51.100.30"} {
		if !slices.Contains(addrs, want) {
			t.Errorf("guest addresses %v lack %s", addrs, want)
		}
	}
}
