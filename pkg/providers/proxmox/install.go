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
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
)

// An installer image (format iso) is built on each node as the disk
// import is, the template named NAME its only durable record:
//   - the ISO is uploaded as iso content, NAME.iso, to the node's ISO
//     storage (where the machines' cloud-init seeds go);
//   - a VM NAME is created with a blank boot disk on the image storage
//     and the ISO as a CD-ROM on ide0 (ide2 is where a machine's seed
//     goes), booting the disk then the CD-ROM: a blank disk falls
//     through to the installer, an installed one boots itself.
//   - deferred (no Install): never powered on, converted to the template
//     with the image's firmware (bios, or ovmf and an EFI disk);
//     the ISO stays, each clone installs itself from it at first boot.
//   - immediate: a NoCloud seed with the image's cloudConfigs uploaded
//     as NAME-seed.iso and attached on ide2, the VM started and waited
//     for until its guest powers it off (Install.Timeout, then
//     ErrInstallTimedOut), both CD-ROMs detached, the VM converted to
//     the template and both ISOs deleted.
// A VM NAME that is not a template (a build interrupted), and the ISOs,
// are removed before a build starts and when it fails.

// installDiskGiB is the blank boot disk's size when the install names
// none; clones grow it to their class's.
const installDiskGiB = 8

// installPoll is how often a build VM's status is read while its guest
// installs.
const installPoll = time.Second

// installerISO and seedISO are the file names of t's installer and of
// its build VM's seed on the ISO storage.
func installerISO(t providers.ImageTarget) string { return t.Name + ".iso" }
func seedISO(t providers.ImageTarget) string      { return t.Name + "-seed.iso" }

// buildInstaller builds t's template on node from the installer body.
func (c *Client) buildInstaller(ctx context.Context, node string, t providers.ImageTarget, body io.Reader) error {
	store, err := c.isoStorage(ctx, node)
	if err != nil {
		return err
	}
	if err := c.uploadISO(ctx, node, store, installerISO(t), ctxReader{ctx, body}, t.Size); err != nil {
		return err
	}
	in := t.Install
	size := int64(installDiskGiB)
	if in != nil && in.DiskSizeGiB > 0 {
		size = in.DiskSizeGiB
	}
	opts := []proxmox.VirtualMachineOption{
		{Name: "scsihw", Value: "virtio-scsi-pci"},
		{Name: "scsi0", Value: fmt.Sprintf("%s:%d", t.Storage, size)},
		{Name: "ide0", Value: store + ":iso/" + installerISO(t) + ",media=cdrom"},
		{Name: "boot", Value: "order=scsi0;ide0"},
		{Name: "agent", Value: "1"},
	}
	// The template's firmware, deferred too: each clone boots the
	// installer with what the template carries.
	switch t.Firmware {
	case "efi", "efi-secure":
		keys := map[bool]string{true: "1", false: "0"}[t.Firmware == "efi-secure"]
		opts = append(opts, proxmox.VirtualMachineOption{Name: "bios", Value: "ovmf"},
			proxmox.VirtualMachineOption{Name: "efidisk0", Value: t.Storage + ":1,efitype=4m,pre-enrolled-keys=" + keys})
	case "bios":
		opts = append(opts, proxmox.VirtualMachineOption{Name: "bios", Value: "seabios"})
	}
	if in == nil {
		id, err := c.createImportVM(ctx, node, t, opts...)
		if err != nil {
			return err
		}
		return c.convertToTemplate(ctx, node, id, t)
	}
	sum := sha256.Sum256([]byte("banlieue-image-build/" + t.Name))
	instance, _ := uuid.FromBytes(sum[:16])
	seed, err := cloudinit.NoCloudSeed(providers.MachineSpec{Name: "banlieue-build-" + t.Name, HostName: "banlieue-build",
		InstanceUUID: instance.String(), UserData: in.UserData}, nil)
	if err != nil {
		return err
	}
	if err := c.uploadISO(ctx, node, store, seedISO(t), bytes.NewReader(seed), int64(len(seed))); err != nil {
		return err
	}
	opts = append(opts, proxmox.VirtualMachineOption{Name: "ide2", Value: store + ":iso/" + seedISO(t) + ",media=cdrom"})
	id, err := c.createImportVM(ctx, node, t, opts...)
	if err != nil {
		return err
	}
	vm, err := c.api.NodeRef(node).VirtualMachine(ctx, id)
	if err != nil {
		return fmt.Errorf("reading the build VM %d (%s) on %s: %w", id, t.Name, node, err)
	}
	task, err := vm.Start(ctx)
	if err == nil {
		err = c.await(ctx, task)
	}
	if err != nil {
		return fmt.Errorf("starting the build VM %d (%s) on %s: %w", id, t.Name, node, err)
	}
	if in.Installing != nil {
		in.Installing()
	}
	if err := c.awaitStopped(ctx, node, id, in.Timeout); err != nil {
		return err
	}
	if vm, err = c.api.NodeRef(node).VirtualMachine(ctx, id); err != nil {
		return fmt.Errorf("reading the build VM %d (%s) on %s: %w", id, t.Name, node, err)
	}
	task, err = vm.Config(ctx, proxmox.VirtualMachineOption{Name: "delete", Value: "ide0,ide2"},
		proxmox.VirtualMachineOption{Name: "boot", Value: "order=scsi0"})
	if err == nil {
		err = c.await(ctx, task)
	}
	if err != nil {
		return fmt.Errorf("detaching the installer and seed from VM %d (%s) on %s: %w", id, t.Name, node, err)
	}
	if err := c.convertToTemplate(ctx, node, id, t); err != nil {
		return err
	}
	// The template holds the installed disk: the ISOs go.
	return c.deleteInstallerISOs(ctx, node, t)
}

// awaitStopped waits for the build VM's guest to power itself off.
func (c *Client) awaitStopped(ctx context.Context, node string, id int, timeout time.Duration) error {
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
		vm, err := c.api.NodeRef(node).VirtualMachine(ctx, id)
		if err != nil {
			return fmt.Errorf("reading the build VM %d on %s: %w", id, node, err)
		}
		if vm.Status == proxmox.StatusVirtualMachineStopped {
			return nil
		}
	}
}

// uploadISO uploads body (size bytes) as iso content named file to store
// on node.
func (c *Client) uploadISO(ctx context.Context, node, store, file string, body io.Reader, size int64) error {
	var upid proxmox.UPID
	path := fmt.Sprintf("/nodes/%s/storage/%s/upload", node, store)
	// go-proxmox's upload takes no context: the body ends it (ctxReader).
	if err := c.upload.UploadReader(path, map[string]string{"content": "iso"}, file, body, size, &upid); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("uploading %s to %s on %s: %w", file, store, node, err)
	}
	if err := c.await(ctx, proxmox.NewTask(upid, c.api)); err != nil {
		return fmt.Errorf("uploading %s to %s on %s: %w", file, store, node, err)
	}
	return nil
}

// deleteInstallerISOs removes t's installer and seed ISOs from node's
// ISO storage; none (or no ISO storage) is fine.
func (c *Client) deleteInstallerISOs(ctx context.Context, node string, t providers.ImageTarget) error {
	store, err := c.isoStorage(ctx, node)
	if errors.Is(err, errNoISOStorage) {
		return nil // nowhere an ISO could be
	}
	if err != nil {
		return err
	}
	for _, file := range []string{installerISO(t), seedISO(t)} {
		if err := c.deleteContent(ctx, node, store, "iso", store+":iso/"+file); err != nil {
			return err
		}
	}
	return nil
}
