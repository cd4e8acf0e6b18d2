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

package libvirt

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// One private libvirtd (hack/install-libvirt.sh installs it) serves the
// package's tests; its QEMU guests boot the test image
// (hack/build-guest-image.sh), whose init reports on the serial console.
var daemon *libvirtd.Daemon

const image = libvirtd.Pool + "/guest.qcow2"

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	root, err := filepath.Abs("../../..")
	if err != nil {
		panic(err)
	}
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	if out, err := exec.Command(filepath.Join(root, "hack", "build-guest-image.sh"), guest).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building the guest image: %v\n%s", err, out)
		return 1
	}
	dir, err := os.MkdirTemp("", "banlieue-libvirtd-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	log, err := os.Create(filepath.Join(dir, "libvirtd.log"))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	daemon, err = libvirtd.Start(ctx, dir, filepath.Join(root, "bin", ".libvirt-cache"), log)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer daemon.Stop()
	if err := daemon.ImportVolume(guest, "guest.qcow2"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return m.Run()
}

func connect(t *testing.T) *Client {
	t.Helper()
	c, err := Connect(context.Background(), providers.Connection{Endpoint: daemon.URI},
		Options{DomainType: "qemu", ShutdownGrace: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func TestInventoryAndImages(t *testing.T) {
	c := connect(t)
	locs, err := c.Inventory(context.Background())
	if err != nil || len(locs) != 1 || locs[0].Host == "" || locs[0].Datacenter != "" {
		t.Fatalf("inventory %v, %v: want one host", locs, err)
	}
	for _, tc := range []struct {
		ref  string
		want bool
	}{{image, true}, {libvirtd.Pool + "/missing.qcow2", false}, {"no-such-pool/guest.qcow2", false}} {
		got, err := c.ImageExists(context.Background(), locs[0], tc.ref)
		if err != nil || got != tc.want {
			t.Errorf("ImageExists(%s) = %v, %v; want %v", tc.ref, got, err, tc.want)
		}
	}
	if _, err := c.ImageExists(context.Background(), locs[0], "no-slash"); err == nil {
		t.Error("a ref without POOL/ was accepted")
	}
}

// recorder keeps the task refs a call persisted, as the reconciler's
// status.taskRef would.
type recorder struct{ ref string }

func (r *recorder) record(_ context.Context, ref string) error { r.ref = ref; return nil }

// A machine's whole life on a real host: defined with an overlay, a data
// disk and a seed; booted, its guest running the user data and taking a
// DHCP lease; ensured again without a twin, the seed removed once the
// lease is seen and never back; powered off gracefully; and deleted with
// nothing left behind.
func TestMachineLifecycle(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{
		Name: "ns.web-0", HostName: "web-0", InstanceUUID: "6f1c2a57-3c1e-4a43-9d6b-1b9bfe0c2d11",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks: []providers.Disk{{Name: "root", SizeGiB: 1}, {Name: "data", SizeGiB: 2, Provisioning: "thick"},
			{Name: "zeroed", SizeGiB: 1, Provisioning: "eagerZeroed"}, {Name: "sparse", SizeGiB: 3, Provisioning: "thin"}},
		NICs:       []providers.NIC{{Name: "eth0", Network: libvirtd.Network}},
		UserData:   []byte("#!/bin/sh\necho marker-lifecycle-42\n"),
		PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Created || st.ProviderID != "libvirt://"+spec.InstanceUUID || st.PowerState != infrav1.PowerStatePoweredOn || st.CPUs != 1 || st.MemoryMiB != 256 {
		t.Errorf("status after create: %+v", st)
	}
	if fmt.Sprint(st.DiskSizesGiB) != "[1 2 1 3]" || fmt.Sprint(st.Networks) != "["+libvirtd.Network+"]" || len(st.MACAddresses) != 1 {
		t.Errorf("disks %v networks %v MACs %v", st.DiskSizesGiB, st.Networks, st.MACAddresses)
	}
	// Provisioning as the host allocated it: thick and eagerZeroed in full
	// (eagerZeroed as raw), thin sparse.
	for _, d := range []struct {
		name, ext string
		full      bool
	}{{"data", "qcow2", true}, {"zeroed", "raw", true}, {"sparse", "qcow2", false}} {
		capacity, allocation := volumeInfo(t, volumeName(spec, d.name, d.ext))
		if full := allocation >= capacity; full != d.full {
			t.Errorf("disk %s: %d of %d bytes allocated, want full=%t", d.name, allocation, capacity, d.full)
		}
	}
	// Until the guest has booted, its seed is on the pool and attached.
	seed := volumeName(spec, "seed", "iso")
	if live, config, onPool, state := seedOf(t, spec.Name, seed); !live || !config || !onPool || state != "" {
		t.Errorf("before first boot: seed live %t, defined %t, on the pool %t, state %q", live, config, onPool, state)
	}
	log := waitSerial(t, spec.Name, "BANLIEUE-READY")
	for _, want := range []string{"BANLIEUE-BOOT web-0", "BANLIEUE-USERDATA marker-lifecycle-42", "BANLIEUE-DISK vda 1024", "BANLIEUE-DISK vdb 2048", "BANLIEUE-DISK vdc 1024", "BANLIEUE-DISK vdd 3072",
		"BANLIEUE-NET eth0 " + st.MACAddresses[0] + " " + libvirtd.Subnet + "."} {
		if !strings.Contains(log, want) {
			t.Errorf("serial log lacks %q:\n%s", want, log)
		}
	}
	// Ensured again: the same domain, not a twin; the lease is seen.
	deadline := time.Now().Add(30 * time.Second)
	for st.IPAddress == "" && time.Now().Before(deadline) {
		if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	if st.Created || !strings.HasPrefix(st.IPAddress, libvirtd.Subnet+".") {
		t.Errorf("second ensure: created=%v address %q", st.Created, st.IPAddress)
	}
	if n := domainsNamed(t, spec.Name); n != 1 {
		t.Errorf("%d domains named %s, want 1", n, spec.Name)
	}
	// The ensure that saw the lease removed the seed: ejected from the
	// running guest and the definition, deleted, recorded. Converging
	// again, also from another client and without the user data, brings
	// nothing back.
	if live, config, onPool, state := seedOf(t, spec.Name, seed); live || config || onPool || state != seedRemoved {
		t.Errorf("after first boot: seed live %t, defined %t, on the pool %t, state %q", live, config, onPool, state)
	}
	omitted := spec
	omitted.UserData, omitted.UserDataOmitted = nil, true
	for i, s := range []providers.MachineSpec{spec, omitted} {
		if _, err := connect(t).EnsureMachine(ctx, s, rec.record); err != nil {
			t.Fatal(err)
		}
		if live, config, onPool, state := seedOf(t, spec.Name, seed); live || config || onPool || state != seedRemoved {
			t.Errorf("ensure %d after first boot: seed live %t, defined %t, on the pool %t, state %q", i, live, config, onPool, state)
		}
	}

	// Soft power-off: the request's time is recorded before the ACPI
	// button is pressed, and the guest's own shutdown (its acpid) runs
	// before the domain is off.
	spec.PowerState, spec.PowerOffMode = infrav1.PowerStatePoweredOff, infrav1.PowerOffModeSoft
	var asked time.Time
	spec.RecordSoftPowerOff = func(_ context.Context, at time.Time) error { asked = at; return nil }
	deadline = time.Now().Add(60 * time.Second)
	for st.PowerState != infrav1.PowerStatePoweredOff && time.Now().Before(deadline) {
		spec.SoftPowerOffTime = asked
		if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	// libvirt tells who turned the domain off: the guest itself (shutoff
	// reason "shutdown") or a destroy. The guest's acpid line does not
	// reach the serial log here, so the reason is the witness.
	if state, reason := domainStateReason(t, spec.Name); st.PowerState != infrav1.PowerStatePoweredOff || asked.IsZero() ||
		state != golibvirt.DomainShutoff || golibvirt.DomainShutoffReason(reason) != golibvirt.DomainShutoffShutdown {
		t.Fatalf("power state %s, asked at %v, domain state %d reason %d (want shut off by the guest)", st.PowerState, asked, state, reason)
	}

	// Suspended is a managed save: the guest's memory in a file on the
	// host, the domain shut off. PoweredOn restores it: the guest goes on
	// where it was instead of booting again.
	spec.PowerState = infrav1.PowerStatePoweredOn
	if _, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	for strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-READY") < 2 {
		waitSerial(t, spec.Name, "BANLIEUE-READY")
		time.Sleep(500 * time.Millisecond)
	}
	spec.PowerState = infrav1.PowerStateSuspended
	if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	saveFile := filepath.Join(daemon.Dir, "lib", "qemu", "save", spec.Name+".save")
	if fi, err := os.Stat(saveFile); err != nil || fi.Size() == 0 || st.PowerState != infrav1.PowerStateSuspended || domainState(t, spec.Name) != golibvirt.DomainShutoff {
		t.Fatalf("suspended: state %s, domain %v, managed save %v (%v)", st.PowerState, domainState(t, spec.Name), fi, err)
	}
	spec.PowerState = infrav1.PowerStatePoweredOn
	if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(saveFile); st.PowerState != infrav1.PowerStatePoweredOn || domainState(t, spec.Name) != golibvirt.DomainRunning || !os.IsNotExist(err) {
		t.Fatalf("resumed: state %s, domain %v, managed save %v", st.PowerState, domainState(t, spec.Name), err)
	}
	time.Sleep(2 * time.Second)
	if boots := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT"); boots != 2 || domainState(t, spec.Name) != golibvirt.DomainRunning {
		t.Errorf("after the restore: %d boots (want 2: the restore is none), domain %v", boots, domainState(t, spec.Name))
	}

	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if n := domainsNamed(t, spec.Name); n != 0 {
		t.Errorf("%d domains left", n)
	}
	if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
	// Deleting again is fine.
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Error(err)
	}
}

func domainState(t *testing.T, name string) golibvirt.DomainState {
	t.Helper()
	state, _ := domainStateReason(t, name)
	return state
}

func domainStateReason(t *testing.T, name string) (golibvirt.DomainState, int32) {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	dom, err := l.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	state, reason, err := l.DomainGetState(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	return golibvirt.DomainState(state), reason
}

func waitSerial(t *testing.T, name, want string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		log := daemon.SerialLog(name)
		if strings.Contains(log, want) {
			return log
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q on %s's serial console in 60 s:\n%s", want, name, log)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func domainsNamed(t *testing.T, name string) int {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, d := range doms {
		if d.Name == name {
			n++
		}
	}
	return n
}

func volumesOf(t *testing.T, uid string) []string {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	p, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoragePoolRefresh(p, 0); err != nil {
		t.Fatal(err)
	}
	vols, _, err := l.StoragePoolListAllVolumes(p, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, v := range vols {
		if strings.Contains(v.Name, uid) {
			out = append(out, v.Name)
		}
	}
	sort.Strings(out)
	return out
}

var _ = golibvirt.DomainRunning

// TestFirmwareAndTPM: efi and efi-secure (q35, SMM, an enrolled-keys
// OVMF) domains with a vTPM (swtpm) are defined and run under software
// emulation, and delete removes their NVRAM and TPM state. The test guest
// boots from BIOS only, so no OS runs on them: what is checked is the
// domain libvirt built and its files.
func TestFirmwareAndTPM(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	for i, fw := range []string{"efi", "efi-secure"} {
		spec := providers.MachineSpec{
			Name: "fw-" + fw, HostName: "fw", InstanceUUID: fmt.Sprintf("3c1d2e4f-5a6b-4c7d-8e9f-00000000000%d", i),
			Image: image, CPUs: 1, MemoryMiB: 256, Firmware: fw, TPM: true, PowerState: infrav1.PowerStatePoweredOn,
			Disks: []providers.Disk{{Name: "root", SizeGiB: 1}},
		}
		st, err := c.EnsureMachine(ctx, spec, (&recorder{}).record)
		if err != nil {
			t.Fatalf("%s: %v", fw, err)
		}
		if st.Firmware != fw || !st.TPM || st.PowerState != infrav1.PowerStatePoweredOn {
			t.Errorf("%s: status firmware %s tpm %t power %s", fw, st.Firmware, st.TPM, st.PowerState)
		}
		l, err := daemon.Connect()
		if err != nil {
			t.Fatal(err)
		}
		dom, err := l.DomainLookupByName(spec.Name)
		if err != nil {
			t.Fatal(err)
		}
		live, err := l.DomainGetXMLDesc(dom, 0)
		_ = l.Disconnect()
		if err != nil {
			t.Fatal(err)
		}
		nvram := filepath.Join(daemon.Dir, "lib", "qemu", "nvram", spec.Name+"_VARS.fd")
		tpmState := filepath.Join(daemon.Dir, "lib", "swtpm", spec.InstanceUUID)
		for _, want := range []string{"<nvram", "<tpm model='tpm-crb'>", "<backend type='emulator' version='2.0'"} {
			if !strings.Contains(live, want) {
				t.Errorf("%s: the running domain lacks %s:\n%s", fw, want, live)
			}
		}
		if fw == "efi-secure" && (!strings.Contains(live, "secure='yes'") || !strings.Contains(live, "<smm state='on'/>") || !strings.Contains(live, "q35")) {
			t.Errorf("efi-secure: no secure-boot loader, SMM or q35:\n%s", live)
		}
		for _, p := range []string{nvram, tpmState} {
			if _, err := os.Stat(p); err != nil {
				t.Errorf("%s: %v", fw, err)
			}
		}
		if err := c.DeleteMachine(ctx, spec, (&recorder{}).record); err != nil {
			t.Fatal(err)
		}
		for _, p := range []string{nvram, tpmState} {
			if _, err := os.Stat(p); !os.IsNotExist(err) {
				t.Errorf("%s: %s left after delete (%v)", fw, p, err)
			}
		}
	}
}

// TestThickBootDisk: disk 0 provisioned thick is a full copy of the image,
// no overlay (no backing store), raw and allocated in full, grown to the
// class size, and the guest boots from it; eagerZeroed is the same. One
// boot only: the copy is what differs from an overlay.
func TestThickBootDisk(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	for i, tc := range []struct {
		provisioning, ext string
		boot              bool
	}{{"thick", "raw", true}, {"eagerZeroed", "raw", false}} {
		spec := providers.MachineSpec{
			Name: "ns.boot-" + strings.ToLower(tc.provisioning), HostName: "boot-" + strings.ToLower(tc.provisioning), InstanceUUID: fmt.Sprintf("3c9e2b1a-7d4f-4e8a-9b6c-5d4e3f2a1b%02d", i),
			Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
			Disks:      []providers.Disk{{Name: "root", SizeGiB: 1, Provisioning: tc.provisioning}},
			NICs:       []providers.NIC{{Name: "eth0", Network: libvirtd.Network}},
			UserData:   []byte("#!/bin/sh\necho marker-thick\n"),
			PowerState: infrav1.PowerStatePoweredOff,
		}
		if tc.boot {
			spec.PowerState = infrav1.PowerStatePoweredOn
		}
		rec := &recorder{}
		if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
		name := volumeName(spec, "root", tc.ext)
		capacity, allocation := volumeInfo(t, name)
		if capacity < gib || allocation < capacity {
			t.Errorf("%s boot disk %s: %d of %d bytes allocated, want all of at least 1 GiB", tc.provisioning, name, allocation, capacity)
		}
		if doc := volumeXMLOf(t, name); strings.Contains(doc, "<backingStore>") || !strings.Contains(doc, "<format type='"+tc.ext+"'/>") {
			t.Errorf("%s boot disk %s: want a %s volume without a backing store:\n%s", tc.provisioning, name, tc.ext, doc)
		}
		if dom := domainXMLOf(t, spec.Name); !strings.Contains(dom, name) || !strings.Contains(dom, "type='"+tc.ext+"'") {
			t.Errorf("%s: the domain does not attach %s as %s:\n%s", tc.provisioning, name, tc.ext, dom)
		}
		if !tc.boot {
			// Grown while powered off: still allocated in full.
			spec.Disks[0].SizeGiB = 2
			if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
				t.Fatal(err)
			}
			if capacity, allocation := volumeInfo(t, name); capacity != 2*gib || allocation < capacity {
				t.Errorf("%s boot disk grown to 2 GiB: %d of %d bytes allocated, want all of 2 GiB", tc.provisioning, allocation, capacity)
			}
		}
		if tc.boot {
			log := waitSerial(t, spec.Name, "BANLIEUE-READY")
			for _, want := range []string{"BANLIEUE-USERDATA marker-thick", "BANLIEUE-DISK vda 1024"} {
				if !strings.Contains(log, want) {
					t.Errorf("serial log lacks %q:\n%s", want, log)
				}
			}
		}
		if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
		if vols := volumesOf(t, spec.InstanceUUID); len(vols) != 0 {
			t.Errorf("%s: volumes left after delete: %v", tc.provisioning, vols)
		}
	}
}

// volumeXMLOf is a pool volume's XML description.
func volumeXMLOf(t *testing.T, name string) string {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	p, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.StorageVolLookupByName(p, name)
	if err != nil {
		t.Fatalf("volume %s: %v", name, err)
	}
	doc, err := l.StorageVolGetXMLDesc(v, 0)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// volumeInfo is a pool volume's capacity and allocation in bytes.
func volumeInfo(t *testing.T, name string) (capacity, allocation uint64) {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	p, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		t.Fatal(err)
	}
	v, err := l.StorageVolLookupByName(p, name)
	if err != nil {
		t.Fatalf("volume %s: %v", name, err)
	}
	_, capacity, allocation, err = l.StorageVolGetInfo(v)
	if err != nil {
		t.Fatal(err)
	}
	return capacity, allocation
}

// TestIgnition: an Ignition guest gets its config where Ignition reads it
// on QEMU (fw_cfg opt/com.coreos/config), read back from inside the guest,
// and no NoCloud seed. (A static address, which QEMU cannot carry to it,
// is refused before any backend call by the backend's admission point:
// backends.TestAdmitMachine.)
func TestIgnition(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	config := `{"ignition":{"version":"3.4.0"},"passwd":{"users":[{"name":"core"}]},"marker":"ign-77"}`
	spec := providers.MachineSpec{
		Name: "ns.ign-0", HostName: "ign-0", InstanceUUID: "0b7e1c43-8a0d-4d7e-9a53-4c3b2e1f0a99",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:    []providers.Disk{{Name: "root", SizeGiB: 1}},
		NICs:     []providers.NIC{{Name: "eth0", Network: libvirtd.Network}},
		UserData: []byte(config), UserDataFormat: providers.UserDataIgnition, PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	log := waitSerial(t, spec.Name, "BANLIEUE-READY")
	if !strings.Contains(log, "BANLIEUE-IGNITION "+config) || !strings.Contains(log, "BANLIEUE-SEED none") {
		t.Errorf("the guest did not read its Ignition config from fw_cfg (or found a seed):\n%s", log)
	}
	if !strings.Contains(log, "BANLIEUE-NET eth0 ") || !strings.Contains(log, " "+libvirtd.Subnet+".") {
		t.Errorf("the Ignition guest took no DHCP lease:\n%s", log)
	}
	vols := volumesOf(t, spec.InstanceUUID)
	if fmt.Sprint(vols) != fmt.Sprint([]string{volumeName(spec, "ignition", "json"), volumeName(spec, "root", "qcow2")}) {
		t.Errorf("volumes %v, want the boot overlay and the Ignition config only", vols)
	}
	// Once built, the caller no longer reads the user data: the domain
	// keeps the config it was given.
	before := domainXMLOf(t, spec.Name)
	omitted := spec
	omitted.UserData, omitted.UserDataOmitted = nil, true
	if _, err := c.EnsureMachine(ctx, omitted, rec.record); err != nil {
		t.Fatalf("converging without the user data: %v", err)
	}
	if after := domainXMLOf(t, spec.Name); after != before || !strings.Contains(after, "opt/com.coreos/config") {
		t.Errorf("the domain changed when converged without its user data:\n%s\nwas\n%s", after, before)
	}
	// A domain that must be built is not built without it.
	fresh := omitted
	fresh.Name, fresh.InstanceUUID = "ns.ign-1", "0b7e1c43-8a0d-4d7e-9a53-4c3b2e1f0a97"
	if _, err := c.EnsureMachine(ctx, fresh, rec.record); !errors.Is(err, providers.ErrUserDataNeeded) {
		t.Errorf("building a domain without its user data: %v, want ErrUserDataNeeded", err)
	}
	if left := volumesOf(t, fresh.InstanceUUID); len(left) > 0 {
		t.Errorf("the domain not built left volumes: %v", left)
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
}

// domainXMLOf is the defined domain's XML.
func domainXMLOf(t *testing.T, name string) string {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer l.Disconnect()
	dom, err := l.DomainLookupByName(name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := l.DomainGetXMLDesc(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestDeferredInstall: an image used as an installer (installMode
// deferred) is attached as a CD-ROM, booted after a blank boot disk of the
// class's size; deleting the machine keeps the image.
func TestDeferredInstall(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	iso, err := cloudinit.ISO("INSTALLER", map[string][]byte{"README": []byte("an installer medium\n")})
	if err != nil {
		t.Fatal(err)
	}
	src := filepath.Join(t.TempDir(), "installer.iso")
	if err := os.WriteFile(src, iso, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := daemon.ImportVolume(src, "installer.iso"); err != nil {
		t.Fatal(err)
	}
	spec := providers.MachineSpec{
		Name: "ns.kairos-0", HostName: "kairos-0", InstanceUUID: "5e7a9c1b-3d5f-4a6b-8c9d-0e1f2a3b4c5d",
		Location: failuredomain.Location{Host: "h"}, Image: libvirtd.Pool + "/installer.iso", ImageIsInstaller: true,
		CPUs: 1, MemoryMiB: 256, Disks: []providers.Disk{{Name: "root", SizeGiB: 2}},
		NICs: []providers.NIC{{Name: "eth0", Network: libvirtd.Network}}, PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	dom, err := l.DomainLookupByName(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := l.DomainGetXMLDesc(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	d := &libvirtxml.Domain{}
	if err := d.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	var boots []string
	for _, b := range d.OS.BootDevices {
		boots = append(boots, b.Dev)
	}
	if fmt.Sprint(boots) != "[hd cdrom]" {
		t.Errorf("boot order %v, want the disk, then the installer", boots)
	}
	var installer, boot string
	for _, disk := range d.Devices.Disks {
		switch {
		case disk.Device == "cdrom" && strings.HasSuffix(disk.Source.File.File, "/installer.iso"):
			installer = disk.Source.File.File
		case disk.Device == "disk" && disk.Target.Dev == "vda":
			boot = disk.Source.File.File
		}
	}
	if installer == "" || !strings.HasSuffix(boot, volumeName(spec, "root", "qcow2")) {
		t.Fatalf("installer CD-ROM %q, boot disk %q:\n%s", installer, boot, doc)
	}
	// The boot disk is blank: no backing image, the class's size, nothing written.
	p, _ := l.StoragePoolLookupByName(libvirtd.Pool)
	v, err := l.StorageVolLookupByName(p, volumeName(spec, "root", "qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	vdoc, _ := l.StorageVolGetXMLDesc(v, 0)
	vx := &libvirtxml.StorageVolume{}
	if err := vx.Unmarshal(vdoc); err != nil {
		t.Fatal(err)
	}
	if vx.BackingStore != nil || vx.Capacity.Value != 2*gib {
		t.Errorf("boot disk: backing %+v, capacity %d; want blank, 2 GiB", vx.BackingStore, vx.Capacity.Value)
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
	if _, err := l.StorageVolLookupByName(p, "installer.iso"); err != nil {
		t.Errorf("the installer image went with the machine: %v", err)
	}
}

// TestMachineVolumeNames (issue 31): every volume name a machine gets is
// refused as an image, and base images' names are not, so a machine's
// overlay is never backed by another machine's disk, nor named like a
// base image.
func TestMachineVolumeNames(t *testing.T) {
	spec := providers.MachineSpec{Name: "ubuntu-22.04-cloudinit", InstanceUUID: "9b1c2d3e-4f5a-4b6c-8d7e-1f2a3b4c5d6e"}
	for name, want := range map[string]bool{
		volumeName(spec, "root", "qcow2"): true,
		volumeName(spec, "data", "raw"):   true,
		volumeName(spec, "seed", "iso"):   true,
		"guest.qcow2":                     false,
		"ubuntu-22.04-cloudinit.qcow2":    false,
		"debian-12-generic-amd64.qcow2":   false,
		"ubuntu-24.04-live-server.iso":    false,
	} {
		if got := machineVolume(name); got != want {
			t.Errorf("machineVolume(%q) = %v, want %v", name, got, want)
		}
	}
}
