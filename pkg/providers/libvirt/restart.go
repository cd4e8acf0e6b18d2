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
	"fmt"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"

	"github.com/firestoned/banlieue/pkg/providers"
)

var _ providers.Restarter = &Client{}

// RestartMachine resets the domain (virDomainReset: the guest restarts at
// once, as from its reset button). It is one synchronous call with no
// task, so there is nothing to record: a provider killed during it
// leaves the restart Unknown, never repeated.
func (c *Client) RestartMachine(ctx context.Context, spec providers.MachineSpec, _ providers.TaskRecorder) error {
	defer c.bound(ctx)()
	return c.timedOut(ctx, c.reset(spec))
}

func (c *Client) reset(spec providers.MachineSpec) error {
	id, err := uuid.Parse(spec.InstanceUUID)
	if err != nil {
		return fmt.Errorf("instance UUID %q: %w", spec.InstanceUUID, err)
	}
	dom, err := c.l.DomainLookupByUUID(golibvirt.UUID(id))
	if err != nil {
		return fmt.Errorf("looking up domain %s: %w", spec.Name, err)
	}
	if err := c.l.DomainReset(dom, 0); err != nil {
		return fmt.Errorf("resetting domain %s: %w", spec.Name, err)
	}
	return nil
}

// RestartMachine reaches the machine's host.
func (s *hostSet) RestartMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) error {
	c, err := s.client(spec.Location)
	if err != nil {
		return err
	}
	return c.RestartMachine(ctx, spec, record)
}
