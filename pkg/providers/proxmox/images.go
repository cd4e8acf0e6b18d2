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
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	proxmox "github.com/luthermonson/go-proxmox"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/providers"
)

// An import is built on one node (the location's; the kind's ImportScope
// gives each node its own) as Proxmox VE 8.4+ does it by hand: the bytes
// uploaded into the image storage as import content (NAME.qcow2 or
// NAME.raw), a VM named NAME created with its disk imported from that
// volume (scsi0=STORAGE:0,import-from=...), converted to a template, the
// import volume then deleted. The template named NAME on the node is the
// import's only durable record: it exists complete or not at all (a VM
// is converted last), so a restarted provider finds it by name, as a
// machine's clone does (template: by name, the node's own first).

// ImportedImage finds the template of target on the location's node.
func (c *Client) ImportedImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget) (string, bool, error) {
	vms, err := c.importVMs(ctx, loc.Host, t.Name)
	if err != nil {
		return t.Name, false, err
	}
	for _, vm := range vms {
		if vm.Template == 1 {
			return t.Name, true, nil
		}
	}
	return t.Name, false, nil
}

// importVMs are the VMs (templates or not) named name on node.
func (c *Client) importVMs(ctx context.Context, node, name string) ([]*proxmox.ClusterResource, error) {
	if node == "" {
		return nil, errors.New("an import is built on a node: the location names none")
	}
	cl, err := c.api.Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	resources, err := cl.Resources(ctx, "vm")
	if err != nil {
		return nil, fmt.Errorf("listing VMs: %w", err)
	}
	var out []*proxmox.ClusterResource
	for _, r := range resources {
		if r.Type == "qemu" && r.Node == node && r.Name == name {
			out = append(out, r)
		}
	}
	return out, nil
}

// importStorage is where target's bytes are uploaded on node: target's
// storage when it holds import content, else the node's first storage
// that does (an LVM-thin or ZFS storage keeps disks, not files: the
// template's disk is made on target's storage from there).
func (c *Client) importStorage(ctx context.Context, node string, t providers.ImageTarget) (string, error) {
	storages, err := c.api.NodeRef(node).Storages(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the storages of %s: %w", node, err)
	}
	first := ""
	for _, s := range storages {
		if !strings.Contains(","+s.Content+",", ",import,") {
			continue
		}
		if s.Name == t.Storage {
			return s.Name, nil
		}
		if first == "" {
			first = s.Name
		}
	}
	if first == "" {
		return "", fmt.Errorf("%w: node %s has no storage with import content (Proxmox VE 8.4 or later, content type import on a directory storage), where an imported image is uploaded", errNoImportStorage, node)
	}
	return first, nil
}

// errNoImportStorage: the node has no storage for import content.
var errNoImportStorage = errors.New("no import storage")

// importFile is the name of target's import volume.
func importFile(t providers.ImageTarget) string {
	return t.Name + "." + string(t.Format)
}

// ImportImage sniffs the bytes' format (images.Sniff) before anything is
// built, removes what an interrupted import left, then uploads, creates,
// converts and deletes the upload. On an error nothing of target is left
// on the node (what a cancelled context keeps this from removing, the
// next import removes first).
func (c *Client) ImportImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget, body io.Reader) (string, error) {
	var head *bufio.Reader
	switch t.Format {
	case v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw:
		head = bufio.NewReaderSize(body, 1<<20)
		b, err := head.Peek(images.SniffLen)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if _, err := images.Sniff(b, t.Format); err != nil {
			return "", err
		}
	case v1alpha1.ImageFormatISO:
		head = bufio.NewReaderSize(body, 1<<20)
		b, err := head.Peek(images.ISOSniffLen)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if err := images.SniffISO(b); err != nil {
			return "", err
		}
	default:
		return "", fmt.Errorf("Proxmox VE imports qcow2, raw and iso images, not %s", t.Format)
	}
	if t.Size < 0 {
		return "", errors.New("the image server did not say the image's length, which a Proxmox VE upload needs before it starts")
	}
	unlock, err := lockImport(ctx, c.endpoint+"|"+loc.Host+"|"+t.Name)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Providers of one cluster share its nodes: one that built this
	// import (the same bytes: the name carries the revision) while this
	// one waited built what this one would.
	if _, found, err := c.ImportedImage(ctx, loc, t); err != nil || found {
		return t.Name, err
	}
	if err := c.DeleteImportedImage(ctx, loc, t); err != nil {
		return "", err
	}
	node := loc.Host
	build := c.buildTemplate
	if t.Format == v1alpha1.ImageFormatISO {
		build = c.buildInstaller
	}
	if err := build(ctx, node, t, head); err != nil {
		// Nothing half built is left: the retry starts over.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*requestTimeout)
		defer cancel()
		_ = c.DeleteImportedImage(cleanup, loc, t)
		return "", err
	}
	return t.Name, nil
}

// importLocks serialise the builds of one import on one node of one
// cluster (endpoint|node|name) in this process, which serves every
// Provider of the class: two Providers of a cluster import the same
// image onto the same nodes.
var importLocks sync.Map

func lockImport(ctx context.Context, key string) (func(), error) {
	v, _ := importLocks.LoadOrStore(key, make(chan struct{}, 1))
	sem := v.(chan struct{})
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (c *Client) buildTemplate(ctx context.Context, node string, t providers.ImageTarget, body io.Reader) error {
	store, err := c.importStorage(ctx, node, t)
	if err != nil {
		return err
	}
	file := importFile(t)
	volid := store + ":import/" + file
	var upid proxmox.UPID
	path := fmt.Sprintf("/nodes/%s/storage/%s/upload", node, store)
	// go-proxmox's upload takes no context: the body ends it, failing
	// its next read once ctx is done.
	if err := c.upload.UploadReader(path, map[string]string{"content": "import"}, file, ctxReader{ctx, body}, t.Size, &upid); err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%v)", ctx.Err(), err)
		}
		return fmt.Errorf("uploading %s to %s on %s: %w", file, store, node, err)
	}
	if err := c.await(ctx, proxmox.NewTask(upid, c.api)); err != nil {
		return fmt.Errorf("uploading %s to %s on %s: %w", file, store, node, err)
	}
	id, err := c.createImportVM(ctx, node, t,
		proxmox.VirtualMachineOption{Name: "scsihw", Value: "virtio-scsi-pci"},
		proxmox.VirtualMachineOption{Name: "scsi0", Value: t.Storage + ":0,import-from=" + volid},
		proxmox.VirtualMachineOption{Name: "boot", Value: "order=scsi0"},
		proxmox.VirtualMachineOption{Name: "agent", Value: "1"})
	if err != nil {
		return err
	}
	if err := c.convertToTemplate(ctx, node, id, t); err != nil {
		return err
	}
	// The template holds its own copy: the upload goes.
	return c.deleteImportVolume(ctx, node, t)
}

// deleteImportVolume removes target's uploaded file from the node's
// import storage; none is fine.
func (c *Client) deleteImportVolume(ctx context.Context, node string, t providers.ImageTarget) error {
	store, err := c.importStorage(ctx, node, t)
	if errors.Is(err, errNoImportStorage) {
		return nil // nowhere an upload could be
	}
	if err != nil {
		return err
	}
	return c.deleteContent(ctx, node, store, "import", store+":import/"+importFile(t))
}

// deleteContent deletes volid, of content type content, from store on
// node when it is there.
func (c *Client) deleteContent(ctx context.Context, node, store, content, volid string) error {
	var list []map[string]any
	if err := c.api.Get(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content?content=%s", node, store, content), &list); err != nil {
		return fmt.Errorf("listing the %s volumes of %s on %s: %w", content, store, node, err)
	}
	present := false
	for _, e := range list {
		present = present || e["volid"] == volid
	}
	if !present {
		return nil
	}
	var upid proxmox.UPID
	if err := c.api.Delete(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content/%s", node, store, volid), &upid); err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		return fmt.Errorf("deleting %s on %s: %w", volid, node, err)
	}
	if upid != "" {
		if err := c.await(ctx, proxmox.NewTask(upid, c.api)); err != nil {
			return fmt.Errorf("deleting %s on %s: %w", volid, node, err)
		}
	}
	return nil
}

// createImportVM creates the VM named after t on node with opts (a VMID
// asked for, again when another client took it first) and returns its
// VMID once the create task ended.
func (c *Client) createImportVM(ctx context.Context, node string, t providers.ImageTarget, opts ...proxmox.VirtualMachineOption) (int, error) {
	cl, err := c.api.Cluster(ctx)
	if err != nil {
		return 0, fmt.Errorf("reading the cluster: %w", err)
	}
	n := c.api.NodeRef(node)
	opts = append([]proxmox.VirtualMachineOption{{Name: "name", Value: t.Name}, {Name: "description", Value: "banlieue import " + t.Name}}, opts...)
	for attempt := 0; ; attempt++ {
		id, err := cl.NextID(ctx)
		if err != nil {
			return 0, fmt.Errorf("asking for a VMID: %w", err)
		}
		task, err := n.NewVirtualMachine(ctx, id, opts...)
		if err != nil && strings.Contains(err.Error(), "already exists") && attempt < 5 {
			continue // another client took the VMID first
		}
		if err != nil {
			return 0, fmt.Errorf("creating VM %s on %s: %w", t.Name, node, err)
		}
		if err := c.await(ctx, task); err != nil {
			return 0, fmt.Errorf("creating VM %s on %s: %w", t.Name, node, err)
		}
		return id, nil
	}
}

// convertToTemplate turns VM id on node into a template: the import's
// last step.
func (c *Client) convertToTemplate(ctx context.Context, node string, id int, t providers.ImageTarget) error {
	task, err := c.api.NodeRef(node).VirtualMachineRef(id).ConvertToTemplate(ctx)
	if err == nil {
		err = c.await(ctx, task)
	}
	if err != nil {
		return fmt.Errorf("converting VM %d (%s) on %s to a template: %w", id, t.Name, node, err)
	}
	return nil
}

// DeleteImportedImage removes target's template (and any VM of its name
// an interrupted import left on the node, stopped first: an installer's
// build VM may run) with their disks, then its import volume and its
// installer and seed ISOs.
func (c *Client) DeleteImportedImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget) error {
	vms, err := c.importVMs(ctx, loc.Host, t.Name)
	if err != nil {
		return err
	}
	for _, r := range vms {
		vm, err := c.api.NodeRef(r.Node).VirtualMachine(ctx, int(r.VMID))
		if err != nil {
			if isGone(err) {
				continue
			}
			return fmt.Errorf("reading VM %d (%s) on %s: %w", r.VMID, t.Name, r.Node, err)
		}
		if vm.Status == proxmox.StatusVirtualMachineRunning {
			task, err := vm.Stop(ctx)
			if err == nil {
				err = c.await(ctx, task)
			}
			if err != nil && !isGone(err) {
				return fmt.Errorf("stopping VM %d (%s) on %s: %w", r.VMID, t.Name, r.Node, err)
			}
		}
		task, err := vm.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true})
		if err == nil && task != nil {
			err = c.await(ctx, task)
		}
		if err != nil && !isGone(err) {
			return fmt.Errorf("deleting VM %d (%s) on %s: %w", r.VMID, t.Name, r.Node, err)
		}
	}
	if err := c.deleteImportVolume(ctx, loc.Host, t); err != nil {
		return err
	}
	return c.deleteInstallerISOs(ctx, loc.Host, t)
}

func isGone(err error) bool {
	return err != nil && (strings.Contains(err.Error(), "does not exist") || strings.Contains(err.Error(), "not found"))
}

// ctxReader fails its reads once ctx is done.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (r ctxReader) Read(p []byte) (int, error) {
	if err := r.ctx.Err(); err != nil {
		return 0, err
	}
	return r.r.Read(p)
}

var _ providers.ImageImporter = (*Client)(nil)
