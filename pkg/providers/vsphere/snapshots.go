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
	"errors"
	"fmt"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

var _ providers.Snapshots = &Client{}

// SnapshotLimits are machinespec.SnapshotLimits, answered once there.
func (c *Client) SnapshotLimits() providers.SnapshotLimits { return machinespec.SnapshotLimits }

// ListSnapshots lists the VM's banlieue snapshots (SnapshotPrefix), its
// whole snapshot tree flattened, parents before their children.
func (c *Client) ListSnapshots(ctx context.Context, spec providers.MachineSpec) ([]providers.SnapshotInfo, error) {
	_, m, err := c.snapshotMachine(ctx, spec)
	if err != nil {
		return nil, err
	}
	if m == nil {
		return nil, fmt.Errorf("snapshots of %s: %w", spec.Name, providers.ErrNoMachine)
	}
	var out []providers.SnapshotInfo
	for _, n := range snapshotNodes(m) {
		if strings.HasPrefix(n.Name, providers.SnapshotPrefix) {
			out = append(out, snapshotInfo(n))
		}
	}
	return out, nil
}

// CreateSnapshot takes snap of the VM (CreateSnapshot_Task, recorded
// before it is awaited), with the memory when it asks for it and the VM
// runs; not quiesced (that needs VMware Tools in the guest). resume, the
// task an interrupted call recorded, is awaited first; a snapshot of the
// name that exists then is returned as it is.
func (c *Client) CreateSnapshot(ctx context.Context, spec providers.MachineSpec, snap providers.SnapshotSpec, resume string, record providers.TaskRecorder) (providers.SnapshotInfo, error) {
	info, err := c.createSnapshot(ctx, spec, snap, resume, record)
	return info, c.refs.forgetIfGone(err)
}

func (c *Client) createSnapshot(ctx context.Context, spec providers.MachineSpec, snap providers.SnapshotSpec, resume string, record providers.TaskRecorder) (providers.SnapshotInfo, error) {
	if snap.Name == "" {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshot of %s: no name", spec.Name)
	}
	if err := c.resume(ctx, resume); err != nil {
		return providers.SnapshotInfo{}, err
	}
	vm, m, err := c.snapshotMachine(ctx, spec)
	if err != nil {
		return providers.SnapshotInfo{}, err
	}
	if m == nil {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshot %s of %s: %w", snap.Name, spec.Name, providers.ErrNoMachine)
	}
	if n := snapshotNamed(m, snap.Name); n != nil {
		return snapshotInfo(*n), nil
	}
	memory := snap.IncludeMemory && m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn
	task, err := vm.CreateSnapshot(ctx, snap.Name, snap.Description, memory, false)
	if err != nil {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshot %s of %s: %w", snap.Name, spec.Name, err)
	}
	res, err := waitResult(ctx, task, record)
	if err != nil {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshot %s of %s: %w", snap.Name, spec.Name, err)
	}
	// The tree has the snapshot's creation time and state: read it again.
	if m, err = readSnapshots(ctx, vm); err != nil {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshot %s of %s: %w", snap.Name, spec.Name, err)
	}
	ref, _ := res.Result.(types.ManagedObjectReference)
	for _, n := range snapshotNodes(m) {
		if n.Snapshot == ref {
			return snapshotInfo(n), nil
		}
	}
	if n := snapshotNamed(m, snap.Name); n != nil {
		return snapshotInfo(*n), nil
	}
	return providers.SnapshotInfo{}, fmt.Errorf("snapshot %s of %s not found after taking it", snap.Name, spec.Name)
}

// RevertSnapshot reverts the VM to snapshot name (RevertToSnapshot_Task,
// recorded before it is awaited), then leaves it in the power state the
// snapshot holds: off for a snapshot without memory, running for one of
// a running VM's memory. vCenter does that itself; vcsim does not (its
// revert leaves the power state as it was, TestSnapshotVcsimRevertKeepsPower),
// and the power tasks here are then no-ops on vCenter. resume, the revert
// an interrupted call recorded, is awaited instead of asking again; a
// resumed revert vCenter no longer knows, or that failed, is asked again
// (a revert repeated lands on the same snapshot).
func (c *Client) RevertSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	return c.refs.forgetIfGone(c.revertSnapshot(ctx, spec, name, resume, record))
}

func (c *Client) revertSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	reverted, err := c.resumed(ctx, resume)
	if err != nil {
		return err
	}
	vm, m, err := c.snapshotMachine(ctx, spec)
	if err != nil {
		return err
	}
	if m == nil {
		return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, providers.ErrNoMachine)
	}
	n := snapshotNamed(m, name)
	if n == nil && reverted {
		return nil // reverted, and removed since: no state to match
	}
	if n == nil {
		return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, providers.ErrNoSnapshot)
	}
	if !reverted {
		// RevertToSnapshot_Task on the snapshot itself: govmomi's
		// VirtualMachine.RevertToSnapshot looks it up by name again.
		res, err := methods.RevertToSnapshot_Task(ctx, c.gc.Client, &types.RevertToSnapshot_Task{This: n.Snapshot})
		if err != nil {
			return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
		}
		task := object.NewTask(c.gc.Client, res.Returnval)
		if err := wait(ctx, task, record); err != nil {
			return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
		}
	}
	if err := powerAsSnapshot(ctx, vm, n.State); err != nil {
		return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
	}
	return nil
}

// powerAsSnapshot brings vm to the power state a snapshot of state holds
// after a revert: off without memory, on (or suspended) with it. Power
// tasks are not recorded (the state is read again before each).
func powerAsSnapshot(ctx context.Context, vm *object.VirtualMachine, state types.VirtualMachinePowerState) error {
	now, err := vm.PowerState(ctx)
	if err != nil {
		return err
	}
	p := vmPower{vm: vm}
	switch {
	case now == state:
		return nil
	case state == types.VirtualMachinePowerStatePoweredOff:
		return p.HardOff(ctx)
	case state == types.VirtualMachinePowerStatePoweredOn:
		return p.Start(ctx) // from off or suspended
	case state == types.VirtualMachinePowerStateSuspended && now == types.VirtualMachinePowerStatePoweredOn:
		return p.Suspend(ctx)
	}
	return nil
}

// DeleteSnapshot removes snapshot name (RemoveSnapshot_Task, children
// kept, disks consolidated), recorded before it is awaited; a missing
// snapshot or VM is fine. resume, the removal an interrupted call
// recorded, is awaited first; the tree read after says whether anything
// is left to remove.
func (c *Client) DeleteSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	return c.refs.forgetIfGone(c.deleteSnapshot(ctx, spec, name, resume, record))
}

func (c *Client) deleteSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	if err := c.resume(ctx, resume); err != nil {
		return err
	}
	_, m, err := c.snapshotMachine(ctx, spec)
	if err != nil || m == nil {
		return err
	}
	// Every snapshot of the name: never two, but one made by hand with
	// the name would keep the name listed.
	for _, n := range snapshotNodes(m) {
		if n.Name != name {
			continue
		}
		res, err := methods.RemoveSnapshot_Task(ctx, c.gc.Client, &types.RemoveSnapshot_Task{This: n.Snapshot, RemoveChildren: false, Consolidate: types.NewBool(true)})
		if err != nil && fault.Is(err, &types.ManagedObjectNotFound{}) {
			continue // removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("deleting snapshot %s of %s: %w", name, spec.Name, err)
		}
		task := object.NewTask(c.gc.Client, res.Returnval)
		if err := wait(ctx, task, record); err != nil && !fault.Is(err, &types.ManagedObjectNotFound{}) {
			return fmt.Errorf("deleting snapshot %s of %s: %w", name, spec.Name, err)
		}
	}
	return nil
}

// resumed awaits the task an interrupted call recorded, and tells whether
// it succeeded; false, with no error, when there is none, vCenter no
// longer knows it, or it failed (the caller asks again).
func (c *Client) resumed(ctx context.Context, ref string) (bool, error) {
	if ref == "" {
		return false, nil
	}
	task := object.NewTask(c.gc.Client, types.ManagedObjectReference{Type: "Task", Value: ref})
	var t mo.Task
	err := task.Properties(ctx, task.Reference(), []string{"info.state"}, &t)
	switch {
	case err != nil && fault.Is(err, &types.ManagedObjectNotFound{}):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("reading task %s: %w", ref, err)
	}
	if _, err := awaitTask(ctx, task); err != nil {
		if ctx.Err() != nil {
			return false, err
		}
		return false, nil
	}
	return true, nil
}

// snapshotMachine is the VM spec names with its snapshot tree and power
// state read; nil, nil when it does not exist. It is found as
// DeleteMachine finds it: by its instance UUID in the spec's datacenter,
// else across vCenter (a datacenter edited or gone since the VM was
// built). A cached reference vCenter no longer knows (a VM destroyed
// elsewhere) is forgotten and the VM looked up again.
func (c *Client) snapshotMachine(ctx context.Context, spec providers.MachineSpec) (*object.VirtualMachine, *mo.VirtualMachine, error) {
	for try := 0; ; try++ {
		vm, err := c.machineAnywhere(ctx, spec)
		if err != nil || vm == nil {
			return nil, nil, err
		}
		m, err := readSnapshots(ctx, vm)
		if err != nil && try == 0 && fault.Is(err, &types.ManagedObjectNotFound{}) {
			c.refs.forget()
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("reading %s: %w", spec.Name, err)
		}
		return vm, m, nil
	}
}

// machineAnywhere is the VM spec names: by its instance UUID in the
// spec's datacenter, else across vCenter; nil when there is none.
func (c *Client) machineAnywhere(ctx context.Context, spec providers.MachineSpec) (*object.VirtualMachine, error) {
	anywhere := &located{c: c, f: find.NewFinder(c.gc.Client, false)}
	l, err := c.locate(ctx, spec.Location.Datacenter)
	var nf *find.NotFoundError
	if errors.As(err, &nf) && spec.InstanceUUID != "" {
		return findMachine(ctx, anywhere, spec)
	}
	if err != nil {
		return nil, err
	}
	vm, err := findMachine(ctx, l, spec)
	if err == nil && vm == nil && spec.InstanceUUID != "" {
		return findMachine(ctx, anywhere, spec)
	}
	return vm, err
}

// readSnapshots reads vm's snapshot tree and power state.
func readSnapshots(ctx context.Context, vm *object.VirtualMachine) (*mo.VirtualMachine, error) {
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"snapshot", "runtime.powerState"}, &m); err != nil {
		return nil, err
	}
	return &m, nil
}

// snapshotNodes is m's snapshot tree flattened, parents first.
func snapshotNodes(m *mo.VirtualMachine) []types.VirtualMachineSnapshotTree {
	if m.Snapshot == nil {
		return nil
	}
	var out []types.VirtualMachineSnapshotTree
	var walk func([]types.VirtualMachineSnapshotTree)
	walk = func(nodes []types.VirtualMachineSnapshotTree) {
		for _, n := range nodes {
			out = append(out, n)
			walk(n.ChildSnapshotList)
		}
	}
	walk(m.Snapshot.RootSnapshotList)
	return out
}

// snapshotNamed is m's first snapshot named name, or nil.
func snapshotNamed(m *mo.VirtualMachine, name string) *types.VirtualMachineSnapshotTree {
	for _, n := range snapshotNodes(m) {
		if n.Name == name {
			return &n
		}
	}
	return nil
}

// snapshotInfo is a tree node as providers has it. The node's state is the
// VM's power state the snapshot restores: on (or suspended) only when it
// holds the memory; a snapshot without memory is "poweredOff" whatever the
// VM was.
func snapshotInfo(n types.VirtualMachineSnapshotTree) providers.SnapshotInfo {
	return providers.SnapshotInfo{
		Name:         n.Name,
		Ref:          n.Snapshot.Value,
		CreationTime: n.CreateTime,
		Memory:       n.State != types.VirtualMachinePowerStatePoweredOff,
	}
}
