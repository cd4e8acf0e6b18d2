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
	"net"
	"path"
	"strings"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	powerpkg "github.com/firestoned/banlieue/pkg/providers/power"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

var _ providers.Machines = &Client{}

// lookup finds the VM by name, or returns nil.
func lookup(ctx context.Context, f *find.Finder, name string) (*object.VirtualMachine, error) {
	vm, err := f.VirtualMachine(ctx, name)
	var nf *find.NotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	return vm, err
}

// EnsureMachine finds the VM by its instance UUID, clones the template when
// it does not exist, converges firmware, vTPM, NICs, disks and guestinfo,
// and drives the power state. A task on a VM that does not exist yet (the
// clone) or will not exist after (destroy) is handed to record before it
// is waited for; spec.TaskRef, a task an interrupted call left behind, is
// waited for first. Every other task runs on the VM, which vCenter lists
// in its recentTask from the moment it starts: converge waits for those
// before it reads the VM, so a restarted provider never clones twice or
// adds a disk twice, and pays no status write per reconfigure.
func (c *Client) EnsureMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (providers.MachineStatus, error) {
	st, err := c.ensureMachine(ctx, spec, record)
	return st, c.refs.forgetIfGone(err)
}

func (c *Client) ensureMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (providers.MachineStatus, error) {
	l, err := c.locate(ctx, spec.Location.Datacenter)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	if err := c.resume(ctx, spec.TaskRef); err != nil {
		return providers.MachineStatus{}, err
	}
	vm, err := findMachine(ctx, l, spec)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	created := vm == nil
	if created {
		if spec.UserDataOmitted {
			return providers.MachineStatus{}, providers.ErrUserDataNeeded
		}
		if vm, err = clone(ctx, l, spec, record); err != nil {
			return providers.MachineStatus{}, err
		}
	}
	offPending, seen, err := converge(ctx, l, vm, spec)
	if err != nil {
		return providers.MachineStatus{Created: created}, fmt.Errorf("configuring %s: %w", spec.Name, err)
	}
	// A guest asked to shut down for new CPUs or memory has its grace:
	// no power change meanwhile, the next call looks again.
	if !offPending {
		if err := power(ctx, vm, spec, seen); err != nil {
			return providers.MachineStatus{Created: created}, fmt.Errorf("powering %s: %w", spec.Name, err)
		}
	}
	st, m, err := observe(ctx, vm, spec.Name)
	st.Created = created
	st.Restarting = offPending && spec.PowerState != infrav1.PowerStatePoweredOff
	if err != nil {
		return st, err
	}
	// A guest that reported its address since converge read the VM has
	// consumed its bootstrap data: it goes now, not on a reconcile that
	// may not come (an addressed, converged VM is not polled).
	if err := removeBootstrap(ctx, vm, m); err != nil {
		return st, fmt.Errorf("configuring %s: %w", spec.Name, err)
	}
	return st, nil
}

// GuestAddress reads the guest's address and power state alone: one call
// once the machine's reference is cached, where EnsureMachine on a
// converged VM makes a dozen.
func (c *Client) GuestAddress(ctx context.Context, spec providers.MachineSpec) (string, bool, error) {
	l, err := c.locate(ctx, spec.Location.Datacenter)
	if err != nil {
		return "", false, err
	}
	vm, err := findMachine(ctx, l, spec)
	if err != nil || vm == nil {
		return "", false, err
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"runtime.powerState", "guest.ipAddress", "guest.toolsRunningStatus"}, &m); err != nil {
		return "", false, fmt.Errorf("reading %s: %w", spec.Name, c.refs.forgetIfGone(err))
	}
	if powerState(m.Runtime.PowerState) != spec.PowerState {
		return "", false, nil
	}
	if m.Guest == nil {
		return "", true, nil
	}
	if bootstrapConsumed(m) {
		// The address is the last this poll reads of the VM (the caller
		// converges it no more): its bootstrap data goes with it, the
		// extraConfig read this once per VM.
		var extra mo.VirtualMachine // a read fills all of its target anew
		if err := vm.Properties(ctx, vm.Reference(), []string{"config.extraConfig"}, &extra); err != nil {
			return "", false, fmt.Errorf("reading %s: %w", spec.Name, c.refs.forgetIfGone(err))
		}
		m.Config = extra.Config
		if err := removeBootstrap(ctx, vm, m); err != nil {
			return "", false, fmt.Errorf("%s: %w", spec.Name, c.refs.forgetIfGone(err))
		}
	}
	return m.Guest.IpAddress, true, nil
}

// observe reads what the backend reports of vm (named name), and returns
// what it read.
func observe(ctx context.Context, vm *object.VirtualMachine, name string) (providers.MachineStatus, mo.VirtualMachine, error) {
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config", "runtime.powerState", "guest"}, &m); err != nil {
		return providers.MachineStatus{}, m, fmt.Errorf("reading %s: %w", name, err)
	}
	st := providers.MachineStatus{PowerState: powerState(m.Runtime.PowerState)}
	if m.Config != nil {
		st.BIOSUUID, st.InstanceUUID = m.Config.Uuid, m.Config.InstanceUuid
		st.ProviderID = "vsphere://" + m.Config.Uuid
		st.CPUs, st.MemoryMiB = m.Config.Hardware.NumCPU, int64(m.Config.Hardware.MemoryMB)
		st.Firmware = firmware(m.Config)
		devices := object.VirtualDeviceList(m.Config.Hardware.Device)
		for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
			st.DiskSizesGiB = append(st.DiskSizesGiB, d.(*types.VirtualDisk).CapacityInKB/(1024*1024))
		}
		for _, d := range devices.SelectByType((*types.VirtualEthernetCard)(nil)) {
			st.Networks = append(st.Networks, networkName(ctx, vm.Client(), d.(types.BaseVirtualEthernetCard)))
		}
		st.TPM = len(devices.SelectByType((*types.VirtualTPM)(nil))) > 0
	}
	if m.Guest != nil {
		st.IPAddress = m.Guest.IpAddress
	}
	return st, m, nil
}

// findMachine returns the VM with spec's instance UUID (by name when the spec has
// none), or nil.
func findMachine(ctx context.Context, l *located, spec providers.MachineSpec) (*object.VirtualMachine, error) {
	if spec.InstanceUUID == "" {
		return lookup(ctx, l.f, spec.Name)
	}
	return l.machine(ctx, spec.InstanceUUID)
}

// resume waits for a task an interrupted call started. A task that vCenter
// no longer knows (expired, or the ref is stale) is simply forgotten; its
// outcome is visible in the inventory anyway.
func (c *Client) resume(ctx context.Context, ref string) error {
	if ref == "" {
		return nil
	}
	task := object.NewTask(c.gc.Client, types.ManagedObjectReference{Type: "Task", Value: ref})
	var t mo.Task
	err := task.Properties(ctx, task.Reference(), []string{"info.state"}, &t)
	switch {
	case err != nil && fault.Is(err, &types.ManagedObjectNotFound{}):
	case err != nil:
		return fmt.Errorf("reading task %s: %w", ref, err)
	default:
		// Failed tasks (a duplicate clone, say) are not an error here: the
		// caller looks at the inventory next and acts on what it finds.
		if _, err := awaitTask(ctx, task); ctx.Err() != nil {
			return err
		}
	}
	return nil
}

// wait records the task, then waits for it. The record is not cleared
// here: the next task's replaces it, and the caller clears it with the
// status it writes at the end, one API write per task instead of two.
func wait(ctx context.Context, task *object.Task, record providers.TaskRecorder) error {
	_, err := waitResult(ctx, task, record)
	return err
}

// waitResult is wait, returning the task's outcome.
func waitResult(ctx context.Context, task *object.Task, record providers.TaskRecorder) (*types.TaskInfo, error) {
	if err := record(ctx, task.Reference().Value); err != nil {
		return nil, fmt.Errorf("recording task %s: %w", task.Reference().Value, err)
	}
	return awaitTask(ctx, task)
}

// awaitTask waits for task to end and returns its outcome, through the
// session's task watch (waitTask). govmomi's wait returns no error when
// its context ends first (it cancels the wait and reports that as done):
// this says so, so no caller takes a task still running, and its missing
// result, for a success.
func awaitTask(ctx context.Context, task *object.Task) (*types.TaskInfo, error) {
	info, err := waitTask(ctx, task)
	if ctx.Err() != nil {
		return nil, fmt.Errorf("waiting for task %s: %w", task.Reference().Value, ctx.Err())
	}
	return info, err
}

// firmware is bios, efi or efi-secure.
func firmware(cfg *types.VirtualMachineConfigInfo) string {
	if cfg.Firmware != string(types.GuestOsDescriptorFirmwareTypeEfi) {
		return "bios"
	}
	if b := cfg.BootOptions; b != nil && ptr.Deref(b.EfiSecureBootEnabled, false) {
		return "efi-secure"
	}
	return "efi"
}

// networkName names a NIC's network: the port group's name (a distributed
// port group's key when its name cannot be read).
func networkName(ctx context.Context, c *vim25.Client, nic types.BaseVirtualEthernetCard) string {
	switch b := nic.GetVirtualEthernetCard().Backing.(type) {
	case *types.VirtualEthernetCardNetworkBackingInfo:
		return b.DeviceName
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		var pg mo.DistributedVirtualPortgroup
		ref := types.ManagedObjectReference{Type: "DistributedVirtualPortgroup", Value: b.Port.PortgroupKey}
		if err := property.DefaultCollector(c).RetrieveOne(ctx, ref, []string{"name"}, &pg); err == nil {
			return pg.Name
		}
		return b.Port.PortgroupKey
	case *types.VirtualEthernetCardOpaqueNetworkBackingInfo:
		return b.OpaqueNetworkId
	}
	return ""
}

// converge brings an existing VM to spec in as few reconfigures as vCenter
// allows, usually one: CPUs, memory, firmware, secure boot, devices (NICs,
// disks, vTPM) and guestinfo together. Enabling secure boot on a BIOS VM
// needs the firmware switched first (vCenter checks secure boot against the
// current firmware), and guestinfo names NICs by MAC, so NICs being added
// get their guestinfo in a second reconfigure. Nothing differs, nothing is
// sent: a steady-state reconcile changes nothing. CPUs or memory a running
// VM cannot take wait for it to power off as spec.powerOffMode says:
// offPending tells that its guest was asked to shut down and is not off
// yet (the rest is converged meanwhile). seen is the power state converge
// read last (reconfigures do not change it), so the power step starts
// from it instead of reading it again.
func converge(ctx context.Context, l *located, vm *object.VirtualMachine, spec providers.MachineSpec) (offPending bool, seen infrav1.PowerState, err error) {
	err = convergeVM(ctx, l, vm, spec, &offPending, &seen)
	return offPending, seen, err
}

func convergeVM(ctx context.Context, l *located, vm *object.VirtualMachine, spec providers.MachineSpec, offPending *bool, seen *infrav1.PowerState) (err error) {
	m, err := settled(ctx, vm)
	if err != nil {
		return err
	}
	defer func() {
		if err == nil {
			*seen = powerState(m.Runtime.PowerState)
		}
	}()
	if m.Config == nil {
		return fmt.Errorf("VM has no configuration yet")
	}
	reconfigure := func(what string, cs types.VirtualMachineConfigSpec) error {
		task, err := vm.Reconfigure(ctx, cs)
		if err == nil {
			_, err = awaitTask(ctx, task)
		}
		if err != nil {
			return fmt.Errorf("%s: %w", what, err)
		}
		return nil
	}
	// reread refreshes m after a reconfigure whose result the next step
	// reads: all of it, as a read replaces m whole (reading config alone
	// left the power state empty, and a VM just cloned with secure boot
	// never took its hot-add flags or guestId before its first power-on).
	reread := func() error { return vm.Properties(ctx, vm.Reference(), settledProperties(), &m) }

	cs := types.VirtualMachineConfigSpec{}
	if spec.Firmware != "" && spec.Firmware != firmware(m.Config) {
		fw := string(types.GuestOsDescriptorFirmwareTypeBios)
		if spec.Firmware != "bios" {
			fw = string(types.GuestOsDescriptorFirmwareTypeEfi)
		}
		secure := spec.Firmware == "efi-secure"
		if m.Config.Firmware != fw {
			if secure {
				if err := reconfigure("firmware "+fw, types.VirtualMachineConfigSpec{Firmware: fw}); err != nil {
					return err
				}
				if err := reread(); err != nil {
					return err
				}
			} else {
				cs.Firmware = fw
			}
		}
		if was := m.Config.BootOptions != nil && ptr.Deref(m.Config.BootOptions.EfiSecureBootEnabled, false); secure != was {
			cs.BootOptions = &types.VirtualMachineBootOptions{EfiSecureBootEnabled: &secure}
		}
	}
	devices := object.VirtualDeviceList(m.Config.Hardware.Device)
	if spec.CPUs > 0 && spec.CPUs != m.Config.Hardware.NumCPU {
		cs.NumCPUs = spec.CPUs
	}
	if spec.MemoryMiB > 0 && spec.MemoryMiB != int64(m.Config.Hardware.MemoryMB) {
		cs.MemoryMB = spec.MemoryMiB
	}
	if m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn && needsPowerOff(m.Config, cs) {
		// CPUs or memory vCenter cannot change live: off first, as
		// spec.powerOffMode says, then on again (the power step) with
		// the new shape. A guest asked to shut down keeps its shape
		// until it is off (a later call, after the grace TrySoft's
		// hard power-off).
		off := spec
		off.PowerState = infrav1.PowerStatePoweredOff
		if err := power(ctx, vm, off, powerState(m.Runtime.PowerState)); err != nil {
			return fmt.Errorf("powering off to change CPUs or memory: %w", err)
		}
		// The whole read again: the power state decides below.
		m = mo.VirtualMachine{}
		if err := vm.Properties(ctx, vm.Reference(), settledProperties(), &m); err != nil {
			return err
		}
		if m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff {
			*offPending = true
			cs.NumCPUs, cs.MemoryMB = 0, 0
		}
	}
	if m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff {
		// vCenter changes the hot-add flags of a powered-off VM only.
		cs.CpuHotAddEnabled, cs.MemoryHotAddEnabled = hotAdd(m.Config, spec)
		// The guest OS too: set on the clone before its first power-on,
		// and on a running VM at its next power-off (not worth a restart).
		if id := GuestID(spec.GuestOS); id != "" && id != m.Config.GuestId {
			cs.GuestId = id
		}
	}
	nics, err := nicChanges(ctx, l, devices, spec.NICs)
	if err != nil {
		return err
	}
	disks, err := diskChanges(devices, spec.Disks, func(name, file string) (types.ManagedObjectReference, error) {
		ds, err := l.datastore(ctx, name)
		if err != nil {
			return types.ManagedObjectReference{}, fmt.Errorf("datastore %s: %w", name, err)
		}
		// A disk file's folder must exist on its datastore (the clone made
		// it on the first disk's only).
		if dir := path.Dir(file); strings.Contains(file, "] ") && dir != "." && !sameDatastore(devices, name) {
			err := object.NewFileManager(vm.Client()).MakeDirectory(ctx, dir, l.dc, true)
			if err != nil && !fault.Is(err, &types.FileAlreadyExists{}) {
				return types.ManagedObjectReference{}, fmt.Errorf("making %s: %w", dir, err)
			}
		}
		return ds.Reference(), nil
	})
	if err != nil {
		return err
	}
	cs.DeviceChange = append(nics, disks...)
	if spec.TPM && len(devices.SelectByType((*types.VirtualTPM)(nil))) == 0 {
		cs.DeviceChange = append(cs.DeviceChange, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd,
			Device:    &types.VirtualTPM{VirtualDevice: types.VirtualDevice{Key: -200}},
		})
	}
	addsNIC := false
	for _, c := range nics {
		addsNIC = addsNIC || c.GetVirtualDeviceConfigSpec().Operation == types.VirtualDeviceConfigSpecOperationAdd
	}
	if !addsNIC {
		if cs.ExtraConfig, err = guestInfoChanges(m, spec); err != nil {
			return fmt.Errorf("guestinfo: %w", err)
		}
	}
	if cs.NumCPUs != 0 || cs.MemoryMB != 0 || cs.Firmware != "" || cs.BootOptions != nil || len(cs.DeviceChange) > 0 || len(cs.ExtraConfig) > 0 ||
		cs.CpuHotAddEnabled != nil || cs.MemoryHotAddEnabled != nil || cs.GuestId != "" {
		if err := reconfigure("configuration", cs); err != nil {
			return err
		}
	}
	if addsNIC {
		// The added NICs' MAC addresses exist only now.
		if err := reread(); err != nil {
			return err
		}
		extra, err := guestInfoChanges(m, spec)
		if err != nil {
			return fmt.Errorf("guestinfo: %w", err)
		}
		if len(extra) > 0 {
			if err := reconfigure("guestinfo", types.VirtualMachineConfigSpec{ExtraConfig: extra}); err != nil {
				return err
			}
		}
	}
	return nil
}

// settled reads vm's configuration, power state and Tools' report once no
// task runs on it: a reconfigure or power task an interrupted call (a
// provider killed, a reconcile cancelled) left running is waited for, not
// sent again against a configuration it has not changed yet. The tasks come with the read
// (recentTask); their states cost a call only when there are any.
func settled(ctx context.Context, vm *object.VirtualMachine) (mo.VirtualMachine, error) {
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), settledProperties("recentTask"), &m); err != nil || len(m.RecentTask) == 0 {
		return m, err
	}
	tasks, err := taskStates(ctx, vm.Client(), m.RecentTask)
	if err != nil {
		return m, err
	}
	waited := false
	for _, t := range tasks {
		if inFlight(t) {
			// Its outcome, failed or not, is in the configuration read next.
			if _, err := awaitTask(ctx, object.NewTask(vm.Client(), t.Self)); ctx.Err() != nil {
				return m, err
			}
			waited = true
		}
	}
	if !waited {
		return m, nil
	}
	m = mo.VirtualMachine{}
	return m, vm.Properties(ctx, vm.Reference(), settledProperties(), &m)
}

// settledProperties are what converge reads of a VM, and more: its power
// state, and what Tools report (whether the guest consumed its bootstrap
// data).
func settledProperties(more ...string) []string {
	return append([]string{"config", "runtime.powerState", "guest.toolsRunningStatus", "guest.ipAddress"}, more...)
}

// inFlight tells that t has not ended: queued or running.
func inFlight(t mo.Task) bool {
	return t.Info.State == types.TaskInfoStateQueued || t.Info.State == types.TaskInfoStateRunning
}

// taskStates reads the states of refs; one vCenter no longer knows is
// left out (none of them runs any more).
func taskStates(ctx context.Context, c *vim25.Client, refs []types.ManagedObjectReference) ([]mo.Task, error) {
	tasks, failed, err := readTasks(ctx, c, refs, []string{"info.state"})
	if err != nil {
		return nil, fmt.Errorf("reading the tasks of the VM: %w", err)
	}
	for ref, err := range failed {
		if !fault.Is(err, &types.ManagedObjectNotFound{}) {
			return nil, fmt.Errorf("reading task %s of the VM: %w", ref, err)
		}
	}
	return tasks, nil
}

// readTasks reads props of refs in one call. One task that expired fails
// vCenter's whole read: then each is read alone, and failed holds the
// error of each one whose own read failed.
func readTasks(ctx context.Context, c *vim25.Client, refs []types.ManagedObjectReference, props []string) (tasks []mo.Task, failed map[string]error, err error) {
	pc := property.DefaultCollector(c)
	err = pc.Retrieve(ctx, refs, props, &tasks)
	if err == nil || !fault.Is(err, &types.ManagedObjectNotFound{}) {
		return tasks, nil, err
	}
	if len(refs) == 1 {
		return nil, map[string]error{refs[0].Value: err}, nil
	}
	tasks, failed = nil, map[string]error{}
	for _, ref := range refs {
		var t mo.Task
		if err := pc.RetrieveOne(ctx, ref, props, &t); err != nil {
			failed[ref.Value] = err
			continue
		}
		tasks = append(tasks, t)
	}
	return tasks, failed, nil
}

// nicChanges points the VM's NICs at the spec's networks in order, adds the
// missing ones and removes NICs the spec does not have. No NICs in the spec
// keeps the template's as they are.
func nicChanges(ctx context.Context, l *located, devices object.VirtualDeviceList, want []providers.NIC) ([]types.BaseVirtualDeviceConfigSpec, error) {
	if len(want) == 0 {
		return nil, nil
	}
	existing := devices.SelectByType((*types.VirtualEthernetCard)(nil))
	var changes []types.BaseVirtualDeviceConfigSpec
	for i, nic := range want {
		name := nic.Network
		if name == "" {
			if i < len(existing) {
				continue // the template's adapter, on the template's network
			}
			if len(existing) == 0 {
				return nil, fmt.Errorf("NIC %d names no port group and the template has no network adapter whose network it could use", i)
			}
			if name = networkName(ctx, l.c.gc.Client, existing[0].(types.BaseVirtualEthernetCard)); name == "" {
				return nil, fmt.Errorf("NIC %d names no port group and the template's first adapter's network is unknown", i)
			}
			nic.Network = name
		}
		backing, err := l.backing(ctx, nic.Network)
		if err != nil {
			return nil, fmt.Errorf("network %s: %w", nic.Network, err)
		}
		if i < len(existing) {
			card := existing[i].(types.BaseVirtualEthernetCard).GetVirtualEthernetCard()
			if sameNetwork(card.Backing, backing) {
				continue
			}
			card.Backing = backing
			changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: existing[i]})
			continue
		}
		card, err := devices.CreateEthernetCard("vmxnet3", backing)
		if err != nil {
			return nil, err
		}
		card.GetVirtualDevice().Key = int32(-100 - i)
		changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationAdd, Device: card})
	}
	for _, extra := range existing[min(len(want), len(existing)):] {
		changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationRemove, Device: extra})
	}
	return changes, nil
}

// sameNetwork tells whether two NIC backings connect to the same network.
func sameNetwork(a, b types.BaseVirtualDeviceBackingInfo) bool {
	switch x := a.(type) {
	case *types.VirtualEthernetCardNetworkBackingInfo:
		y, ok := b.(*types.VirtualEthernetCardNetworkBackingInfo)
		return ok && x.DeviceName == y.DeviceName
	case *types.VirtualEthernetCardDistributedVirtualPortBackingInfo:
		y, ok := b.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo)
		return ok && x.Port.PortgroupKey == y.Port.PortgroupKey && x.Port.SwitchUuid == y.Port.SwitchUuid
	case *types.VirtualEthernetCardOpaqueNetworkBackingInfo:
		y, ok := b.(*types.VirtualEthernetCardOpaqueNetworkBackingInfo)
		return ok && x.OpaqueNetworkId == y.OpaqueNetworkId
	}
	return false
}

// diskChanges grows the VM's disks to their sizes and adds the missing
// ones, each on its storage target with its provisioning; it
// never shrinks or removes a disk.
func diskChanges(devices object.VirtualDeviceList, disks []providers.Disk, datastore func(name, file string) (types.ManagedObjectReference, error)) ([]types.BaseVirtualDeviceConfigSpec, error) {
	existing := devices.SelectByType((*types.VirtualDisk)(nil))
	var changes []types.BaseVirtualDeviceConfigSpec
	for i, d := range disks {
		kb := d.SizeGiB * 1024 * 1024
		if i < len(existing) {
			disk := existing[i].(*types.VirtualDisk)
			if disk.CapacityInKB < kb {
				disk.CapacityInKB, disk.CapacityInBytes = kb, kb*1024
				changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: disk})
			}
			continue
		}
		controller, err := devices.FindDiskController("")
		if err != nil {
			return nil, fmt.Errorf("no disk controller for disk %d: %w", i, err)
		}
		// A disk with a storage target goes to that datastore (the clone
		// put the boot disk on the first one's); others beside the VM.
		var ds types.ManagedObjectReference
		name := diskFileName(existing, i)
		if d.Target != "" {
			name = onDatastore(name, d.Target)
			if ds, err = datastore(d.Target, name); err != nil {
				return nil, err
			}
		}
		disk := devices.CreateDisk(controller, ds, name)
		disk.CapacityInKB = kb
		if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
			provision(b, d.Provisioning)
		}
		devices = append(devices, disk)
		changes = append(changes, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd, FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: disk,
		})
	}
	return changes, nil
}

// sameDatastore tells whether the VM's first disk is on datastore name:
// the clone made the VM's folder there.
func sameDatastore(devices object.VirtualDeviceList, name string) bool {
	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) == 0 {
		return false
	}
	b, ok := disks[0].(*types.VirtualDisk).Backing.(*types.VirtualDiskFlatVer2BackingInfo)
	return ok && strings.HasPrefix(b.FileName, "["+name+"]")
}

// provision sets a flat disk backing's allocation for provisioning: thin
// (also when empty), thick (allocated, zeroed lazily) or eagerZeroed
// (allocated and scrubbed up front).
func provision(b *types.VirtualDiskFlatVer2BackingInfo, provisioning string) {
	b.ThinProvisioned = types.NewBool(provisioning == "" || provisioning == "thin")
	b.EagerlyScrub = types.NewBool(provisioning == "eagerZeroed")
}

// bootDiskLocator is the clone's relocate locator for the template's first
// disk: on datastore ds (nil: where the template's disk is) with the
// backing disk 0's provisioning asks, so the clone's boot disk is thin,
// thick or eagerly scrubbed whatever the template's is. nil when the
// template has no disk.
func bootDiskLocator(ctx context.Context, l *located, tmpl *object.VirtualMachine, ds *types.ManagedObjectReference, provisioning string) (*types.VirtualMachineRelocateSpecDiskLocator, error) {
	devices, err := l.templateDevices(ctx, tmpl)
	if err != nil {
		return nil, fmt.Errorf("devices of template %s: %w", tmpl.InventoryPath, err)
	}
	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) == 0 {
		return nil, nil
	}
	disk := disks[0].(*types.VirtualDisk)
	if ds == nil {
		if fb, ok := disk.Backing.(types.BaseVirtualDeviceFileBackingInfo); ok {
			ds = fb.GetVirtualDeviceFileBackingInfo().Datastore
		}
	}
	if ds == nil {
		return nil, fmt.Errorf("template %s: its first disk is on no datastore, so its clone's provisioning cannot be set", tmpl.InventoryPath)
	}
	b := &types.VirtualDiskFlatVer2BackingInfo{
		DiskMode:                     string(types.VirtualDiskModePersistent),
		VirtualDeviceFileBackingInfo: types.VirtualDeviceFileBackingInfo{Datastore: ds},
	}
	provision(b, provisioning)
	return &types.VirtualMachineRelocateSpecDiskLocator{DiskId: disk.Key, Datastore: *ds, DiskBackingInfo: b}, nil
}

// onDatastore is file, a "[ds] dir/name.vmdk" path (or ""), on datastore
// ds instead: the same folder and name there, "[ds]" (vCenter's choice)
// without a path.
func onDatastore(file, ds string) string {
	_, path, ok := strings.Cut(file, "] ")
	if !ok {
		return "[" + ds + "]"
	}
	return "[" + ds + "] " + path
}

// diskFileName names the file of a new disk i beside the VM's first disk
// ("[ds] vm/vm_2.vmdk"), so it cannot collide with the clone's own disk;
// "" (vCenter's choice) when the VM has no file-backed disk yet.
func diskFileName(existing object.VirtualDeviceList, i int) string {
	if len(existing) == 0 {
		return ""
	}
	backing, ok := existing[0].(*types.VirtualDisk).Backing.(*types.VirtualDiskFlatVer2BackingInfo)
	if !ok || !strings.HasSuffix(backing.FileName, ".vmdk") {
		return ""
	}
	return fmt.Sprintf("%s_%d.vmdk", strings.TrimSuffix(backing.FileName, ".vmdk"), i)
}

func clone(ctx context.Context, l *located, spec providers.MachineSpec, record providers.TaskRecorder) (*object.VirtualMachine, error) {
	tmpl, err := l.template(ctx, spec.Image)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", spec.Image, err)
	}
	pool, err := l.pool(ctx, spec.Options[machinespec.OptionResourcePool], spec.Location.Cluster)
	if err != nil {
		return nil, err
	}
	folder, err := l.folder(ctx, spec.Options[machinespec.OptionFolder])
	if err != nil {
		return nil, fmt.Errorf("folder %q: %w", spec.Options[machinespec.OptionFolder], err)
	}
	poolRef := pool.Reference()
	cs := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &poolRef},
		// The BIOS UUID is the instance UUID too: the providerID
		// (vsphere://BIOS UUID) is then known before the clone, and
		// written with the machine's finalizer (ProviderIDScheme).
		Config: &types.VirtualMachineConfigSpec{NumCPUs: spec.CPUs, MemoryMB: spec.MemoryMiB, InstanceUuid: spec.InstanceUUID, Uuid: spec.InstanceUUID},
	}
	if spec.BootTarget() != "" {
		ds, err := l.datastore(ctx, spec.BootTarget())
		if err != nil {
			return nil, fmt.Errorf("datastore %s: %w", spec.BootTarget(), err)
		}
		ref := ds.Reference()
		cs.Location.Datastore = &ref
	}
	if len(spec.Disks) > 0 {
		// Disk 0's provisioning: the clone's boot disk gets the backing
		// it asks, not the template's.
		locator, err := bootDiskLocator(ctx, l, tmpl, cs.Location.Datastore, spec.Disks[0].Provisioning)
		if err != nil {
			return nil, err
		}
		if locator != nil {
			cs.Location.Disk = []types.VirtualMachineRelocateSpecDiskLocator{*locator}
		}
	}
	if custom := customization(spec); custom != nil {
		// Customization maps one adapter per NIC of the clone: the NICs
		// the template lacks (or has on other networks) are made by the
		// clone itself, not by the reconfigure after it, or vCenter fails
		// the clone with NicSettingMismatch.
		devices, err := tmpl.Device(ctx)
		if err != nil {
			return nil, fmt.Errorf("devices of template %s: %w", spec.Image, err)
		}
		if cs.Config.DeviceChange, err = nicChanges(ctx, l, devices, spec.NICs); err != nil {
			return nil, err
		}
		cs.Customization = custom
	}
	task, err := tmpl.Clone(ctx, folder, spec.Name, cs)
	if err != nil {
		return nil, fmt.Errorf("cloning %s: %w", spec.Image, err)
	}
	info, cloneErr := waitResult(ctx, task, record)
	if cloneErr == nil {
		// The clone's result is the VM: no search for it.
		if ref, ok := info.Result.(types.ManagedObjectReference); ok && spec.InstanceUUID != "" {
			vm := object.NewVirtualMachine(l.c.gc.Client, ref)
			l.remember(spec.InstanceUUID, vm)
			return vm, nil
		}
	}
	if cloneErr != nil && !fault.Is(cloneErr, &types.DuplicateName{}) {
		return nil, fmt.Errorf("cloning %s into %s: %w", spec.Image, spec.Name, cloneErr)
	}
	vm, err := findMachine(ctx, l, spec)
	if err != nil {
		return nil, err
	}
	if vm == nil && cloneErr != nil {
		// The name is taken by a VM that is not this machine's.
		return nil, fmt.Errorf("cloning %s into %s: a VM of that name exists with another instance UUID: %w", spec.Image, spec.Name, cloneErr)
	}
	if vm == nil {
		return nil, fmt.Errorf("clone %s not found after cloning", spec.Name)
	}
	return vm, nil
}

func powerState(s types.VirtualMachinePowerState) infrav1.PowerState {
	switch s {
	case types.VirtualMachinePowerStatePoweredOn:
		return infrav1.PowerStatePoweredOn
	case types.VirtualMachinePowerStateSuspended:
		return infrav1.PowerStateSuspended
	default:
		return infrav1.PowerStatePoweredOff
	}
}

// power drives vm to spec.PowerState as package power decides, from seen
// (the state just read, or "" to read it). Power tasks are not recorded:
// they are safe to repeat, as the state is read again first.
func power(ctx context.Context, vm *object.VirtualMachine, spec providers.MachineSpec, seen infrav1.PowerState) error {
	grace := spec.PowerOffGrace
	if grace <= 0 {
		grace = powerpkg.DefaultGrace
	}
	return powerpkg.Drive(ctx, vmPower{vm: vm, seen: &seen}, powerpkg.Request{Desired: spec.PowerState, Mode: spec.PowerOffMode, Grace: grace,
		SoftRequested: spec.SoftPowerOffTime, Record: spec.RecordSoftPowerOff})
}

// vmPower is a vSphere VM's power primitives. Suspended is vSphere's
// suspend: the memory written to the VM's directory, resumed by PowerOn.
// seen, when set, is the state known without asking vCenter: read by the
// caller just before, or the one a power task that succeeded reached.
type vmPower struct {
	vm   *object.VirtualMachine
	seen *infrav1.PowerState
}

func (p vmPower) Observe(ctx context.Context) (infrav1.PowerState, error) {
	if p.seen != nil && *p.seen != "" {
		return *p.seen, nil
	}
	s, err := p.vm.PowerState(ctx)
	return powerState(s), err
}

func (p vmPower) Start(ctx context.Context) error {
	return p.task(ctx, p.vm.PowerOn, infrav1.PowerStatePoweredOn)
}

func (p vmPower) Resume(ctx context.Context) error {
	return p.task(ctx, p.vm.PowerOn, infrav1.PowerStatePoweredOn)
}

func (p vmPower) Suspend(ctx context.Context) error {
	return p.task(ctx, p.vm.Suspend, infrav1.PowerStateSuspended)
}

func (p vmPower) HardOff(ctx context.Context) error {
	return p.task(ctx, p.vm.PowerOff, infrav1.PowerStatePoweredOff)
}

// SoftOff asks VMware Tools to shut the guest down; it returns at once
// (vCenter runs no task for it). Without Tools running vCenter refuses
// the request (ToolsUnavailable): the guest cannot be asked.
func (p vmPower) SoftOff(ctx context.Context) error {
	p.know("") // the guest goes off in its own time
	var m mo.VirtualMachine
	if err := p.vm.Properties(ctx, p.vm.Reference(), []string{"guest.toolsRunningStatus"}, &m); err != nil {
		return err
	}
	if m.Guest == nil || m.Guest.ToolsRunningStatus != string(types.VirtualMachineToolsRunningStatusGuestToolsRunning) {
		return powerpkg.ErrSoftUnavailable
	}
	return p.vm.ShutdownGuest(ctx)
}

// task runs a power task; the state it reaches (reached) is known after
// it succeeds, and nothing is after it fails.
func (p vmPower) task(ctx context.Context, do func(context.Context) (*object.Task, error), reached infrav1.PowerState) error {
	p.know("")
	task, err := do(ctx)
	if err == nil {
		_, err = awaitTask(ctx, task)
	}
	if err == nil {
		p.know(reached)
	}
	return err
}

// know records s as the VM's power state ("" unknown).
func (p vmPower) know(s infrav1.PowerState) {
	if p.seen != nil {
		*p.seen = s
	}
}

// hardOff powers vm off when it is not off: a VM about to be destroyed
// needs no guest's say.
func hardOff(ctx context.Context, vm *object.VirtualMachine) error {
	s, err := vm.PowerState(ctx)
	if err != nil || s == types.VirtualMachinePowerStatePoweredOff {
		return err
	}
	return vmPower{vm: vm}.HardOff(ctx)
}

// DeleteMachine powers the VM off and destroys it; a VM already gone is
// fine.
func (c *Client) DeleteMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) error {
	err := c.deleteMachine(ctx, spec, record)
	return c.refs.forgetIfGone(err)
}

func (c *Client) deleteMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) error {
	l, err := c.locate(ctx, spec.Location.Datacenter)
	var nf *find.NotFoundError
	if errors.As(err, &nf) && spec.InstanceUUID != "" {
		// No such datacenter (a VM that was never created, or one whose
		// datacenter went): the instance UUID is searched across vCenter,
		// so a delete never retries a lookup that cannot succeed.
		l, err = &located{c: c, f: find.NewFinder(c.gc.Client, false)}, nil
	}
	if err != nil {
		return err
	}
	if err := c.resume(ctx, spec.TaskRef); err != nil {
		return err
	}
	vm, err := findMachine(ctx, l, spec)
	if err == nil && vm == nil && l.dc != nil && spec.InstanceUUID != "" {
		// Not in the datacenter the spec names: the VM is its instance
		// UUID, wherever it was built (a spec edited since), and a delete
		// that did not find it would let its machine go with it running.
		l = &located{c: c, f: find.NewFinder(c.gc.Client, false)}
		vm, err = findMachine(ctx, l, spec)
	}
	if err != nil || vm == nil {
		return err
	}
	if err := hardOff(ctx, vm); err != nil {
		return fmt.Errorf("powering off %s: %w", spec.Name, err)
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		return err
	}
	if err := wait(ctx, task, record); err != nil {
		return err
	}
	if spec.InstanceUUID != "" {
		l.forgetMachine(spec.InstanceUUID)
	}
	return nil
}

// needsPowerOff tells whether cs changes CPUs or memory in a way vCenter
// does not apply to a running VM: anything but growing with hot add on.
func needsPowerOff(cfg *types.VirtualMachineConfigInfo, cs types.VirtualMachineConfigSpec) bool {
	if cs.NumCPUs != 0 && !(cs.NumCPUs > cfg.Hardware.NumCPU && ptr.Deref(cfg.CpuHotAddEnabled, false)) {
		return true
	}
	return cs.MemoryMB != 0 && !(cs.MemoryMB > int64(cfg.Hardware.MemoryMB) && ptr.Deref(cfg.MemoryHotAddEnabled, false))
}

// hotAdd are the CPU and memory hot-add flags to change (nil: as they are).
func hotAdd(cfg *types.VirtualMachineConfigInfo, spec providers.MachineSpec) (cpu, memory *bool) {
	change := func(have *bool, option string) *bool {
		want := spec.Options[option] == "true"
		if ptr.Deref(have, false) == want {
			return nil
		}
		return &want
	}
	return change(cfg.CpuHotAddEnabled, machinespec.OptionCPUHotAdd), change(cfg.MemoryHotAddEnabled, machinespec.OptionMemoryHotAdd)
}

// customization applies static addresses (and the host name) at first boot
// through vCenter guest customization; nil when every NIC uses DHCP, or
// when there is user data: cloud-init then configures the network from
// guestinfo.metadata, and the two must not both try.
func customization(spec providers.MachineSpec) *types.CustomizationSpec {
	if spec.UserData != nil {
		return nil
	}
	static := false
	for _, n := range spec.NICs {
		static = static || n.Static != nil
	}
	if !static {
		return nil
	}
	cs := &types.CustomizationSpec{
		Identity: &types.CustomizationLinuxPrep{
			HostName: &types.CustomizationFixedName{Name: guestHostName(spec)},
			Domain:   "local",
		},
	}
	for _, n := range spec.NICs {
		adapter := types.CustomizationIPSettings{Ip: &types.CustomizationDhcpIpGenerator{}}
		if s := n.Static; s != nil {
			adapter.Ip = &types.CustomizationFixedIp{IpAddress: s.Address}
			adapter.SubnetMask = netmask(s.Prefix)
			if s.Gateway != "" {
				adapter.Gateway = []string{s.Gateway}
			}
			cs.GlobalIPSettings.DnsServerList = append(cs.GlobalIPSettings.DnsServerList, s.Nameservers...)
		}
		cs.NicSettingMap = append(cs.NicSettingMap, types.CustomizationAdapterMapping{Adapter: adapter})
	}
	return cs
}

// guestHostName is the spec's host name, or one made from the VM name.
func guestHostName(spec providers.MachineSpec) string {
	if spec.HostName != "" {
		return spec.HostName
	}
	return providers.HostName(spec.Name)
}

func netmask(prefix int32) string {
	m := net.CIDRMask(int(prefix), 32)
	if m == nil {
		return ""
	}
	return net.IP(m).String()
}
