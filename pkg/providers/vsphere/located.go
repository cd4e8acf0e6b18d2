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
	"path"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// located looks up a datacenter's objects by name, through the session's
// refCache: a finder walks folders for every lookup, the cache once a
// minute.
type located struct {
	c  *Client
	f  *find.Finder
	dc *object.Datacenter
}

// locate returns the lookups of datacenter.
func (c *Client) locate(ctx context.Context, datacenter string) (*located, error) {
	f := find.NewFinder(c.gc.Client, false)
	o, err := c.refs.get(refKey("datacenter", "", datacenter), func() (cachedObject, error) {
		dc, err := f.Datacenter(ctx, datacenter)
		if err != nil {
			return cachedObject{}, err
		}
		return objectOf(dc, dc.InventoryPath), nil
	})
	if err != nil {
		return nil, fmt.Errorf("datacenter %s: %w", datacenter, err)
	}
	dc := object.NewDatacenter(c.gc.Client, o.ref)
	dc.InventoryPath = o.path
	f.SetDatacenter(dc)
	return &located{c: c, f: f, dc: dc}, nil
}

// dcPath is the datacenter's path, "" for lookups across vCenter.
func (l *located) dcPath() string {
	if l.dc == nil {
		return ""
	}
	return l.dc.InventoryPath
}

// refKey names a cached object: its kind, datacenter and name.
func refKey(kind, datacenter, name string) string {
	return kind + "\x00" + datacenter + "\x00" + name
}

// get is the datacenter's object of kind named name, from find on a miss.
func (l *located) get(kind, name string, find func() (object.Reference, string, error)) (cachedObject, error) {
	return l.c.refs.get(refKey(kind, l.dcPath(), name), func() (cachedObject, error) {
		obj, path, err := find()
		if err != nil {
			return cachedObject{}, err
		}
		return objectOf(obj, path), nil
	})
}

// template is the VM template at the relative path name under the
// datacenter's VM folder ("ubuntu", "templates/ubuntu"). A bare name
// used to be searched for across the datacenter (across vCenter without
// one), so any VM of that name, a tenant's "<namespace>.<name>" among
// them, could be taken for the template; now the path is anchored as a
// folder's is, and what is there must be a template.
func (l *located) template(ctx context.Context, name string) (*object.VirtualMachine, error) {
	p, err := l.templatePath(name)
	if err != nil {
		return nil, err
	}
	o, err := l.get("template", name, func() (object.Reference, string, error) {
		vm, err := l.f.VirtualMachine(ctx, p)
		if err != nil {
			return nil, "", err
		}
		if err := mustBeTemplate(ctx, vm); err != nil {
			return nil, "", err
		}
		return vm, vm.InventoryPath, nil
	})
	if err != nil {
		return nil, err
	}
	vm := object.NewVirtualMachine(l.c.gc.Client, o.ref)
	vm.InventoryPath = o.path
	return vm, nil
}

// templatePath is the inventory path of the template named by the
// relative path name (an image's ref, spec.template): under the
// datacenter's VM folder; nothing that could climb out of it.
func (l *located) templatePath(name string) (string, error) {
	if name == "" {
		return "", errors.New("the image names no template (spec.template)")
	}
	if why := machinespec.RelativePathError(name); why != "" {
		return "", fmt.Errorf("template %q (spec.template) %s: it must be a path under the VM folder of the failure domain's datacenter", name, why)
	}
	return path.Join(l.dcPath(), "vm", name), nil
}

// mustBeTemplate refuses a VM that is not a template: cloning a running
// VM someone named like a template would copy its disks and identity.
func mustBeTemplate(ctx context.Context, vm *object.VirtualMachine) error {
	ok, err := vm.IsTemplate(ctx)
	if err != nil {
		return fmt.Errorf("reading whether %s is a template: %w", vm.InventoryPath, err)
	}
	if !ok {
		return fmt.Errorf("%s (spec.template) is a virtual machine, not a template", vm.InventoryPath)
	}
	return nil
}

// folder is the VM folder at the relative path name under the
// datacenter's VM folder, or that folder itself: anchored, so a folder of
// another datacenter cannot be named (admission refuses what could climb
// out, machinespec.RelativePathError).
func (l *located) folder(ctx context.Context, name string) (*object.Folder, error) {
	if why := machinespec.RelativePathError(name); why != "" {
		return nil, fmt.Errorf("folder %q %s", name, why)
	}
	o, err := l.get("folder", name, func() (object.Reference, string, error) {
		var folder *object.Folder
		var err error
		if name == "" {
			folder, err = l.f.DefaultFolder(ctx)
		} else {
			folder, err = l.f.Folder(ctx, path.Join(l.dcPath(), "vm", name))
		}
		if err != nil {
			return nil, "", err
		}
		return folder, folder.InventoryPath, nil
	})
	if err != nil {
		return nil, err
	}
	folder := object.NewFolder(l.c.gc.Client, o.ref)
	folder.InventoryPath = o.path
	return folder, nil
}

// datastore is the datastore named name.
func (l *located) datastore(ctx context.Context, name string) (*object.Datastore, error) {
	o, err := l.get("datastore", name, func() (object.Reference, string, error) {
		ds, err := l.f.Datastore(ctx, name)
		if err != nil {
			return nil, "", err
		}
		return ds, ds.InventoryPath, nil
	})
	if err != nil {
		return nil, err
	}
	ds := object.NewDatastore(l.c.gc.Client, o.ref)
	ds.InventoryPath, ds.DatacenterPath = o.path, l.dcPath()
	return ds, nil
}

// pool is the resource pool at the relative path name under cluster's
// root pool, or that root pool itself: anchored, so a pool of another
// cluster or datacenter cannot be named (admission refuses what could
// climb out, machinespec.RelativePathError).
func (l *located) pool(ctx context.Context, name, cluster string) (*object.ResourcePool, error) {
	if why := machinespec.RelativePathError(name); why != "" {
		return nil, fmt.Errorf("resource pool %q %s", name, why)
	}
	key := "cluster " + cluster
	if name != "" {
		key = "pool " + cluster + "/" + name
	}
	o, err := l.get("pool", key, func() (object.Reference, string, error) {
		cl, err := l.f.ClusterComputeResource(ctx, cluster)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", cluster, err)
		}
		if name != "" {
			// A cluster's root pool is "Resources" in the inventory.
			pool, err := l.f.ResourcePool(ctx, path.Join(cl.InventoryPath, "Resources", name))
			if err != nil {
				return nil, "", fmt.Errorf("resource pool %s of cluster %s: %w", name, cluster, err)
			}
			return pool, pool.InventoryPath, nil
		}
		pool, err := cl.ResourcePool(ctx)
		if err != nil {
			return nil, "", fmt.Errorf("cluster %s: %w", cluster, err)
		}
		return pool, pool.InventoryPath, nil
	})
	if err != nil {
		return nil, err
	}
	pool := object.NewResourcePool(l.c.gc.Client, o.ref)
	pool.InventoryPath = o.path
	return pool, nil
}

// network is the network (port group) named name.
func (l *located) network(ctx context.Context, name string) (object.NetworkReference, error) {
	o, err := l.get("network", name, func() (object.Reference, string, error) {
		n, err := l.f.Network(ctx, name)
		if err != nil {
			return nil, "", err
		}
		return n, n.GetInventoryPath(), nil
	})
	if err != nil {
		return nil, err
	}
	n, ok := object.NewReference(l.c.gc.Client, o.ref).(object.NetworkReference)
	if !ok {
		return nil, fmt.Errorf("network %s is a %s", name, o.ref.Type)
	}
	if p, ok := n.(interface{ SetInventoryPath(string) }); ok {
		p.SetInventoryPath(o.path)
	}
	return n, nil
}

// backing is the NIC backing of the network named name, read once per
// refTTL: every clone of a template on that network would read it again
// (a call per NIC per VM).
func (l *located) backing(ctx context.Context, name string) (types.BaseVirtualDeviceBackingInfo, error) {
	return readOnce(l, "backing", name, func() (types.ManagedObjectReference, types.BaseVirtualDeviceBackingInfo, error) {
		n, err := l.network(ctx, name)
		if err != nil {
			return types.ManagedObjectReference{}, nil, err
		}
		b, err := n.EthernetCardBackingInfo(ctx)
		return n.Reference(), b, err
	})
}

// templateDevices are tmpl's devices, read once per refTTL (a template is
// replaced, not edited, by an image import: a new reference). Read only:
// a caller that changes devices reads its own.
func (l *located) templateDevices(ctx context.Context, tmpl *object.VirtualMachine) (object.VirtualDeviceList, error) {
	return readOnce(l, "devices", tmpl.Reference().Value, func() (types.ManagedObjectReference, object.VirtualDeviceList, error) {
		devices, err := tmpl.Device(ctx)
		return tmpl.Reference(), devices, err
	})
}

// readOnce is what read returns of the object kind calls name, from the
// session's reference cache while it is fresh (refTTL); read only.
func readOnce[T any](l *located, kind, name string, read func() (types.ManagedObjectReference, T, error)) (T, error) {
	o, err := l.c.refs.get(refKey(kind, l.dcPath(), name), func() (cachedObject, error) {
		ref, v, err := read()
		if err != nil {
			return cachedObject{}, err
		}
		return cachedObject{ref: ref, value: v}, nil
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return o.value.(T), nil
}

// machine is the VM with instance UUID uuid, or nil.
func (l *located) machine(ctx context.Context, uuid string) (*object.VirtualMachine, error) {
	o, err := l.get("machine", uuid, func() (object.Reference, string, error) {
		ref, err := object.NewSearchIndex(l.c.gc.Client).FindByUuid(ctx, l.dc, uuid, true, ptr.To(true))
		if err != nil {
			return nil, "", err
		}
		if ref == nil {
			return nil, "", errNoMachine
		}
		return ref, "", nil
	})
	switch {
	case err == errNoMachine:
		return nil, nil
	case err != nil:
		return nil, err
	case o.ref.Type != "VirtualMachine":
		return nil, fmt.Errorf("instance UUID %s is a %s, not a VM", uuid, o.ref.Type)
	}
	return object.NewVirtualMachine(l.c.gc.Client, o.ref), nil
}

// remember caches a machine found another way (a clone's result).
func (l *located) remember(uuid string, vm *object.VirtualMachine) {
	l.c.refs.put(refKey("machine", l.dcPath(), uuid), objectOf(vm, ""))
}

// forgetMachine drops a destroyed machine's reference.
func (l *located) forgetMachine(uuid string) {
	l.c.refs.drop(refKey("machine", l.dcPath(), uuid))
}

// errNoMachine: no VM has the instance UUID (never cached).
var errNoMachine = fmt.Errorf("no such machine")
