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

	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// hostSet is a Provider's hosts, one connection each. A Provider of one
// endpoint is a set of one, used as that host's Client directly.
type hostSet struct {
	clients []*Client
}

var _ providers.Backend = &hostSet{}

func (s *hostSet) backend() providers.Backend {
	if len(s.clients) == 1 {
		return s.clients[0]
	}
	return s
}

func (s *hostSet) connected() bool {
	for _, c := range s.clients {
		if !c.l.IsConnected() {
			return false
		}
	}
	return true
}

func (s *hostSet) close() {
	for _, c := range s.clients {
		_ = c.Close()
	}
}

// client is the host of location.
func (s *hostSet) client(location failuredomain.Location) (*Client, error) {
	for _, c := range s.clients {
		if c.host == location.Host {
			return c, nil
		}
	}
	return nil, fmt.Errorf("the Provider has no host %q", location.Host)
}

// Inventory is every host: one location each.
func (s *hostSet) Inventory(ctx context.Context) ([]failuredomain.Location, error) {
	var out []failuredomain.Location
	for _, c := range s.clients {
		locs, err := c.Inventory(ctx)
		if err != nil {
			return nil, err
		}
		out = append(out, locs...)
	}
	return out, nil
}

func (s *hostSet) ImageExists(ctx context.Context, location failuredomain.Location, ref string) (bool, error) {
	c, err := s.client(location)
	if err != nil {
		return false, err
	}
	return c.ImageExists(ctx, location, ref)
}

func (s *hostSet) EnsureMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (providers.MachineStatus, error) {
	c, err := s.client(spec.Location)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	return c.EnsureMachine(ctx, spec, record)
}

func (s *hostSet) DeleteMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) error {
	c, err := s.client(spec.Location)
	if err != nil {
		return err
	}
	return c.DeleteMachine(ctx, spec, record)
}
