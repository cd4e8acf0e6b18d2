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
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"

	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// Inventory is the one host this connection reaches: one failure domain.
func (c *Client) Inventory(ctx context.Context) ([]failuredomain.Location, error) {
	defer c.bound(ctx)()
	if _, err := c.l.ConnectGetLibVersion(); err != nil {
		return nil, fmt.Errorf("host %s: %w", c.host, c.timedOut(ctx, err))
	}
	return []failuredomain.Location{{Host: c.host}}, nil
}

// ImageExists tells whether the base image volume ref (POOL/VOLUME)
// exists on the host.
func (c *Client) ImageExists(ctx context.Context, _ failuredomain.Location, ref string) (bool, error) {
	defer c.bound(ctx)()
	_, err := c.lookupVolume(ref)
	if isNotFound(err) {
		return false, nil
	}
	return err == nil, c.timedOut(ctx, err)
}

// lookupVolume finds POOL/VOLUME.
func (c *Client) lookupVolume(ref string) (golibvirt.StorageVol, error) {
	pool, name, ok := strings.Cut(ref, "/")
	if !ok || pool == "" || name == "" {
		return golibvirt.StorageVol{}, fmt.Errorf("image %q: want POOL/VOLUME", ref)
	}
	if machineVolume(name) {
		return golibvirt.StorageVol{}, fmt.Errorf("image %q (spec.image) is a machine's volume, not a base image", ref)
	}
	p, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return golibvirt.StorageVol{}, fmt.Errorf("storage pool %s: %w", pool, err)
	}
	v, err := c.l.StorageVolLookupByName(p, name)
	if isNotFound(err) {
		// A volume copied into the pool's directory appears only after a refresh.
		if err := c.l.StoragePoolRefresh(p, 0); err != nil {
			return golibvirt.StorageVol{}, fmt.Errorf("refreshing storage pool %s: %w", pool, err)
		}
		v, err = c.l.StorageVolLookupByName(p, name)
	}
	if err != nil {
		return golibvirt.StorageVol{}, fmt.Errorf("volume %s: %w", ref, err)
	}
	return v, nil
}

// isNotFound tells whether err says a domain, pool, volume or network
// does not exist.
func isNotFound(err error) bool {
	var e golibvirt.Error
	if !errors.As(err, &e) {
		return false
	}
	switch golibvirt.ErrorNumber(e.Code) {
	case golibvirt.ErrNoDomain, golibvirt.ErrNoStoragePool, golibvirt.ErrNoStorageVol, golibvirt.ErrNoNetwork:
		return true
	}
	return false
}
