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
	"strings"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/providers"
)

var _ providers.Machines = &Client{}

func (c *Client) finder(ctx context.Context, datacenter string) (*find.Finder, *object.Datacenter, error) {
	f := find.NewFinder(c.gc.Client, false)
	dc, err := f.Datacenter(ctx, datacenter)
	if err != nil {
		return nil, nil, fmt.Errorf("datacenter %s: %w", datacenter, err)
	}
	f.SetDatacenter(dc)
	return f, dc, nil
}

// lookup finds the VM by name, or returns nil.
func lookup(ctx context.Context, f *find.Finder, name string) (*object.VirtualMachine, error) {
	vm, err := f.VirtualMachine(ctx, name)
	var nf *find.NotFoundError
	if errors.As(err, &nf) {
		return nil, nil
	}
	return vm, err
}

// EnsureMachine clones the template when the VM does not exist yet and
// drives its power state. A second clone of the same name fails with
// DuplicateName in vCenter, which is why the name identifies the VM: a
// provider restarted mid-clone finds the clone instead of making another.
func (c *Client) EnsureMachine(ctx context.Context, spec providers.MachineSpec) (providers.MachineStatus, error) {
	f, _, err := c.finder(ctx, spec.Datacenter)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	vm, err := lookup(ctx, f, spec.Name)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	if vm == nil {
		if vm, err = c.clone(ctx, f, spec); err != nil {
			return providers.MachineStatus{}, err
		}
	}
	if err := disks(ctx, vm, spec.DiskSizesGiB); err != nil {
		return providers.MachineStatus{}, fmt.Errorf("disks of %s: %w", spec.Name, err)
	}
	if err := power(ctx, vm, spec.PowerState); err != nil {
		return providers.MachineStatus{}, err
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config", "runtime.powerState", "guest"}, &m); err != nil {
		return providers.MachineStatus{}, fmt.Errorf("reading %s: %w", spec.Name, err)
	}
	st := providers.MachineStatus{PowerState: powerState(m.Runtime.PowerState)}
	if m.Config != nil {
		st.BIOSUUID, st.InstanceUUID = m.Config.Uuid, m.Config.InstanceUuid
		st.CPUs, st.MemoryMiB = m.Config.Hardware.NumCPU, int64(m.Config.Hardware.MemoryMB)
	}
	if m.Guest != nil {
		st.IPAddress = m.Guest.IpAddress
	}
	devices, err := vm.Device(ctx)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	for _, d := range devices.SelectByType((*types.VirtualDisk)(nil)) {
		st.DiskSizesGiB = append(st.DiskSizesGiB, d.(*types.VirtualDisk).CapacityInKB/(1024*1024))
	}
	return st, nil
}

// disks grows the VM's disks to sizes and adds the missing ones, in one
// reconfigure; it never shrinks or removes a disk.
func disks(ctx context.Context, vm *object.VirtualMachine, sizes []int64) error {
	if len(sizes) == 0 {
		return nil
	}
	devices, err := vm.Device(ctx)
	if err != nil {
		return err
	}
	existing := devices.SelectByType((*types.VirtualDisk)(nil))
	var changes []types.BaseVirtualDeviceConfigSpec
	for i, gib := range sizes {
		kb := gib * 1024 * 1024
		if i < len(existing) {
			disk := existing[i].(*types.VirtualDisk)
			if disk.CapacityInKB < kb {
				disk.CapacityInKB = kb
				changes = append(changes, &types.VirtualDeviceConfigSpec{Operation: types.VirtualDeviceConfigSpecOperationEdit, Device: disk})
			}
			continue
		}
		controller, err := devices.FindDiskController("")
		if err != nil {
			return fmt.Errorf("no disk controller for disk %d: %w", i, err)
		}
		disk := devices.CreateDisk(controller, types.ManagedObjectReference{}, "")
		disk.CapacityInKB = kb
		devices = append(devices, disk)
		changes = append(changes, &types.VirtualDeviceConfigSpec{
			Operation: types.VirtualDeviceConfigSpecOperationAdd, FileOperation: types.VirtualDeviceConfigSpecFileOperationCreate, Device: disk,
		})
	}
	if len(changes) == 0 {
		return nil
	}
	task, err := vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{DeviceChange: changes})
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

func (c *Client) clone(ctx context.Context, f *find.Finder, spec providers.MachineSpec) (*object.VirtualMachine, error) {
	tmpl, err := f.VirtualMachine(ctx, spec.Template)
	if err != nil {
		return nil, fmt.Errorf("template %s: %w", spec.Template, err)
	}
	cluster, err := f.ClusterComputeResource(ctx, spec.Cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster %s: %w", spec.Cluster, err)
	}
	pool, err := cluster.ResourcePool(ctx)
	if err != nil {
		return nil, err
	}
	folder, err := f.DefaultFolder(ctx)
	if err != nil {
		return nil, err
	}
	poolRef := pool.Reference()
	cs := types.VirtualMachineCloneSpec{
		Location: types.VirtualMachineRelocateSpec{Pool: &poolRef},
		Config:   &types.VirtualMachineConfigSpec{NumCPUs: spec.CPUs, MemoryMB: spec.MemoryMiB},
	}
	if spec.Datastore != "" {
		ds, err := f.Datastore(ctx, spec.Datastore)
		if err != nil {
			return nil, fmt.Errorf("datastore %s: %w", spec.Datastore, err)
		}
		ref := ds.Reference()
		cs.Location.Datastore = &ref
	}
	if custom := customization(spec); custom != nil {
		cs.Customization = custom
	}
	task, err := tmpl.Clone(ctx, folder, spec.Name, cs)
	if err != nil {
		return nil, fmt.Errorf("cloning %s: %w", spec.Template, err)
	}
	if err := task.Wait(ctx); err != nil {
		if !isDuplicate(err) {
			return nil, fmt.Errorf("cloning %s into %s: %w", spec.Template, spec.Name, err)
		}
	}
	vm, err := lookup(ctx, f, spec.Name)
	if err == nil && vm == nil {
		err = fmt.Errorf("clone %s not found after cloning", spec.Name)
	}
	return vm, err
}

func isDuplicate(err error) bool {
	var fault types.HasFault
	if errors.As(err, &fault) {
		_, ok := fault.Fault().(*types.DuplicateName)
		return ok
	}
	return false
}

func powerState(s types.VirtualMachinePowerState) string {
	switch s {
	case types.VirtualMachinePowerStatePoweredOn:
		return "PoweredOn"
	case types.VirtualMachinePowerStateSuspended:
		return "Suspended"
	default:
		return "PoweredOff"
	}
}

func power(ctx context.Context, vm *object.VirtualMachine, want string) error {
	cur, err := vm.PowerState(ctx)
	if err != nil {
		return err
	}
	if powerState(cur) == want {
		return nil
	}
	var task *object.Task
	switch want {
	case "PoweredOn":
		task, err = vm.PowerOn(ctx)
	case "PoweredOff":
		task, err = vm.PowerOff(ctx)
	case "Suspended":
		if cur != types.VirtualMachinePowerStatePoweredOn {
			if t, err := vm.PowerOn(ctx); err != nil || t.Wait(ctx) != nil {
				return fmt.Errorf("powering on before suspending: %v", err)
			}
		}
		task, err = vm.Suspend(ctx)
	default:
		return fmt.Errorf("unknown power state %q", want)
	}
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// DeleteMachine powers the VM off and destroys it.
func (c *Client) DeleteMachine(ctx context.Context, datacenter, name string) error {
	f, _, err := c.finder(ctx, datacenter)
	if err != nil {
		return err
	}
	vm, err := lookup(ctx, f, name)
	if err != nil || vm == nil {
		return err
	}
	if err := power(ctx, vm, "PoweredOff"); err != nil {
		return fmt.Errorf("powering off %s: %w", name, err)
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}

// customization applies static addresses (and the host name) at first boot
// through vCenter guest customization; nil when every NIC uses DHCP.
func customization(spec providers.MachineSpec) *types.CustomizationSpec {
	static := false
	for _, n := range spec.NICs {
		static = static || n.Static != nil
	}
	if !static {
		return nil
	}
	cs := &types.CustomizationSpec{
		Identity: &types.CustomizationLinuxPrep{
			HostName: &types.CustomizationFixedName{Name: hostName(spec.Name)},
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

// hostName is a valid host name (at most 63 characters) for a VM name.
func hostName(name string) string {
	if len(name) > 63 {
		name = name[:63]
	}
	return strings.TrimRight(name, "-")
}

func netmask(prefix int32) string {
	m := net.CIDRMask(int(prefix), 32)
	if m == nil {
		return ""
	}
	return net.IP(m).String()
}
