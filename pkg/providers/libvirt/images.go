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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/providers"
)

// readySuffix names the empty volume that says an imported volume is
// complete. libvirt renames no volume, so an upload cannot land under a
// temporary name and be moved into place: the marker, made only after
// the upload ended well, is the durable record that it did.
const readySuffix = ".ready"

// ImportedImage finds a complete import of target on the host.
func (c *Client) ImportedImage(ctx context.Context, _ failuredomain.Location, t providers.ImageTarget) (string, bool, error) {
	defer c.bound(ctx)()
	ref := t.Storage + "/" + t.Name
	for _, name := range []string{t.Name + readySuffix, t.Name} {
		if _, err := c.lookupVolume(t.Storage + "/" + name); isNotFound(err) {
			return ref, false, nil
		} else if err != nil {
			return ref, false, c.timedOut(ctx, err)
		}
	}
	return ref, true, nil
}

// ImportImage uploads body into a new volume of the host's image pool
// (libvirt's stream API: the bytes go through the connection, so a remote
// host needs no access to the URL), then marks it complete. The volume is
// made in the format the bytes start with (checked against target's: a
// qcow2 is what overlays are made on, and must be told to QEMU as such),
// at the size they give: a qcow2 header's virtual size, a raw image's
// length.
func (c *Client) ImportImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget, body io.Reader) (string, error) {
	head := bufio.NewReaderSize(body, 1<<20)
	capacity, err := imageCapacity(head, t)
	if err != nil {
		return "", err
	}
	if err := c.DeleteImportedImage(ctx, loc, t); err != nil {
		return "", err
	}
	if t.Install != nil {
		return c.install(ctx, loc, t, head, capacity)
	}
	if err := c.uploadVolume(ctx, t.Storage, t.Name, volumeFormat(t.Format), capacity, t.Size, head); err != nil {
		return "", err
	}
	return c.markReady(ctx, t)
}

// uploadVolume streams body into a new volume name of pool, deleting it
// again when the upload fails.
func (c *Client) uploadVolume(ctx context.Context, pool, name, format string, capacity uint64, size int64, body io.Reader) error {
	defer c.bound(ctx)()
	p, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", pool, c.timedOut(ctx, err))
	}
	if err := c.fits(p, pool, size); err != nil {
		return c.timedOut(ctx, err)
	}
	vol, err := c.createVolume(p, name, format, capacity)
	if err != nil {
		return c.timedOut(ctx, err)
	}
	if err := c.l.StorageVolUpload(vol, body, 0, 0, 0); err != nil {
		// Nothing half built is left: the retry starts over.
		_ = c.l.StorageVolDelete(vol, 0)
		return fmt.Errorf("uploading %s/%s: %w", pool, name, c.timedOut(ctx, err))
	}
	return nil
}

// fits refuses an upload of size bytes (-1: unknown) larger than pool's
// free space, before a volume is made.
func (c *Client) fits(p golibvirt.StoragePool, pool string, size int64) error {
	if size < 0 {
		return nil
	}
	// No refresh: it fails while another volume of the pool is being
	// made, and libvirt counts what is made through it.
	_, _, _, available, err := c.l.StoragePoolGetInfo(p)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", pool, err)
	}
	if uint64(size) > available {
		return fmt.Errorf("%w: the image has %d bytes, storage pool %s has %d free", providers.ErrInsufficientStorage, size, pool, available)
	}
	return nil
}

// markReady records that t is complete: the empty NAME.ready volume.
func (c *Client) markReady(ctx context.Context, t providers.ImageTarget) (string, error) {
	defer c.bound(ctx)()
	pool, err := c.l.StoragePoolLookupByName(t.Storage)
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", t.Storage, c.timedOut(ctx, err))
	}
	if _, err := c.createVolume(pool, t.Name+readySuffix, "raw", 0); err != nil {
		return "", c.timedOut(ctx, err)
	}
	return t.Storage + "/" + t.Name, nil
}

// volumeFormat is the libvirt volume format of an imported image: an ISO
// is raw bytes to libvirt and QEMU.
func volumeFormat(f v1alpha1.ImageFormat) string {
	if f == v1alpha1.ImageFormatISO {
		return "raw"
	}
	return string(f)
}

// imageCapacity is the virtual disk size of the image head starts, after
// checking that its bytes are in target's format (images.Sniff).
func imageCapacity(head *bufio.Reader, t providers.ImageTarget) (uint64, error) {
	if t.Format == v1alpha1.ImageFormatISO {
		b, err := head.Peek(images.ISOSniffLen)
		if err != nil && !errors.Is(err, io.EOF) {
			return 0, err
		}
		if err := images.SniffISO(b); err != nil {
			return 0, err
		}
		if t.Size < 0 {
			return 0, errors.New("the image server did not say the installer's length, which a libvirt volume needs before the upload")
		}
		return uint64(t.Size), nil
	}
	b, err := head.Peek(images.SniffLen)
	if err != nil && !errors.Is(err, io.EOF) {
		return 0, err
	}
	capacity, err := images.Sniff(b, t.Format)
	switch {
	case err != nil:
		return 0, err
	case t.Format == v1alpha1.ImageFormatQCOW2:
		return capacity, nil
	case t.Size < 0:
		return 0, errors.New("the image server did not say the image's length, which a raw libvirt volume needs before the upload")
	}
	return uint64(t.Size), nil
}

// createVolume makes an empty volume of format and capacity bytes.
func (c *Client) createVolume(pool golibvirt.StoragePool, name, format string, capacity uint64) (golibvirt.StorageVol, error) {
	doc, err := (&libvirtxml.StorageVolume{Name: name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}}}).Marshal()
	if err != nil {
		return golibvirt.StorageVol{}, err
	}
	vol, err := c.l.StorageVolCreateXML(pool, doc, 0)
	if err != nil {
		return vol, fmt.Errorf("creating volume %s: %w", name, err)
	}
	return vol, nil
}

// DeleteImportedImage removes the marker first: a crash between the two
// deletes leaves an incomplete import, which the next import replaces.
func (c *Client) DeleteImportedImage(ctx context.Context, _ failuredomain.Location, t providers.ImageTarget) error {
	defer c.bound(ctx)()
	pool, err := c.l.StoragePoolLookupByName(t.Storage)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", t.Storage, c.timedOut(ctx, err))
	}
	// A build interrupted by a crash: its VM and installer volume.
	if err := c.deleteMachine(buildSpec(failuredomain.Location{}, t)); err != nil {
		return c.timedOut(ctx, err)
	}
	for _, name := range []string{t.Name + readySuffix, t.Name, t.Name + installerSuffix} {
		vol, err := c.l.StorageVolLookupByName(pool, name)
		if isNotFound(err) {
			continue
		}
		if err == nil {
			err = c.l.StorageVolDelete(vol, 0)
		}
		if err != nil && !isNotFound(err) {
			return fmt.Errorf("deleting volume %s/%s: %w", t.Storage, name, c.timedOut(ctx, err))
		}
	}
	return nil
}

var _ providers.ImageImporter = (*Client)(nil)
