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
	"errors"
	"fmt"
	"io"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/firestoned/banlieue/pkg/failuredomain"
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
		if _, err := c.lookupVolume(t.Storage + "/" + name); isNotFound(errors.Unwrap(err)) || isNotFound(err) {
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
// made raw of the body's length and the pool refreshed after the upload,
// so libvirt probes the format from the bytes: a qcow2 must then read as
// qcow2 (what overlays are made on), or the import fails.
func (c *Client) ImportImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget, body io.Reader) (string, error) {
	if t.Size < 0 {
		return "", errors.New("the image server did not say the image's length, which a libvirt volume needs before the upload")
	}
	if err := c.DeleteImportedImage(ctx, loc, t); err != nil {
		return "", err
	}
	defer c.bound(ctx)()
	pool, err := c.l.StoragePoolLookupByName(t.Storage)
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", t.Storage, c.timedOut(ctx, err))
	}
	vol, err := c.createRaw(pool, t.Name, uint64(t.Size))
	if err != nil {
		return "", c.timedOut(ctx, err)
	}
	if err := c.upload(ctx, pool, vol, t, body); err != nil {
		// Nothing half built is left: the retry starts over.
		_ = c.l.StorageVolDelete(vol, 0)
		return "", err
	}
	if _, err := c.createRaw(pool, t.Name+readySuffix, 0); err != nil {
		return "", c.timedOut(ctx, err)
	}
	return t.Storage + "/" + t.Name, nil
}

func (c *Client) upload(ctx context.Context, pool golibvirt.StoragePool, vol golibvirt.StorageVol, t providers.ImageTarget, body io.Reader) error {
	if err := c.l.StorageVolUpload(vol, body, 0, uint64(t.Size), 0); err != nil {
		return fmt.Errorf("uploading %s/%s: %w", t.Storage, t.Name, c.timedOut(ctx, err))
	}
	if err := c.l.StoragePoolRefresh(pool, 0); err != nil {
		return fmt.Errorf("refreshing storage pool %s: %w", t.Storage, c.timedOut(ctx, err))
	}
	vol, err := c.l.StorageVolLookupByName(pool, t.Name)
	if err != nil {
		return fmt.Errorf("volume %s/%s after the upload: %w", t.Storage, t.Name, c.timedOut(ctx, err))
	}
	doc, err := c.l.StorageVolGetXMLDesc(vol, 0)
	if err != nil {
		return err
	}
	v := &libvirtxml.StorageVolume{}
	if err := v.Unmarshal(doc); err != nil {
		return err
	}
	got := "raw"
	if v.Target != nil && v.Target.Format != nil {
		got = v.Target.Format.Type
	}
	if got != string(t.Format) {
		return fmt.Errorf("the image's bytes are %s, spec.import.format says %s", got, t.Format)
	}
	return nil
}

// createRaw makes an empty raw volume of capacity bytes.
func (c *Client) createRaw(pool golibvirt.StoragePool, name string, capacity uint64) (golibvirt.StorageVol, error) {
	doc, err := (&libvirtxml.StorageVolume{Name: name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: capacity},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}}}).Marshal()
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
	for _, name := range []string{t.Name + readySuffix, t.Name} {
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
