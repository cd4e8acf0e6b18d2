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
	"strings"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/machinespec"
)

var _ providers.Snapshots = &Client{}

// SnapshotLimits are machinespec.SnapshotLimits, answered once there.
func (c *Client) SnapshotLimits() providers.SnapshotLimits { return machinespec.SnapshotLimits }

// snapshotVM is the VM spec names; ErrNoMachine when there is none.
func (c *Client) snapshotVM(ctx context.Context, spec providers.MachineSpec) (*proxmox.VirtualMachine, error) {
	vm, err := c.find(ctx, spec)
	if err != nil {
		return nil, err
	}
	if vm == nil {
		return nil, fmt.Errorf("%w: no VM of instance %s", providers.ErrNoMachine, spec.InstanceUUID)
	}
	return vm, nil
}

// ListSnapshots lists the VM's complete snapshots named SnapshotPrefix...
// (one a task is still taking or deleting, snapstate prepare or delete,
// is not one yet, or not any more).
func (c *Client) ListSnapshots(ctx context.Context, spec providers.MachineSpec) ([]providers.SnapshotInfo, error) {
	vm, err := c.snapshotVM(ctx, spec)
	if err != nil {
		return nil, err
	}
	snaps, err := vm.Snapshots(ctx)
	if err != nil {
		return nil, fmt.Errorf("listing the snapshots of %s: %w", spec.Name, err)
	}
	var out []providers.SnapshotInfo
	for _, s := range snaps {
		if strings.HasPrefix(s.Name, providers.SnapshotPrefix) && s.Snapstate == "" {
			out = append(out, snapshotInfo(s))
		}
	}
	return out, nil
}

func snapshotInfo(s *proxmox.VirtualMachineSnapshot) providers.SnapshotInfo {
	return providers.SnapshotInfo{Name: s.Name, Ref: s.Name, CreationTime: time.Unix(s.Snaptime, 0), Memory: s.Vmstate == 1}
}

// settled is snapshot name of vm once no task holds it: a create or
// delete whose UPID was never recorded (the provider died between the
// request and the record) is waited for, as its snapstate says. nil when
// there is no such snapshot.
func (c *Client) settled(ctx context.Context, vm *proxmox.VirtualMachine, name string) (*proxmox.VirtualMachineSnapshot, error) {
	deadline := time.Now().Add(c.opts.TaskTimeout)
	for {
		snaps, err := vm.Snapshots(ctx)
		if err != nil {
			return nil, fmt.Errorf("listing the snapshots of VM %d: %w", vm.VMID, err)
		}
		var found *proxmox.VirtualMachineSnapshot
		for _, s := range snaps {
			if s.Name == name {
				found = s
			}
		}
		if found == nil || found.Snapstate == "" {
			return found, nil
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("snapshot %s of VM %d is still in state %s", name, vm.VMID, found.Snapstate)
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(c.opts.TaskPoll):
		}
	}
}

// ready reads vm again and waits while another task holds it: a snapshot
// task on a locked VM fails ("VM is locked").
func (c *Client) ready(ctx context.Context, vm *proxmox.VirtualMachine) error {
	if err := vm.Ping(ctx); err != nil {
		return err
	}
	return c.unlocked(ctx, vm)
}

// CreateSnapshot takes snap (a qmsnapshot task, with the VM's memory when
// asked and the VM runs: Proxmox VE keeps none of a stopped VM). A
// snapshot of that name that exists is returned as it is, once a task
// that still holds it ends: never two.
func (c *Client) CreateSnapshot(ctx context.Context, spec providers.MachineSpec, snap providers.SnapshotSpec, resume string, record providers.TaskRecorder) (providers.SnapshotInfo, error) {
	vm, err := c.snapshotVM(ctx, spec)
	if err != nil {
		return providers.SnapshotInfo{}, err
	}
	c.resume(ctx, resume)
	if s, err := c.settled(ctx, vm, snap.Name); err != nil || s != nil {
		if err != nil {
			return providers.SnapshotInfo{}, err
		}
		return snapshotInfo(s), nil
	}
	if err := c.ready(ctx, vm); err != nil {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshotting %s: %w", spec.Name, err)
	}
	// go-proxmox's NewSnapshot sends the name alone.
	args := map[string]any{"snapname": snap.Name}
	if snap.Description != "" {
		args["description"] = snap.Description
	}
	if snap.IncludeMemory {
		args["vmstate"] = 1
	}
	var upid proxmox.UPID
	if err := c.api.Post(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/snapshot", vm.Node, vm.VMID), args, &upid); err != nil {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshotting %s: %w", spec.Name, err)
	}
	h := handle{node: vm.Node, vmid: int(vm.VMID)}
	taskErr := c.wait(ctx, proxmox.NewTask(upid, c.api), record, h.String())
	var failed *proxmox.TaskFailedError
	if taskErr != nil && !errors.As(taskErr, &failed) {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshotting %s: %w", spec.Name, taskErr)
	}
	// Read back, also after a failed task: another call may have taken
	// the name first ("already used", or the VM locked by its task).
	s, err := c.settled(ctx, vm, snap.Name)
	switch {
	case err != nil:
		return providers.SnapshotInfo{}, err
	case s != nil:
		return snapshotInfo(s), nil
	case taskErr != nil:
		return providers.SnapshotInfo{}, fmt.Errorf("snapshotting %s: %w", spec.Name, taskErr)
	}
	return providers.SnapshotInfo{}, fmt.Errorf("snapshotting %s: snapshot %s is missing after its task", spec.Name, snap.Name)
}

// RevertSnapshot rolls the VM back to snapshot name (a qmrollback task).
// Proxmox VE stops a running VM as the rollback starts, then resumes it
// from the snapshot's memory; a snapshot without memory leaves it
// stopped (start is not asked: the caller powers it on as its spec
// says). A recorded rollback that ended OK is not asked again.
func (c *Client) RevertSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	vm, err := c.snapshotVM(ctx, spec)
	if err != nil {
		return err
	}
	if h, ok := parseHandle(resume); ok && h.upid != "" {
		err := c.await(ctx, proxmox.NewTask(proxmox.UPID(h.upid), c.api))
		var failed *proxmox.TaskFailedError
		switch {
		case err == nil:
			return nil
		case errors.As(err, &failed) || strings.Contains(err.Error(), "no such task"):
			// It failed, or the node forgot it: a rollback is asked again.
		default:
			return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
		}
	}
	s, err := c.settled(ctx, vm, name)
	if err != nil {
		return err
	}
	if s == nil {
		return fmt.Errorf("reverting %s: %w: %s", spec.Name, providers.ErrNoSnapshot, name)
	}
	if err := c.ready(ctx, vm); err != nil {
		return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
	}
	task, err := vm.Snapshot(name).Rollback(ctx)
	if err != nil {
		return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
	}
	h := handle{node: vm.Node, vmid: int(vm.VMID)}
	if err := c.wait(ctx, task, record, h.String()); err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return fmt.Errorf("reverting %s: %w: %v", spec.Name, providers.ErrNoSnapshot, err)
		}
		return fmt.Errorf("reverting %s to %s: %w", spec.Name, name, err)
	}
	return nil
}

// DeleteSnapshot deletes snapshot name (a qmdelsnapshot task); a missing
// snapshot or VM is fine.
func (c *Client) DeleteSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	vm, err := c.find(ctx, spec)
	if err != nil || vm == nil {
		return err
	}
	c.resume(ctx, resume)
	s, err := c.settled(ctx, vm, name)
	if err != nil || s == nil {
		return err
	}
	if err := c.ready(ctx, vm); err != nil {
		return fmt.Errorf("deleting snapshot %s of %s: %w", name, spec.Name, err)
	}
	task, err := vm.Snapshot(name).Delete(ctx)
	if err != nil {
		return fmt.Errorf("deleting snapshot %s of %s: %w", name, spec.Name, err)
	}
	h := handle{node: vm.Node, vmid: int(vm.VMID)}
	if err := c.wait(ctx, task, record, h.String()); err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil // another call deleted it first
		}
		return fmt.Errorf("deleting snapshot %s of %s: %w", name, spec.Name, err)
	}
	return nil
}
