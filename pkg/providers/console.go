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

package providers

import (
	"context"
	"errors"
	"io"
)

// Consoles is implemented by a backend that streams a VM's serial
// console (virtualmachines/NAME/console, docs/design/console.md).
type Consoles interface {
	// OpenConsole attaches to the serial console of the VM spec names,
	// found by its instance UUID as DeleteMachine finds it. The stream
	// carries the guest's bytes both ways; closing it detaches and
	// releases everything the session holds on the backend (its
	// connection included). force takes the console over from a session
	// the backend holds open (another client's); without it such a
	// session is ErrConsoleBusy. The stream ends (a read returns io.EOF
	// or an error) when the VM stops or the backend connection drops.
	// ctx bounds the attach only, not the session.
	OpenConsole(ctx context.Context, spec MachineSpec, force bool) (io.ReadWriteCloser, error)
}

// Errors of OpenConsole, which the console endpoint turns into reasons.
var (
	// ErrConsoleBusy: another session holds the console.
	ErrConsoleBusy = errors.New("the console is in use by another session")
	// ErrNoConsole: the VM has no serial console the backend can reach
	// (not built, not running, or built without one).
	ErrNoConsole = errors.New("the VM has no serial console to attach to")
)

// ConsoleOf is b's Consoles, its attach bounded like a call (the session
// itself is not: it lasts as long as its client); false when b's backend
// streams no console.
func ConsoleOf(b Backend) (Consoles, bool) {
	b, d := unwrap(b)
	c, ok := b.(Consoles)
	if !ok {
		return nil, false
	}
	return boundedConsoles{c: c, d: d}, true
}

type boundedConsoles struct {
	c Consoles
	d Deadlines
}

func (b boundedConsoles) OpenConsole(ctx context.Context, spec MachineSpec, force bool) (io.ReadWriteCloser, error) {
	ctx, done := b.d.call(ctx, "OpenConsole", b.d.Call)
	stream, err := b.c.OpenConsole(ctx, spec, force)
	done(err)
	return stream, err
}

// Resizer is a console stream that passes the client's terminal size on
// (Proxmox VE's termproxy); others ignore it.
type Resizer interface {
	Resize(cols, rows uint16) error
}

// Restarter is implemented by a backend that resets a running VM
// (virtualmachines/NAME/restart).
type Restarter interface {
	// RestartMachine resets the VM spec names, as its reset button would;
	// record is called with the backend task before it is awaited. It is
	// called at most once per restart: the caller records that it is
	// about to ask first.
	RestartMachine(ctx context.Context, spec MachineSpec, record TaskRecorder) error
}

// RestarterOf is b's Restarter, bounded as a machine call; false when b's
// backend resets nothing.
func RestarterOf(b Backend) (Restarter, bool) {
	b, d := unwrap(b)
	r, ok := b.(Restarter)
	if !ok {
		return nil, false
	}
	return boundedRestarter{r: r, d: d}, true
}

type boundedRestarter struct {
	r Restarter
	d Deadlines
}

func (b boundedRestarter) RestartMachine(ctx context.Context, spec MachineSpec, record TaskRecorder) error {
	ctx, done := b.d.call(ctx, "RestartMachine", b.d.Machine)
	err := b.r.RestartMachine(ctx, spec, record)
	done(err)
	return err
}
