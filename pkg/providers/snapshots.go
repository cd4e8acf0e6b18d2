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

package providers

import (
	"context"
	"errors"
	"strings"
	"time"
)

// SnapshotPrefix starts the backend name of every snapshot banlieue takes
// (SnapshotName): a VM's other snapshots, taken by hand in the backend,
// are neither listed nor touched.
const SnapshotPrefix = "banlieue-snap-"

// SnapshotName is the backend name of the snapshot a
// VirtualMachineSnapshot of this UID takes: its identity, so a call
// repeated after a crash finds the snapshot the first one made instead of
// taking another. 40 characters at most (Proxmox VE allows 40, starting
// with a letter, [A-Za-z0-9_-]).
func SnapshotName(uid string) string {
	id := strings.ReplaceAll(uid, "-", "")
	if len(id) > 26 {
		id = id[:26]
	}
	return SnapshotPrefix + id
}

// SnapshotSpec is one snapshot a machine asks for.
type SnapshotSpec struct {
	// Name is the snapshot's backend name (SnapshotName).
	Name string
	// Description is shown in the backend's own tools (the
	// VirtualMachineSnapshot's namespace/name).
	Description string
	// IncludeMemory keeps a running VM's memory and device state, so a
	// restore resumes it where it was; without it a restore leaves the VM
	// powered off on the snapshot's disks (and the provider powers it on
	// again as its spec says). A powered-off VM has no memory to keep.
	IncludeMemory bool
}

// SnapshotInfo is a snapshot as the backend has it.
type SnapshotInfo struct {
	// Name is the backend name (SnapshotName).
	Name string
	// Ref is the backend's own reference (a vSphere snapshot MoRef; the
	// name on libvirt and Proxmox VE).
	Ref string
	// CreationTime is when the backend took it.
	CreationTime time.Time
	// Memory: the snapshot holds the VM's memory state.
	Memory bool
}

// SnapshotLimits are what a backend's snapshots can do, answered by the
// backend in one place: the Provider publishes them, the core refuses
// what they exclude before any call.
type SnapshotLimits struct {
	// MaxPerVM is the backend's own bound on one VM's snapshots; 0 when
	// it has none.
	MaxPerVM int32
	// Memory: a running VM's memory can be kept (IncludeMemory).
	Memory bool
	// RevertRunning: a running VM is reverted as it runs. Otherwise the
	// provider powers it off first, and says so in the restore's status.
	RevertRunning bool
}

// Snapshots is implemented by a backend that snapshots and reverts VMs
// (VirtualMachineSnapshot, VirtualMachineRestore). Every method finds the
// VM as DeleteMachine does (spec.InstanceUUID at spec.Location). Each
// long call records its backend task with record before it awaits it; a
// call given resume (a task ref an earlier, interrupted call recorded)
// awaits that task instead of asking again.
type Snapshots interface {
	// SnapshotLimits are the backend's answers, the same for every VM.
	SnapshotLimits() SnapshotLimits
	// ListSnapshots lists the VM's snapshots whose names start with
	// SnapshotPrefix; ErrNoMachine when the VM does not exist.
	ListSnapshots(ctx context.Context, spec MachineSpec) ([]SnapshotInfo, error)
	// CreateSnapshot takes snap of the VM. A snapshot of that name that
	// exists already (a call repeated after a crash) is returned as it
	// is: never two.
	CreateSnapshot(ctx context.Context, spec MachineSpec, snap SnapshotSpec, resume string, record TaskRecorder) (SnapshotInfo, error)
	// RevertSnapshot returns the VM to snapshot name: its disks, and its
	// memory and running state when the snapshot holds them; a snapshot
	// without memory leaves the VM powered off. A running VM is reverted
	// only when SnapshotLimits().RevertRunning (the caller powers it off
	// first otherwise). ErrNoSnapshot when it does not exist.
	RevertSnapshot(ctx context.Context, spec MachineSpec, name, resume string, record TaskRecorder) error
	// DeleteSnapshot removes snapshot name, keeping the VM's current
	// state (and its other snapshots); a missing snapshot or VM is fine.
	DeleteSnapshot(ctx context.Context, spec MachineSpec, name, resume string, record TaskRecorder) error
}

// Errors of Snapshots.
var (
	// ErrNoMachine: the VM to snapshot does not exist in the backend.
	ErrNoMachine = errors.New("the VM does not exist in the backend")
	// ErrNoSnapshot: the snapshot to revert to does not exist.
	ErrNoSnapshot = errors.New("the snapshot does not exist in the backend")
)

// SnapshotsOf is b's Snapshots, each call bounded as a machine call (they
// await tasks); false when b's backend takes no snapshots.
func SnapshotsOf(b Backend) (Snapshots, bool) {
	b, d := unwrap(b)
	s, ok := b.(Snapshots)
	if !ok {
		return nil, false
	}
	return boundedSnapshots{s: s, d: d}, true
}

type boundedSnapshots struct {
	s Snapshots
	d Deadlines
}

func (b boundedSnapshots) SnapshotLimits() SnapshotLimits { return b.s.SnapshotLimits() }

func (b boundedSnapshots) ListSnapshots(ctx context.Context, spec MachineSpec) ([]SnapshotInfo, error) {
	ctx, done := b.d.call(ctx, "ListSnapshots", b.d.Call)
	snaps, err := b.s.ListSnapshots(ctx, spec)
	done(err)
	return snaps, err
}

func (b boundedSnapshots) CreateSnapshot(ctx context.Context, spec MachineSpec, snap SnapshotSpec, resume string, record TaskRecorder) (SnapshotInfo, error) {
	ctx, done := b.d.call(ctx, "CreateSnapshot", b.d.Machine)
	info, err := b.s.CreateSnapshot(ctx, spec, snap, resume, record)
	done(err)
	return info, err
}

func (b boundedSnapshots) RevertSnapshot(ctx context.Context, spec MachineSpec, name, resume string, record TaskRecorder) error {
	ctx, done := b.d.call(ctx, "RevertSnapshot", b.d.Machine)
	err := b.s.RevertSnapshot(ctx, spec, name, resume, record)
	done(err)
	return err
}

func (b boundedSnapshots) DeleteSnapshot(ctx context.Context, spec MachineSpec, name, resume string, record TaskRecorder) error {
	ctx, done := b.d.call(ctx, "DeleteSnapshot", b.d.Machine)
	err := b.s.DeleteSnapshot(ctx, spec, name, resume, record)
	done(err)
	return err
}
