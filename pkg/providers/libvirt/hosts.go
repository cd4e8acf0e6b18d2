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
	"sync"
	"sync/atomic"
	"time"

	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// hostRetry is how soon an unreachable host is tried again (in the
// background, when a caller asks for it).
const hostRetry = 10 * time.Second

// hostSet is a Provider's hosts, one connection each. A Provider of one
// endpoint is a set of one, used as that host's Client directly. In a set
// of several, a host that cannot be reached fails only its own callers, at
// once and saying why; Inventory reports it; it is tried again in the
// background. The other hosts keep serving.
type hostSet struct {
	hosts  []*hostSlot
	opts   Options
	closed atomic.Bool
}

// hostSlot is one host of a set.
type hostSlot struct {
	name string
	conn providers.Connection

	// mu guards the fields below; it is never held across a call to the host.
	mu       sync.Mutex
	client   *Client
	err      error // why client is nil
	lastTry  time.Time
	retrying bool
}

var _ providers.Backend = &hostSet{}

func (s *hostSet) backend() providers.Backend {
	if len(s.hosts) == 1 && s.hosts[0].name == "" {
		return s.hosts[0].client
	}
	return s
}

// connectAll logs in to the endpoint, or to every host at once. A set of
// hosts fails only when none can be reached.
func connectAll(ctx context.Context, conn providers.Connection, opts Options) (*hostSet, error) {
	set := &hostSet{opts: opts}
	if len(conn.Hosts) == 0 {
		c, err := Connect(ctx, conn, opts)
		if err != nil {
			return nil, err
		}
		set.hosts = []*hostSlot{{client: c}}
		return set, nil
	}
	var wg sync.WaitGroup
	for _, h := range conn.Hosts {
		one := conn
		one.Endpoint, one.Hosts = h.Endpoint, nil
		slot := &hostSlot{name: h.Name, conn: one, lastTry: time.Now()}
		set.hosts = append(set.hosts, slot)
		wg.Go(func() { slot.client, slot.err = connectHost(ctx, slot.name, one, opts) })
	}
	wg.Wait()
	var errs []error
	for _, slot := range set.hosts {
		if slot.err != nil {
			errs = append(errs, slot.err)
		}
	}
	if len(errs) == len(set.hosts) {
		return nil, errors.Join(errs...)
	}
	return set, nil
}

// connectHost logs in to one host of a set, naming it.
func connectHost(ctx context.Context, name string, conn providers.Connection, opts Options) (*Client, error) {
	c, err := Connect(ctx, conn, opts)
	if err != nil {
		return nil, fmt.Errorf("host %s: %w", name, err)
	}
	c.host = name
	return c, nil
}

// alive: a single host is connected; a set has a host connected (the
// others heal on their own).
func (s *hostSet) alive() bool {
	for _, h := range s.hosts {
		h.mu.Lock()
		ok := h.client != nil && h.client.l.IsConnected()
		h.mu.Unlock()
		if ok {
			return true
		}
	}
	return false
}

// close logs out of every host at once, within ctx.
func (s *hostSet) close(ctx context.Context) {
	s.closed.Store(true)
	var wg sync.WaitGroup
	for _, h := range s.hosts {
		h.mu.Lock()
		c := h.client
		h.client, h.err = nil, errors.New("logged out")
		h.mu.Unlock()
		if c != nil {
			wg.Go(func() { _ = c.Close(ctx) })
		}
	}
	wg.Wait()
}

// client is the host of location, or why it cannot be used now.
func (s *hostSet) client(location failuredomain.Location) (*Client, error) {
	for _, h := range s.hosts {
		if h.name == location.Host {
			return s.get(h)
		}
	}
	return nil, fmt.Errorf("the Provider has no host %q", location.Host)
}

// get returns h's connection; a lost or missing one is an error at once,
// and starts a reconnect in the background unless one ran lately.
func (s *hostSet) get(h *hostSlot) (*Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		if h.client.l.IsConnected() {
			return h.client, nil
		}
		h.client.closeNow()
		h.client, h.err = nil, fmt.Errorf("host %s: the connection was lost", h.name)
	}
	if !h.retrying && time.Since(h.lastTry) >= hostRetry && !s.closed.Load() {
		h.retrying, h.lastTry = true, time.Now()
		go s.reconnect(h)
	}
	return nil, fmt.Errorf("%w (tried %s ago)", h.err, time.Since(h.lastTry).Round(time.Second))
}

// reconnect logs in to h again, within the login deadline.
func (s *hostSet) reconnect(h *hostSlot) {
	ctx, cancel := context.WithTimeout(context.Background(), providers.DefaultLoginTimeout)
	defer cancel()
	c, err := connectHost(ctx, h.name, h.conn, s.opts)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.retrying = false
	if err != nil {
		h.err = err
		return
	}
	if s.closed.Load() {
		c.closeNow()
		return
	}
	h.client, h.err = c, nil
}

// Inventory is every host: one location each, the unreachable ones
// included (they are configured, and their machines still belong here)
// and named in a providers.DegradedError. Hosts are asked at once, so a
// host that does not answer delays nobody past the call's deadline.
func (s *hostSet) Inventory(ctx context.Context) ([]failuredomain.Location, error) {
	errs := make([]error, len(s.hosts))
	var wg sync.WaitGroup
	for i, h := range s.hosts {
		wg.Go(func() {
			c, err := s.get(h)
			if err == nil {
				_, err = c.Inventory(ctx)
			}
			errs[i] = err
		})
	}
	wg.Wait()
	var out []failuredomain.Location
	degraded := &providers.DegradedError{}
	for i, h := range s.hosts {
		out = append(out, failuredomain.Location{Host: h.name})
		if errs[i] != nil {
			degraded.Unreachable = append(degraded.Unreachable, errs[i].Error())
		}
	}
	switch len(degraded.Unreachable) {
	case 0:
		return out, nil
	case len(s.hosts):
		return nil, errors.Join(errs...)
	}
	return out, degraded
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

// ImportedImage, ImportImage and DeleteImportedImage reach the location's
// host: each host of a set keeps its own imported images.
func (s *hostSet) ImportedImage(ctx context.Context, location failuredomain.Location, t providers.ImageTarget) (string, bool, error) {
	c, err := s.client(location)
	if err != nil {
		return "", false, err
	}
	return c.ImportedImage(ctx, location, t)
}

func (s *hostSet) ImportImage(ctx context.Context, location failuredomain.Location, t providers.ImageTarget, body io.Reader) (string, error) {
	c, err := s.client(location)
	if err != nil {
		return "", err
	}
	return c.ImportImage(ctx, location, t, body)
}

func (s *hostSet) DeleteImportedImage(ctx context.Context, location failuredomain.Location, t providers.ImageTarget) error {
	c, err := s.client(location)
	if err != nil {
		return err
	}
	return c.DeleteImportedImage(ctx, location, t)
}

var _ providers.ImageImporter = &hostSet{}
