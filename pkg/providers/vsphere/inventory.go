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

	"github.com/vmware/govmomi/find"

	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// Inventory lists every (datacenter, compute cluster) pair.
func (c *Client) Inventory(ctx context.Context) ([]failuredomain.Location, error) {
	finder := find.NewFinder(c.gc.Client, false)
	dcs, err := finder.DatacenterList(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("listing datacenters: %w", err)
	}
	var out []failuredomain.Location
	for _, dc := range dcs {
		finder.SetDatacenter(dc)
		clusters, err := finder.ClusterComputeResourceList(ctx, "*")
		var nf *find.NotFoundError
		if errors.As(err, &nf) {
			continue // a datacenter without clusters offers no failure domain
		}
		if err != nil {
			return nil, fmt.Errorf("listing clusters of %s: %w", dc.Name(), err)
		}
		for _, cl := range clusters {
			out = append(out, failuredomain.Location{Datacenter: dc.Name(), Cluster: cl.Name()})
		}
	}
	return out, nil
}

// ImageExists tells whether the location's datacenter holds a VM template
// named template.
func (c *Client) ImageExists(ctx context.Context, location failuredomain.Location, template string) (bool, error) {
	return c.TemplateExists(ctx, location.Datacenter, template)
}

// TemplateExists tells whether datacenter holds a VM template at the
// path template under its VM folder (a VM there is no template); a path
// that could lead outside that folder is an error.
func (c *Client) TemplateExists(ctx context.Context, datacenter, template string) (bool, error) {
	l, err := c.locate(ctx, datacenter)
	if err != nil {
		return false, err
	}
	p, err := l.templatePath(template)
	if err != nil {
		return false, err
	}
	// Looked up afresh, not cached: this is the check of what exists.
	vm, err := lookup(ctx, l.f, p)
	if err != nil {
		return false, fmt.Errorf("looking up %s in %s: %w", template, datacenter, err)
	}
	if vm == nil {
		return false, nil
	}
	return vm.IsTemplate(ctx)
}
