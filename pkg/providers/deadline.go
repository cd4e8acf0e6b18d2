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
	"io"
	"time"

	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// Default deadlines of backend calls.
const (
	// DefaultCallTimeout bounds a call that awaits no task: an inventory
	// walk, an image check, a guest address read.
	DefaultCallTimeout = 30 * time.Second
	// DefaultMachineTimeout bounds EnsureMachine and DeleteMachine, which
	// await tasks (recorded first, so a call cut short resumes the task
	// instead of starting another).
	DefaultMachineTimeout = 15 * time.Minute
)

// Deadlines are the longest a backend call may take.
type Deadlines struct {
	Call, Machine time.Duration
	// backend is the class the calls are recorded under (Bounded's).
	backend string
}

// call bounds one call of operation by timeout (none when 0) and returns
// its context and what ends it: done(err) cancels the context and records
// the call's duration and error (BackendCallDuration, BackendCallErrors).
func (d Deadlines) call(ctx context.Context, operation string, timeout time.Duration) (_ context.Context, done func(error)) {
	start := time.Now()
	var cancel context.CancelFunc
	if timeout > 0 {
		ctx, cancel = context.WithTimeout(ctx, timeout)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	return ctx, func(err error) {
		cancel()
		observe(d.backend, operation, start, err)
	}
}

func (d Deadlines) withDefaults() Deadlines {
	if d.Call <= 0 {
		d.Call = DefaultCallTimeout
	}
	if d.Machine <= 0 {
		d.Machine = DefaultMachineTimeout
	}
	return d
}

// Bounded returns b with a deadline on every call, whatever context the
// caller passes: a backend that stops answering fails the call instead of
// holding a worker forever. A GuestAddressReader stays one. Every call
// (the optional interfaces' too) is timed and its errors counted under
// backend, the Provider class ("proxmox").
func Bounded(b Backend, backend string, d Deadlines) Backend {
	d = d.withDefaults()
	d.backend = backend
	bb := &bounded{b: b, d: d}
	if r, ok := b.(GuestAddressReader); ok {
		return &boundedReader{bounded: bb, r: r}
	}
	return bb
}

type bounded struct {
	b Backend
	d Deadlines
}

func (b *bounded) Inventory(ctx context.Context) ([]failuredomain.Location, error) {
	ctx, done := b.d.call(ctx, "Inventory", b.d.Call)
	locs, err := b.b.Inventory(ctx)
	done(err)
	return locs, err
}

func (b *bounded) ImageExists(ctx context.Context, location failuredomain.Location, ref string) (bool, error) {
	ctx, done := b.d.call(ctx, "ImageExists", b.d.Call)
	found, err := b.b.ImageExists(ctx, location, ref)
	done(err)
	return found, err
}

func (b *bounded) EnsureMachine(ctx context.Context, spec MachineSpec, record TaskRecorder) (MachineStatus, error) {
	ctx, done := b.d.call(ctx, "EnsureMachine", b.d.Machine)
	status, err := b.b.EnsureMachine(ctx, spec, record)
	done(err)
	return status, err
}

func (b *bounded) DeleteMachine(ctx context.Context, spec MachineSpec, record TaskRecorder) error {
	ctx, done := b.d.call(ctx, "DeleteMachine", b.d.Machine)
	err := b.b.DeleteMachine(ctx, spec, record)
	done(err)
	return err
}

type boundedReader struct {
	*bounded
	r GuestAddressReader
}

func (b *boundedReader) GuestAddress(ctx context.Context, spec MachineSpec) (string, bool, error) {
	ctx, done := b.d.call(ctx, "GuestAddress", b.d.Call)
	addr, steady, err := b.r.GuestAddress(ctx, spec)
	done(err)
	return addr, steady, err
}

func (b *bounded) unbounded() (Backend, Deadlines) { return b.b, b.d }

// unwrap is the backend under Bounded's wrapper and its deadlines (the
// defaults for a backend not wrapped): where the optional interfaces
// (ImageImporter, Consoles, ...) are asked, each then bounded its way.
func unwrap(b Backend) (Backend, Deadlines) {
	if bb, ok := b.(interface{ unbounded() (Backend, Deadlines) }); ok {
		return bb.unbounded()
	}
	return b, Deadlines{}.withDefaults()
}

// Importer is b's ImageImporter, its lookups bounded like every call and
// its deletes like a machine's (an import itself is bounded by its
// caller, as it lasts as long as its bytes take); false when b's backend
// imports nothing.
func Importer(b Backend) (ImageImporter, bool) {
	b, d := unwrap(b)
	imp, ok := b.(ImageImporter)
	if !ok {
		return nil, false
	}
	return boundedImporter{imp: imp, d: d}, true
}

type boundedImporter struct {
	imp ImageImporter
	d   Deadlines
}

func (b boundedImporter) ImportedImage(ctx context.Context, location failuredomain.Location, t ImageTarget) (string, bool, error) {
	ctx, done := b.d.call(ctx, "ImportedImage", b.d.Call)
	ref, found, err := b.imp.ImportedImage(ctx, location, t)
	done(err)
	return ref, found, err
}

func (b boundedImporter) ImportImage(ctx context.Context, location failuredomain.Location, t ImageTarget, body io.Reader) (string, error) {
	ctx, done := b.d.call(ctx, "ImportImage", 0)
	ref, err := b.imp.ImportImage(ctx, location, t, body)
	done(err)
	return ref, err
}

func (b boundedImporter) DeleteImportedImage(ctx context.Context, location failuredomain.Location, t ImageTarget) error {
	ctx, done := b.d.call(ctx, "DeleteImportedImage", b.d.Machine)
	err := b.imp.DeleteImportedImage(ctx, location, t)
	done(err)
	return err
}
