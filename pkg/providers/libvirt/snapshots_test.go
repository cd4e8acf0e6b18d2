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
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestSnapshotNoMachine: a domain the host does not have is ErrNoMachine
// to list, snapshot and revert; deleting its snapshot is fine.
func TestSnapshotNoMachine(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{Name: "ns.snap-none", InstanceUUID: "7d2c4e6a-1b3f-4c5d-9e8f-0a1b2c3d4e5f", Location: failuredomain.Location{Host: "h"}}
	name := providers.SnapshotName("0e9d8c7b-6a5f-4e3d-2c1b-0a9f8e7d6c5b")
	if got, err := c.ListSnapshots(ctx, spec); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("ListSnapshots of no domain: %v, %v; want ErrNoMachine", got, err)
	}
	if got, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: name}, "", nil); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("CreateSnapshot of no domain: %+v, %v; want ErrNoMachine", got, err)
	}
	if err := c.RevertSnapshot(ctx, spec, name, "", nil); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("RevertSnapshot of no domain: %v; want ErrNoMachine", err)
	}
	if err := c.DeleteSnapshot(ctx, spec, name, "", nil); err != nil {
		t.Errorf("DeleteSnapshot of no domain: %v; want nil", err)
	}
	if l := c.SnapshotLimits(); l != (providers.SnapshotLimits{MaxPerVM: 0, Memory: true, RevertRunning: true}) {
		t.Errorf("limits %+v", l)
	}
}

// TestSnapshotLifecycle: internal snapshots of a BIOS guest (a qcow2
// overlay, a thin qcow2 data disk, the raw seed ISO still attached) on a
// real libvirtd. The guest's shell writes a marker to RAM (/tmp, its root
// is an initramfs) and to the data disk before each snapshot, and reads
// them back after each revert, so a revert is seen to bring back the
// disks, and the memory exactly when the snapshot holds it:
//   - with memory, taken running: reverted running, in place, without a
//     boot, RAM and disk as they were (also from shut off);
//   - without memory, taken running: reverted shut off; started, the
//     guest boots on the snapshot's disk, RAM fresh;
//   - taken shut off: reverted shut off, from running too.
//
// A create repeated is the same snapshot; a snapshot taken by hand is
// neither listed nor touched; a revert to no snapshot is ErrNoSnapshot;
// delete (twice) drops it from the qcow2 file too; DeleteMachine removes
// a domain that has snapshots, and everything of it.
func TestSnapshotLifecycle(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{
		Name: "ns.snap-0", HostName: "snap-0", InstanceUUID: "2a4c6e80-1b3d-4f5a-8c7e-9d0f1a2b3c4d",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:      []providers.Disk{{Name: "root", SizeGiB: 1}, {Name: "data", SizeGiB: 1, Provisioning: "thin"}},
		UserData:   []byte("#!/bin/sh\necho marker-snap\n"),
		PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(context.Background(), spec, rec.record) })
	waitSerial(t, spec.Name, "BANLIEUE-READY")
	if !strings.Contains(domainXMLOf(t, spec.Name), volumeName(spec, "seed", "iso")) {
		t.Fatal("the seed ISO is not attached: the test means to snapshot a domain with it")
	}

	uidA, uidB, uidC := "a1a1a1a1-0000-4000-8000-00000000000a", "b2b2b2b2-0000-4000-8000-00000000000b", "c3c3c3c3-0000-4000-8000-00000000000c"
	nameA, nameB, nameC := providers.SnapshotName(uidA), providers.SnapshotName(uidB), providers.SnapshotName(uidC)

	mark(t, c, spec, "a")
	start := time.Now().Add(-time.Second)
	a, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: nameA, Description: "ns/snap-a", IncludeMemory: true}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if a.Name != nameA || a.Ref != nameA || !a.Memory || a.CreationTime.Before(start.Truncate(time.Second)) || a.CreationTime.After(time.Now()) {
		t.Errorf("snapshot a: %+v (taken after %v)", a, start)
	}
	// Repeated (after a crash): the same snapshot, not a second.
	again, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: nameA, Description: "ns/snap-a", IncludeMemory: true}, "", nil)
	if err != nil || again != a {
		t.Errorf("create repeated: %+v, %v; want %+v", again, err, a)
	}
	if got := listed(t, c, spec); fmt.Sprint(got) != fmt.Sprint([]providers.SnapshotInfo{a}) {
		t.Errorf("listed %+v, want %+v", got, a)
	}
	if got := qcow2Snapshots(t, volumeName(spec, "root", "qcow2")); !strings.Contains(got, nameA) {
		t.Errorf("the root overlay holds no internal snapshot %s:\n%s", nameA, got)
	}

	mark(t, c, spec, "b")
	b, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: nameB, Description: "ns/snap-b", IncludeMemory: false}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.Name != nameB || b.Memory {
		t.Errorf("snapshot b (running, without memory): %+v", b)
	}
	mark(t, c, spec, "c")
	boots := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT")

	// a, with memory, on the running domain: running, where it was.
	if err := c.RevertSnapshot(ctx, spec, nameA, "", nil); err != nil {
		t.Fatal(err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainRunning {
		t.Errorf("after reverting to a (memory): domain state %d, want running", st)
	}
	if mem, disk := read(t, c, spec); mem != "mem-a" || disk != "disk-a" {
		t.Errorf("after reverting to a (memory): RAM %q disk %q, want mem-a disk-a", mem, disk)
	}

	// b, without memory: shut off on b's disks; started, it boots.
	if err := c.RevertSnapshot(ctx, spec, nameB, "", nil); err != nil {
		t.Fatal(err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainShutoff {
		t.Errorf("after reverting to b (no memory): domain state %d, want shut off", st)
	}
	if st, err := c.EnsureMachine(ctx, spec, rec.record); err != nil || st.PowerState != infrav1.PowerStatePoweredOn {
		t.Fatalf("powering on after the revert to b: %+v, %v", st, err)
	}
	waitBoots(t, spec.Name, boots+1)
	if mem, disk := read(t, c, spec); mem != "none" || disk != "disk-b" {
		t.Errorf("after reverting to b (no memory) and booting: RAM %q disk %q, want none disk-b", mem, disk)
	}
	boots++

	// c, taken shut off; and one taken by hand (not listed, not touched).
	spec.PowerState, spec.PowerOffMode = infrav1.PowerStatePoweredOff, infrav1.PowerOffModeHard
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	cs, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: nameC, Description: "ns/snap-c", IncludeMemory: true}, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if cs.Memory {
		t.Errorf("snapshot c of a shut-off domain holds memory: %+v", cs)
	}
	byHand(t, spec.Name, "by-hand")
	got := listed(t, c, spec)
	if names := infoNames(got); fmt.Sprint(names) != fmt.Sprint([]string{nameA, nameB, nameC}) {
		t.Errorf("listed %v, want a, b, c (not the one taken by hand)", names)
	}
	for _, s := range got {
		if s.Name == nameB && s.Memory {
			t.Errorf("listed b with memory: %+v", s)
		}
	}

	// a from shut off: running where it was, no boot.
	if err := c.RevertSnapshot(ctx, spec, nameA, "", nil); err != nil {
		t.Fatal(err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainRunning {
		t.Errorf("after reverting a shut-off domain to a: state %d, want running", st)
	}
	if mem, disk := read(t, c, spec); mem != "mem-a" || disk != "disk-a" {
		t.Errorf("after reverting a shut-off domain to a: RAM %q disk %q, want mem-a disk-a", mem, disk)
	}
	if n := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT"); n != boots {
		t.Errorf("%d boots after the reverts with memory, want %d: a revert with memory is no boot", n, boots)
	}
	// c from running: shut off.
	if err := c.RevertSnapshot(ctx, spec, nameC, "", nil); err != nil {
		t.Fatal(err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainShutoff {
		t.Errorf("after reverting a running domain to c (shut off): state %d, want shut off", st)
	}

	if err := c.RevertSnapshot(ctx, spec, providers.SnapshotName("d4d4d4d4-0000-4000-8000-00000000000d"), "", nil); !errors.Is(err, providers.ErrNoSnapshot) {
		t.Errorf("revert to no snapshot: %v, want ErrNoSnapshot", err)
	}

	// Delete, twice.
	for i := range 2 {
		if err := c.DeleteSnapshot(ctx, spec, nameA, "", nil); err != nil {
			t.Errorf("delete %d of a: %v", i, err)
		}
	}
	if names := infoNames(listed(t, c, spec)); fmt.Sprint(names) != fmt.Sprint([]string{nameB, nameC}) {
		t.Errorf("after deleting a: listed %v", names)
	}
	if got := qcow2Snapshots(t, volumeName(spec, "root", "qcow2")); strings.Contains(got, nameA) || !strings.Contains(got, nameB) || !strings.Contains(got, "by-hand") {
		t.Errorf("after deleting a the root overlay holds:\n%s", got)
	}

	// The domain goes with its snapshots (b, c and the one by hand).
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatalf("deleting a domain with snapshots: %v", err)
	}
	if n := domainsNamed(t, spec.Name); n != 0 {
		t.Errorf("%d domains left", n)
	}
	if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
	if ents, err := os.ReadDir(filepath.Join(daemon.Dir, "lib", "qemu", "snapshot", spec.Name)); len(ents) > 0 {
		t.Errorf("snapshot metadata left behind: %v (%v)", ents, err)
	}
	if _, err := c.ListSnapshots(ctx, spec); !errors.Is(err, providers.ErrNoMachine) {
		t.Errorf("listing the snapshots of the deleted domain: %v, want ErrNoMachine", err)
	}
}

// TestSnapshotRevertAfterSeedRemoval: snapshots taken while the NoCloud
// seed was attached hold a definition naming it; once the guest booted
// and its seed was removed (ejected, deleted), a revert to them works
// (libvirt refused to start the domain without the seed file) and leaves
// the seed removed: not attached, not on the pool, recorded so. With
// memory the guest goes on where it was; without, it is shut off and,
// started, boots without a seed coming back.
func TestSnapshotRevertAfterSeedRemoval(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{
		Name: "ns.snap-seed", HostName: "snap-seed", InstanceUUID: "4e6a8c0e-2d4f-4a6b-8c0d-1e2f3a4b5c6d",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:      []providers.Disk{{Name: "root", SizeGiB: 1}},
		NICs:       []providers.NIC{{Name: "eth0", Network: libvirtd.Network}},
		UserData:   []byte("#!/bin/sh\necho marker-snap-seed\n"),
		PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	st, err := c.EnsureMachine(ctx, spec, rec.record)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(context.Background(), spec, rec.record) })
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		b, _ := os.ReadFile(filepath.Join(daemon.Dir, "libvirtd.log"))
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, "ethtool") && !strings.Contains(l, "nlmsg") {
				t.Log(l)
			}
		}
		b, _ = os.ReadFile(filepath.Join(daemon.Dir, "log", "qemu", spec.Name+".log"))
		t.Log(string(b))
	})
	waitSerial(t, spec.Name, "BANLIEUE-READY")
	seed := volumeName(spec, "seed", "iso")
	if live, config, onPool, state := seedOf(t, spec.Name, seed); !live || !config || !onPool || state != "" {
		t.Fatalf("before the snapshots: seed live %t, defined %t, on the pool %t, state %q; want attached", live, config, onPool, state)
	}
	withMem, without := providers.SnapshotName("f6f6f6f6-0000-4000-8000-00000000000f"), providers.SnapshotName("a7a7a7a7-0000-4000-8000-00000000000a")
	mark(t, c, spec, "s")
	if _, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: withMem, IncludeMemory: true}, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: without}, "", nil); err != nil {
		t.Fatal(err)
	}
	// The lease seen, the seed goes.
	deadline := time.Now().Add(60 * time.Second)
	for st.IPAddress == "" && time.Now().Before(deadline) {
		if st, err = c.EnsureMachine(ctx, spec, rec.record); err != nil {
			t.Fatal(err)
		}
		time.Sleep(time.Second)
	}
	removed := func(when string) {
		t.Helper()
		if live, config, onPool, state := seedOf(t, spec.Name, seed); live || config || onPool || state != seedRemoved {
			t.Errorf("%s: seed live %t, defined %t, on the pool %t, state %q; want removed", when, live, config, onPool, state)
		}
	}
	removed("after the lease")
	boots := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT")
	shell(t, c, spec, "echo mem-later > /tmp/m", "", "LATER")

	if err := c.RevertSnapshot(ctx, spec, withMem, "", nil); err != nil {
		t.Fatalf("revert (memory) to a snapshot taken with the seed, removed since: %v", err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainRunning {
		t.Errorf("after the revert with memory: domain state %d, want running", st)
	}
	if mem, _ := read(t, c, spec); mem != "mem-s" {
		t.Errorf("after the revert with memory: RAM %q, want mem-s", mem)
	}
	if n := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT"); n != boots {
		t.Errorf("%d boots after the revert with memory, want %d", n, boots)
	}
	removed("after the revert with memory")

	if err := c.RevertSnapshot(ctx, spec, without, "", nil); err != nil {
		t.Fatalf("revert (no memory) to a snapshot taken with the seed, removed since: %v", err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainShutoff {
		t.Errorf("after the revert without memory: domain state %d, want shut off", st)
	}
	removed("after the revert without memory")
	omitted := spec
	omitted.UserData, omitted.UserDataOmitted = nil, true
	if _, err := c.EnsureMachine(ctx, omitted, rec.record); err != nil {
		t.Fatal(err)
	}
	waitBoots(t, spec.Name, boots+1)
	if log := daemon.SerialLog(spec.Name); !strings.HasSuffix(strings.TrimSpace(log[strings.LastIndex(log, "BANLIEUE-SEED"):strings.LastIndex(log, "BANLIEUE-BOOT")]), "none") {
		t.Errorf("the boot after the revert found a seed:\n%s", log)
	}
	if _, err := c.EnsureMachine(ctx, omitted, rec.record); err != nil {
		t.Fatal(err)
	}
	removed("booted after the revert without memory")

	// Deleted from the running domain: gone from libvirt and the qcow2.
	if st := domainState(t, spec.Name); st != golibvirt.DomainRunning {
		t.Fatalf("domain state %d, want running", st)
	}
	if err := c.DeleteSnapshot(ctx, spec, withMem, "", nil); err != nil {
		t.Fatalf("deleting a snapshot of the running domain: %v", err)
	}
	if names := infoNames(listed(t, c, spec)); fmt.Sprint(names) != fmt.Sprint([]string{without}) {
		t.Errorf("after deleting the one with memory: listed %v", names)
	}
	if got := qcow2Snapshots(t, volumeName(spec, "root", "qcow2")); strings.Contains(got, withMem) || !strings.Contains(got, without) {
		t.Errorf("after deleting the one with memory, the root overlay holds:\n%s", got)
	}
}

// TestSnapshotSuspended: a suspended domain (a managed save: its memory
// in a file on the host, the domain shut off) is snapshotted as a
// shut-off one, without memory; reverted to a snapshot with memory, its
// managed save is dropped (it belongs to the disks before the revert)
// and the guest goes on from the snapshot's memory, PoweredOn.
func TestSnapshotSuspended(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{
		Name: "ns.snap-susp", HostName: "snap-susp", InstanceUUID: "6c8e0a2c-4f6b-4c8d-9e0f-2a3b4c5d6e7f",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:      []providers.Disk{{Name: "root", SizeGiB: 1}, {Name: "data", SizeGiB: 1}},
		UserData:   []byte("#!/bin/sh\necho marker-snap-susp\n"),
		PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(context.Background(), spec, rec.record) })
	waitSerial(t, spec.Name, "BANLIEUE-READY")
	running, suspended := providers.SnapshotName("b8b8b8b8-0000-4000-8000-00000000000b"), providers.SnapshotName("c9c9c9c9-0000-4000-8000-00000000000c")
	mark(t, c, spec, "r")
	if _, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: running, IncludeMemory: true}, "", nil); err != nil {
		t.Fatal(err)
	}
	mark(t, c, spec, "p")
	spec.PowerState = infrav1.PowerStateSuspended
	if st, err := c.EnsureMachine(ctx, spec, rec.record); err != nil || st.PowerState != infrav1.PowerStateSuspended {
		t.Fatalf("suspending: %+v, %v", st, err)
	}
	info, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: suspended, IncludeMemory: true}, "", nil)
	if err != nil || info.Memory {
		t.Errorf("snapshot of the suspended domain: %+v, %v; want one without memory", info, err)
	}
	saveFile := filepath.Join(daemon.Dir, "lib", "qemu", "save", spec.Name+".save")
	if _, err := os.Stat(saveFile); err != nil {
		t.Fatalf("the snapshot took the managed save away: %v", err)
	}
	boots := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT")
	if err := c.RevertSnapshot(ctx, spec, running, "", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(saveFile); !os.IsNotExist(err) {
		t.Errorf("the managed save is left after the revert: %v", err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainRunning {
		t.Errorf("after the revert: domain state %d, want running", st)
	}
	if mem, disk := read(t, c, spec); mem != "mem-r" || disk != "disk-r" {
		t.Errorf("after the revert: RAM %q disk %q, want mem-r disk-r", mem, disk)
	}
	spec.PowerState = infrav1.PowerStatePoweredOn
	if st, err := c.EnsureMachine(ctx, spec, rec.record); err != nil || st.PowerState != infrav1.PowerStatePoweredOn {
		t.Errorf("after the revert: %+v, %v; want PoweredOn", st, err)
	}
	if n := strings.Count(daemon.SerialLog(spec.Name), "BANLIEUE-BOOT"); n != boots {
		t.Errorf("%d boots, want %d: the revert with memory is no boot", n, boots)
	}
	// Back to the suspended one's disks, shut off.
	if err := c.RevertSnapshot(ctx, spec, suspended, "", nil); err != nil {
		t.Fatal(err)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainShutoff {
		t.Errorf("after the revert to the suspended snapshot: domain state %d, want shut off", st)
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 || domainsNamed(t, spec.Name) != 0 {
		t.Errorf("left behind: volumes %v, %d domains", left, domainsNamed(t, spec.Name))
	}
}

// TestSnapshotDeleteDisksMoved: internal snapshots of a running domain
// whose drives changed since they were taken are deleted, and libvirtd
// lives on: one taken with the seed in its CD-ROM, since ejected (libvirt
// 9.0 refuses: "disk image 'hdc' ... is not the same as disk image
// currently used by VM"), and one taken with the CD-ROM drive the
// domain, restarted on a definition without it, no longer has (libvirt
// 9.0's libvirtd crashes on it).
func TestSnapshotDeleteDisksMoved(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{
		Name: "ns.snap-moved", HostName: "snap-moved", InstanceUUID: "8a0c2e4a-6b8d-4e0f-9a1b-3c4d5e6f7a8b",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:      []providers.Disk{{Name: "root", SizeGiB: 1}},
		UserData:   []byte("#!/bin/sh\necho marker-snap-moved\n"),
		PowerState: infrav1.PowerStatePoweredOn,
	}
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(context.Background(), spec, rec.record) })
	waitSerial(t, spec.Name, "BANLIEUE-READY")
	ejected, dropped := providers.SnapshotName("d1d1d1d1-0000-4000-8000-00000000000d"), providers.SnapshotName("e2e2e2e2-0000-4000-8000-00000000000e")
	for _, n := range []string{ejected, dropped} {
		if _, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: n, IncludeMemory: true}, "", nil); err != nil {
			t.Fatal(err)
		}
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
	// The seed ejected, live and defined (as removeSeed does).
	if err := c.eject(dom, volumeName(spec, "seed", "iso")); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, spec, ejected, "", nil); err != nil {
		t.Errorf("deleting a snapshot taken before the seed was ejected, running: %v", err)
	}
	// Restarted on a definition without the CD-ROM drive.
	def, err := c.definition(dom)
	if err != nil {
		t.Fatal(err)
	}
	var keep []libvirtxml.DomainDisk
	for _, d := range def.Devices.Disks {
		if d.Device != "cdrom" {
			keep = append(keep, d)
		}
	}
	def.Devices.Disks = keep
	doc, err := def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainDefineXML(doc); err != nil {
		t.Fatal(err)
	}
	if err := l.DomainDestroy(dom); err != nil {
		t.Fatal(err)
	}
	if err := l.DomainCreate(dom); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteSnapshot(ctx, spec, dropped, "", nil); err != nil {
		t.Errorf("deleting a snapshot taken with a drive the running domain no longer has: %v", err)
	}
	if got, err := c.ListSnapshots(ctx, spec); err != nil || len(got) != 0 {
		t.Errorf("after deleting both: listed %+v, %v", got, err)
	}
	if got := qcow2Snapshots(t, volumeName(spec, "root", "qcow2")); strings.Contains(got, ejected) || strings.Contains(got, dropped) {
		t.Errorf("the root overlay still holds:\n%s", got)
	}
	if st := domainState(t, spec.Name); st != golibvirt.DomainRunning {
		t.Errorf("domain state %d after the deletes, want running", st)
	}
	// Deleting again is fine.
	if err := c.DeleteSnapshot(ctx, spec, dropped, "", nil); err != nil {
		t.Error(err)
	}
}

// TestSnapshotRefused: what libvirt cannot snapshot internally is refused
// with the reason, and nothing is left half made: a running UEFI domain
// (its pflash NVRAM cannot go into a savevm), and a domain with a raw
// disk, running or not. A shut-off UEFI domain is snapshotted (its disks;
// its NVRAM is not in the snapshot), and reverted.
func TestSnapshotRefused(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	for i, tc := range []struct {
		name     string
		firmware string
		disks    []providers.Disk
		power    infrav1.PowerState
		want     string // "" for taken
	}{
		{"efi", "efi", []providers.Disk{{Name: "root", SizeGiB: 1}}, infrav1.PowerStatePoweredOn,
			"libvirt cannot take an internal snapshot of a VM with UEFI pflash firmware (efi): Operation not supported: internal snapshots of a VM with pflash based firmware are not supported"},
		{"efi-secure", "efi-secure", []providers.Disk{{Name: "root", SizeGiB: 1}}, infrav1.PowerStatePoweredOn,
			"UEFI pflash firmware (efi-secure)"},
		{"efi-off", "efi", []providers.Disk{{Name: "root", SizeGiB: 1}}, infrav1.PowerStatePoweredOff, ""},
		{"raw", "bios", []providers.Disk{{Name: "root", SizeGiB: 1}, {Name: "zeroed", SizeGiB: 1, Provisioning: "eagerZeroed"}}, infrav1.PowerStatePoweredOn,
			"disk vdb of ns.snap-raw is raw"},
		{"raw-off", "bios", []providers.Disk{{Name: "root", SizeGiB: 1, Provisioning: "thick"}}, infrav1.PowerStatePoweredOff,
			"disk vda of ns.snap-raw-off is raw"},
	} {
		spec := providers.MachineSpec{
			Name: "ns.snap-" + tc.name, HostName: "snap", InstanceUUID: fmt.Sprintf("5b6c7d8e-9f0a-4b1c-8d2e-3f4a5b6c7d%02d", i),
			Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256, Firmware: tc.firmware,
			Disks: tc.disks, PowerState: tc.power,
		}
		if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
			t.Fatal(err)
		}
		name := providers.SnapshotName("e5e5e5e5-0000-4000-8000-00000000000e")
		info, err := c.CreateSnapshot(ctx, spec, providers.SnapshotSpec{Name: name, IncludeMemory: true}, "", nil)
		t.Logf("%s: %v", tc.name, err)
		got, lerr := c.ListSnapshots(ctx, spec)
		switch {
		case tc.want == "":
			if err != nil || info.Memory || lerr != nil || len(got) != 1 {
				t.Errorf("%s: snapshot %+v, %v; listed %+v, %v; want one, without memory", tc.name, info, err, got, lerr)
			}
			// Started, then reverted: shut off again.
			spec.PowerState = infrav1.PowerStatePoweredOn
			if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
				t.Fatal(err)
			}
			if err := c.RevertSnapshot(ctx, spec, name, "", nil); err != nil {
				t.Errorf("%s: revert: %v", tc.name, err)
			}
			if st := domainState(t, spec.Name); st != golibvirt.DomainShutoff {
				t.Errorf("%s: after the revert: domain state %d, want shut off", tc.name, st)
			}
		default:
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s: snapshot: %v, want an error saying %q", tc.name, err, tc.want)
			}
			if lerr != nil || len(got) != 0 {
				t.Errorf("%s: after the refusal: listed %+v, %v", tc.name, got, lerr)
			}
			if st := domainState(t, spec.Name); (st == golibvirt.DomainRunning) != (tc.power == infrav1.PowerStatePoweredOn) {
				t.Errorf("%s: after the refusal: domain state %d, was %s", tc.name, st, tc.power)
			}
		}
		if err := c.DeleteMachine(ctx, spec, (&recorder{}).record); err != nil {
			t.Fatal(err)
		}
		if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 || domainsNamed(t, spec.Name) != 0 {
			t.Errorf("%s: left behind: volumes %v, %d domains", tc.name, left, domainsNamed(t, spec.Name))
		}
	}
}

func listed(t *testing.T, c *Client, spec providers.MachineSpec) []providers.SnapshotInfo {
	t.Helper()
	got, err := c.ListSnapshots(context.Background(), spec)
	if err != nil {
		t.Fatal(err)
	}
	sort.Slice(got, func(i, j int) bool { return got[i].Name < got[j].Name })
	return got
}

func infoNames(in []providers.SnapshotInfo) []string {
	out := []string{}
	for _, s := range in {
		out = append(out, s.Name)
	}
	sort.Strings(out)
	return out
}

// byHand takes a snapshot named name as an operator would, outside banlieue.
func byHand(t *testing.T, domain, name string) {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	dom, err := l.DomainLookupByName(domain)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainSnapshotCreateXML(dom, "<domainsnapshot><name>"+name+"</name></domainsnapshot>", 0); err != nil {
		t.Fatal(err)
	}
}

// qcow2Snapshots is qemu-img's list of the internal snapshots of a pool
// volume (read while QEMU may hold it: -U).
func qcow2Snapshots(t *testing.T, volume string) string {
	t.Helper()
	out, err := exec.Command("qemu-img", "snapshot", "-U", "-l", filepath.Join(daemon.Dir, "pool", volume)).CombinedOutput()
	if err != nil {
		t.Fatalf("qemu-img snapshot -l %s: %v\n%s", volume, err, out)
	}
	return string(out)
}

// mark has the guest write mem-TAG to RAM (/tmp) and disk-TAG to the
// start of its data disk (vdb), flushed.
func mark(t *testing.T, c *Client, spec providers.MachineSpec, tag string) {
	t.Helper()
	shell(t, c, spec, fmt.Sprintf("echo mem-%s > /tmp/m; printf disk-%s | dd of=/dev/vdb conv=fsync 2>/dev/null; sync", tag, tag), `MARKED-(\d+)`, "MARKED")
}

// read is what the guest has in RAM (/tmp/m, "none" without) and at the
// start of its data disk.
func read(t *testing.T, c *Client, spec providers.MachineSpec) (mem, disk string) {
	t.Helper()
	m := shell(t, c, spec, `echo "ANS:$(cat /tmp/m 2>/dev/null || echo none):$(head -c 6 /dev/vdb):END"`, `ANS:([a-z-]+):([a-z-]*):END`, "")
	return m[1], m[2]
}

var shellSeq atomic.Int32

// shell types cmd into the guest's serial shell and waits for the output
// to match re; done, when set, is printed after cmd with a sequence
// number, for commands that print nothing. The typed line echoes back
// with its $(...) unexpanded, which re must not match. A session that
// ends before the answer is opened again (cmd must bear repeating).
func shell(t *testing.T, c *Client, spec providers.MachineSpec, cmd, re, done string) []string {
	t.Helper()
	if done != "" {
		n := shellSeq.Add(1)
		cmd = fmt.Sprintf("%s; echo %s-$((%d+0))", cmd, done, n)
		re = fmt.Sprintf(`%s-(%d)\b`, done, n)
	}
	rx := regexp.MustCompile(re)
	var errs []string
	for range 3 {
		m, out, err := shellOnce(c, spec, cmd, rx)
		if err == nil {
			return m
		}
		errs = append(errs, fmt.Sprintf("%v (read %q)", err, out))
		time.Sleep(time.Second)
	}
	t.Fatalf("no %s from the guest's shell: %s", re, strings.Join(errs, "; "))
	return nil
}

func shellOnce(c *Client, spec providers.MachineSpec, cmd string, rx *regexp.Regexp) ([]string, string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.OpenConsole(ctx, spec, true)
	if err != nil {
		return nil, "", err
	}
	defer func() { _ = s.Close() }()
	type answer struct {
		m   []string
		out string
		err error
	}
	got := make(chan answer, 1)
	go func() {
		var out bytes.Buffer
		b := make([]byte, 4096)
		for {
			n, err := s.Read(b)
			out.Write(b[:n])
			if m := rx.FindStringSubmatch(out.String()); m != nil {
				got <- answer{m: m}
				return
			}
			if err != nil {
				got <- answer{out: out.String(), err: fmt.Errorf("the console ended: %w", err)}
				return
			}
		}
	}()
	if _, err := fmt.Fprintf(s, "\n%s\n", cmd); err != nil {
		_ = s.Close()
		<-got
		return nil, "", err
	}
	select {
	case a := <-got:
		return a.m, a.out, a.err
	case <-time.After(30 * time.Second):
		_ = s.Close() // ends the reader
		a := <-got
		return nil, a.out, errors.New("no answer in 30 s")
	}
}

// waitBoots waits for the guest's n-th boot to be ready.
func waitBoots(t *testing.T, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		log := daemon.SerialLog(name)
		if strings.Count(log, "BANLIEUE-BOOT") >= n && strings.Count(log, "BANLIEUE-READY") >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no boot %d of %s in 90 s:\n%s", n, name, log)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
