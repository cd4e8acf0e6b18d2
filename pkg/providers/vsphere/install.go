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
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
)

// An installer image (format iso) is built in each datacenter as the
// disk import is, the template named NAME its only durable record:
//   - the ISO is uploaded to the image datastore (target.Storage) as
//     [ds] banlieue-images/NAME.iso (an HTTP PUT to the datastore
//     folder);
//   - a VM NAME is created in the datacenter's VM folder, in the root
//     pool of its first cluster that sees the datastore, with a blank
//     thin disk and the ISO on a CD-ROM connected at power-on, booting
//     the disk then the CD-ROM: a blank disk falls through to the
//     installer, an installed one boots itself;
//   - deferred (no Install): never powered on, marked a template with the
//     image's firmware; the ISO stays, each clone installs itself from it
//     at first boot;
//   - immediate: a NoCloud seed with the image's cloudConfigs uploaded as
//     banlieue-images/NAME-seed.iso on a second CD-ROM (what the installer
//     reads; machines get guestinfo, a build VM a seed), the VM powered
//     on and waited for until its guest powers it off (Install.Timeout,
//     then ErrInstallTimedOut), both CD-ROMs removed, the VM marked a
//     template and both ISOs deleted.
// A VM NAME that is not a template (a build interrupted), and the ISOs,
// are removed before a build starts and when it fails.

// imagesDir is the datastore folder installer and seed ISOs are kept in.
const imagesDir = "banlieue-images"

// installDiskGiB is the blank disk's size when the install names none
// (deferred); clones grow it to their class's.
const installDiskGiB = 8

// installPoll is how often a build VM's power state is read while its
// guest installs.
var installPoll = time.Second

// installerISO and seedISO are the datastore paths (under the datastore's
// root) of t's installer and of its build VM's seed.
func installerISO(t providers.ImageTarget) string { return imagesDir + "/" + t.Name + ".iso" }
func seedISO(t providers.ImageTarget) string      { return imagesDir + "/" + t.Name + "-seed.iso" }

// buildInstaller builds t's template in datacenter from the installer body.
func (c *Client) buildInstaller(ctx context.Context, datacenter string, t providers.ImageTarget, body io.Reader) error {
	l, err := c.locate(ctx, datacenter)
	if err != nil {
		return err
	}
	ds, err := l.datastore(ctx, t.Storage)
	if err != nil {
		return fmt.Errorf("datastore %s (the Provider's first storage class) in %s: %w", t.Storage, datacenter, err)
	}
	pool, err := l.importPool(ctx, ds)
	if err != nil {
		return err
	}
	folder, err := l.folder(ctx, "")
	if err != nil {
		return fmt.Errorf("the VM folder of %s: %w", datacenter, err)
	}
	if err := c.uploadISO(ctx, l, ds, installerISO(t), body, t.Size); err != nil {
		return err
	}
	in := t.Install
	isos := []string{ds.Path(installerISO(t))}
	if in != nil {
		sum := sha256.Sum256([]byte("banlieue-image-build/" + t.Name))
		instance, _ := uuid.FromBytes(sum[:16])
		seed, err := cloudinit.NoCloudSeed(providers.MachineSpec{Name: "banlieue-build-" + t.Name, HostName: "banlieue-build",
			InstanceUUID: instance.String(), UserData: in.UserData}, nil)
		if err != nil {
			return err
		}
		if err := c.uploadISO(ctx, l, ds, seedISO(t), bytes.NewReader(seed), int64(len(seed))); err != nil {
			return err
		}
		isos = append(isos, ds.Path(seedISO(t)))
	}
	vm, err := c.createInstallVM(ctx, folder, pool, ds, t)
	if err != nil {
		return err
	}
	if err := attachInstaller(ctx, vm, isos); err != nil {
		return fmt.Errorf("attaching the installer to %s: %w", t.Name, err)
	}
	if in == nil {
		if err := vm.MarkAsTemplate(ctx); err != nil {
			return fmt.Errorf("marking %s a template: %w", t.Name, err)
		}
		return nil
	}
	task, err := vm.PowerOn(ctx)
	if err == nil {
		_, err = awaitTask(ctx, task)
	}
	if err != nil {
		return fmt.Errorf("powering on the build VM %s: %w", t.Name, err)
	}
	if in.Installing != nil {
		in.Installing()
	}
	if err := awaitPoweredOff(ctx, vm, in.Timeout); err != nil {
		return err
	}
	if err := detachInstaller(ctx, vm); err != nil {
		return fmt.Errorf("detaching the installer and seed from %s: %w", t.Name, err)
	}
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return fmt.Errorf("marking %s a template: %w", t.Name, err)
	}
	// The template holds the installed disk: the ISOs go.
	return c.deleteInstallerISOs(ctx, l, ds, t)
}

// uploadISO PUTs body (size bytes, -1 unknown) to the datastore path file.
func (c *Client) uploadISO(ctx context.Context, l *located, ds *object.Datastore, file string, body io.Reader, size int64) error {
	// vCenter's datastore PUT needs the folder to exist.
	err := object.NewFileManager(c.gc.Client).MakeDirectory(ctx, ds.Path(imagesDir), l.dc, true)
	if err != nil && !fault.Is(err, &types.FileAlreadyExists{}) {
		return fmt.Errorf("creating %s: %w", ds.Path(imagesDir), err)
	}
	up := soap.DefaultUpload
	up.ContentLength = size
	if err := ds.Upload(ctx, body, file, &up); err != nil {
		return fmt.Errorf("uploading %s: %w", ds.Path(file), err)
	}
	return nil
}

// createInstallVM creates the VM t.Name in folder and pool: one CPU,
// 1 GiB of memory, the template's firmware (a deferred template's too:
// its clones boot the installer with it), a blank thin disk on ds.
func (c *Client) createInstallVM(ctx context.Context, folder *object.Folder, pool *object.ResourcePool, ds *object.Datastore, t providers.ImageTarget) (*object.VirtualMachine, error) {
	size := int64(installDiskGiB)
	if t.Install != nil && t.Install.DiskSizeGiB > 0 {
		size = t.Install.DiskSizeGiB
	}
	fw := t.Firmware
	var devices object.VirtualDeviceList
	scsi, err := devices.CreateSCSIController("pvscsi")
	if err != nil {
		return nil, err
	}
	devices = append(devices, scsi)
	disk := devices.CreateDisk(scsi.(types.BaseVirtualController), ds.Reference(), ds.Path(t.Name+"/"+t.Name+".vmdk"))
	disk.CapacityInKB = size << 20
	disk.CapacityInBytes = size << 30
	devices = append(devices, disk)
	changes, err := devices.ConfigSpec(types.VirtualDeviceConfigSpecOperationAdd)
	if err != nil {
		return nil, err
	}
	for _, ch := range changes {
		if ch.GetVirtualDeviceConfigSpec().Device == disk {
			ch.GetVirtualDeviceConfigSpec().FileOperation = types.VirtualDeviceConfigSpecFileOperationCreate
		}
	}
	spec := types.VirtualMachineConfigSpec{
		Name:         t.Name,
		GuestId:      "otherLinux64Guest",
		NumCPUs:      1,
		MemoryMB:     1024,
		Files:        &types.VirtualMachineFileInfo{VmPathName: ds.Path("")},
		DeviceChange: changes,
	}
	switch fw {
	case "efi", "efi-secure":
		spec.Firmware = string(types.GuestOsDescriptorFirmwareTypeEfi)
		if fw == "efi-secure" {
			spec.BootOptions = &types.VirtualMachineBootOptions{EfiSecureBootEnabled: types.NewBool(true)}
		}
	default:
		spec.Firmware = string(types.GuestOsDescriptorFirmwareTypeBios)
	}
	task, err := folder.CreateVM(ctx, spec, pool, nil)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", t.Name, err)
	}
	info, err := awaitTask(ctx, task)
	if err != nil {
		return nil, fmt.Errorf("creating %s: %w", t.Name, err)
	}
	ref, ok := info.Result.(types.ManagedObjectReference)
	if !ok {
		return nil, fmt.Errorf("creating %s: the task's result is %T, not the VM", t.Name, info.Result)
	}
	return object.NewVirtualMachine(c.gc.Client, ref), nil
}

// attachInstaller adds a CD-ROM (connected at power-on) for each ISO, on
// the VM's IDE controllers, and boots the disk then the first CD-ROM.
func attachInstaller(ctx context.Context, vm *object.VirtualMachine, isos []string) error {
	devices, err := vm.Device(ctx)
	if err != nil {
		return err
	}
	var add []types.BaseVirtualDevice
	for _, iso := range isos {
		ide, err := devices.FindIDEController("")
		if err != nil {
			return err
		}
		cd, err := devices.CreateCdrom(ide)
		if err != nil {
			return err
		}
		devices.InsertIso(cd, iso)
		devices = append(devices, cd)
		add = append(add, cd)
	}
	if err := vm.AddDevice(ctx, add...); err != nil {
		return err
	}
	if devices, err = vm.Device(ctx); err != nil {
		return err
	}
	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) == 0 {
		return fmt.Errorf("%s has no disk", vm.Reference().Value)
	}
	order := []types.BaseVirtualMachineBootOptionsBootableDevice{
		&types.VirtualMachineBootOptionsBootableDiskDevice{DeviceKey: disks[0].GetVirtualDevice().Key},
		&types.VirtualMachineBootOptionsBootableCdromDevice{},
	}
	return setBootOrder(ctx, vm, order)
}

// detachInstaller removes the VM's CD-ROMs and boots its disk only.
func detachInstaller(ctx context.Context, vm *object.VirtualMachine) error {
	devices, err := vm.Device(ctx)
	if err != nil {
		return err
	}
	if cds := devices.SelectByType((*types.VirtualCdrom)(nil)); len(cds) > 0 {
		if err := vm.RemoveDevice(ctx, false, cds...); err != nil {
			return err
		}
	}
	disks := devices.SelectByType((*types.VirtualDisk)(nil))
	if len(disks) == 0 {
		return nil
	}
	order := []types.BaseVirtualMachineBootOptionsBootableDevice{
		&types.VirtualMachineBootOptionsBootableDiskDevice{DeviceKey: disks[0].GetVirtualDevice().Key},
	}
	return setBootOrder(ctx, vm, order)
}

// setBootOrder sets the VM's boot order, keeping its secure boot: a
// VirtualMachineBootOptions replaces the whole of the VM's on vcsim, and
// what vCenter does with a field left unset is not promised, so an
// efi-secure template would lose secure boot to its boot order.
func setBootOrder(ctx context.Context, vm *object.VirtualMachine, order []types.BaseVirtualMachineBootOptionsBootableDevice) error {
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config.bootOptions"}, &m); err != nil {
		return err
	}
	opts := &types.VirtualMachineBootOptions{BootOrder: order}
	if m.Config != nil && m.Config.BootOptions != nil {
		opts.EfiSecureBootEnabled = m.Config.BootOptions.EfiSecureBootEnabled
	}
	return reconfigureVM(ctx, vm, types.VirtualMachineConfigSpec{BootOptions: opts})
}

func reconfigureVM(ctx context.Context, vm *object.VirtualMachine, spec types.VirtualMachineConfigSpec) error {
	task, err := vm.Reconfigure(ctx, spec)
	if err == nil {
		_, err = awaitTask(ctx, task)
	}
	return err
}

// awaitPoweredOff waits for the build VM's guest to power itself off.
func awaitPoweredOff(ctx context.Context, vm *object.VirtualMachine, timeout time.Duration) error {
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(installPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w (%s)", providers.ErrInstallTimedOut, timeout)
		case <-tick.C:
		}
		var m mo.VirtualMachine
		call, cancel := context.WithTimeout(ctx, callTimeout)
		err := vm.Properties(call, vm.Reference(), []string{"runtime.powerState"}, &m)
		cancel()
		if err != nil {
			return fmt.Errorf("reading the build VM's power state: %w", err)
		}
		if m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOff {
			return nil
		}
	}
}

// deleteInstallerISOs removes t's installer and seed ISOs from ds; none
// is fine.
func (c *Client) deleteInstallerISOs(ctx context.Context, l *located, ds *object.Datastore, t providers.ImageTarget) error {
	fm := ds.NewFileManager(l.dc, false)
	for _, file := range []string{installerISO(t), seedISO(t)} {
		if err := fm.DeleteFile(ctx, file); err != nil && !fault.Is(err, &types.FileNotFound{}) {
			return fmt.Errorf("deleting %s: %w", ds.Path(file), err)
		}
	}
	return nil
}
