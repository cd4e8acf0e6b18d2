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
	"crypto/sha256"
	"fmt"
	"io"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
	"libvirt.org/go/libvirtxml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// installerSuffix names the installer's volume while a build VM installs
// from it.
const installerSuffix = ".installer"

// buildPoll is how often a build VM's state is read while its guest
// installs.
const buildPoll = 2 * time.Second

// buildSpec is the build VM of t: a machine like any other (the provider's
// own code attaches the installer as a CD-ROM before a blank boot disk,
// with the seed), named and identified after t, so a provider restarted
// mid-install finds it.
func buildSpec(loc failuredomain.Location, t providers.ImageTarget) providers.MachineSpec {
	sum := sha256.Sum256([]byte("banlieue-image-build/" + t.Name))
	id, _ := uuid.FromBytes(sum[:16])
	spec := providers.MachineSpec{
		Name: "banlieue-build-" + t.Name, HostName: "banlieue-build", InstanceUUID: id.String(), Location: loc,
		Image: t.Storage + "/" + t.Name + installerSuffix, ImageIsInstaller: true,
		CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOn,
	}
	if in := t.Install; in != nil {
		spec.Disks = []providers.Disk{{Name: "root", SizeGiB: in.DiskSizeGiB, Target: t.Storage}}
		spec.Firmware, spec.UserData = t.Firmware, in.UserData
	}
	return spec
}

// install builds t from an installer: the ISO uploaded beside it, a build
// VM run until its guest powers itself off, its disk copied into t's
// volume (a machine's volume is never a base image), then the build VM
// and the installer removed and t marked complete. Any failure removes
// all of it.
func (c *Client) install(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget, iso io.Reader, size uint64) (string, error) {
	if err := c.uploadVolume(ctx, t.Storage, t.Name+installerSuffix, "raw", size, t.Size, iso); err != nil {
		return "", err
	}
	spec := buildSpec(loc, t)
	ref, err := c.build(ctx, spec, t)
	if err != nil {
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
		defer cancel()
		_ = c.DeleteImportedImage(cleanup, loc, t)
		return "", err
	}
	return ref, nil
}

func (c *Client) build(ctx context.Context, spec providers.MachineSpec, t providers.ImageTarget) (string, error) {
	if _, err := c.EnsureMachine(ctx, spec, func(context.Context, string) error { return nil }); err != nil {
		return "", fmt.Errorf("build VM %s: %w", spec.Name, err)
	}
	if t.Install.Installing != nil {
		t.Install.Installing()
	}
	if err := c.awaitPowerOff(ctx, spec, t.Install.Timeout); err != nil {
		return "", err
	}
	if err := c.copyBootDisk(ctx, spec, t); err != nil {
		return "", err
	}
	if err := c.DeleteMachine(ctx, spec, nil); err != nil {
		return "", err
	}
	if err := c.deleteInstaller(ctx, t); err != nil {
		return "", err
	}
	return c.markReady(ctx, t)
}

// awaitPowerOff waits for the build VM's guest to power itself off.
func (c *Client) awaitPowerOff(ctx context.Context, spec providers.MachineSpec, timeout time.Duration) error {
	id, err := uuid.Parse(spec.InstanceUUID)
	if err != nil {
		return err
	}
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(buildPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-deadline.C:
			return fmt.Errorf("%w (%s)", providers.ErrInstallTimedOut, timeout)
		case <-tick.C:
		}
		off, err := c.shutOff(ctx, golibvirt.UUID(id))
		if err != nil {
			return err
		}
		if off {
			return nil
		}
	}
}

func (c *Client) shutOff(ctx context.Context, id golibvirt.UUID) (bool, error) {
	defer c.bound(ctx)()
	dom, err := c.l.DomainLookupByUUID(id)
	if err != nil {
		return false, fmt.Errorf("build VM: %w", c.timedOut(ctx, err))
	}
	state, _, err := c.l.DomainGetState(dom, 0)
	if err != nil {
		return false, fmt.Errorf("build VM state: %w", c.timedOut(ctx, err))
	}
	return golibvirt.DomainState(state) == golibvirt.DomainShutoff, nil
}

// copyBootDisk copies the build VM's installed disk into t's volume.
func (c *Client) copyBootDisk(ctx context.Context, spec providers.MachineSpec, t providers.ImageTarget) error {
	defer c.bound(ctx)()
	pool, err := c.l.StoragePoolLookupByName(t.Storage)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", t.Storage, c.timedOut(ctx, err))
	}
	disk, err := c.l.StorageVolLookupByName(pool, volumeName(spec, "root", "qcow2"))
	if err != nil {
		return fmt.Errorf("the build VM's disk: %w", c.timedOut(ctx, err))
	}
	_, capacity, _, err := c.l.StorageVolGetInfo(disk)
	if err != nil {
		return c.timedOut(ctx, err)
	}
	doc, err := (&libvirtxml.StorageVolume{Name: t.Name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "qcow2"}}}).Marshal()
	if err != nil {
		return err
	}
	if _, err := c.l.StorageVolCreateXMLFrom(pool, doc, disk, 0); err != nil {
		return fmt.Errorf("copying the installed disk into %s/%s: %w", t.Storage, t.Name, c.timedOut(ctx, err))
	}
	return nil
}

func (c *Client) deleteInstaller(ctx context.Context, t providers.ImageTarget) error {
	defer c.bound(ctx)()
	return c.timedOut(ctx, c.deleteVolume(t.Storage, t.Name+installerSuffix))
}
