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

// Package power is the one power state machine of every backend: given
// the desired and observed power state, the power-off mode and how long
// ago the guest was asked to shut down, it says what to do next. A backend
// implements the primitive actions only (Backend), so PoweredOff,
// Suspended and the power-off modes mean the same on vSphere, libvirt and
// Proxmox VE.
package power

import (
	"context"
	"errors"
	"fmt"
	"time"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// DefaultGrace is how long TrySoft waits for the guest when neither the
// machine nor the provider says: long enough for a server's services to
// stop, short enough that a hung guest does not hold a power-off for long.
const DefaultGrace = 2 * time.Minute

// Action is one step towards the desired power state.
type Action string

const (
	// None: the VM is in the desired state.
	None Action = "None"
	// Start boots a powered-off VM.
	Start Action = "Start"
	// Resume starts a suspended VM from its saved memory.
	Resume Action = "Resume"
	// Suspend saves a running VM's memory to disk and stops it.
	Suspend Action = "Suspend"
	// SoftOff asks the guest to shut down (vSphere Tools, ACPI); the time
	// of the request is recorded first.
	SoftOff Action = "SoftOff"
	// HardOff cuts the power (and drops a suspended VM's saved memory).
	HardOff Action = "HardOff"
	// Wait: the guest was asked to shut down and still has time; look again.
	Wait Action = "Wait"
)

// State is what Next decides from.
type State struct {
	Desired, Observed infrav1.PowerState
	// Mode is how PoweredOff is reached; TrySoft when empty.
	Mode infrav1.PowerOffMode
	// Grace is how long TrySoft waits after the soft request.
	Grace time.Duration
	// SoftRequested is when the guest was asked to shut down for this
	// power-off; zero when it was not.
	SoftRequested time.Time
	// Now is the time of the decision.
	Now time.Time
}

// Next is the next action from s. Reaching PoweredOff from Suspended with
// Soft or TrySoft resumes the VM first: a saved guest cannot hear a
// shutdown request, and dropping its memory is what Hard is for. Reaching
// Suspended from PoweredOff starts the VM first: only a running VM has
// memory to save. Soft never cuts the power; after each grace period it
// asks the guest again, as a request sent while the guest was booting is
// lost.
func Next(s State) Action {
	if s.Desired == s.Observed {
		return None
	}
	switch s.Desired {
	case infrav1.PowerStatePoweredOn:
		if s.Observed == infrav1.PowerStateSuspended {
			return Resume
		}
		return Start
	case infrav1.PowerStateSuspended:
		if s.Observed == infrav1.PowerStatePoweredOff {
			return Start
		}
		return Suspend
	case infrav1.PowerStatePoweredOff:
		mode := s.Mode
		if mode == "" {
			mode = infrav1.PowerOffModeTrySoft
		}
		switch {
		case mode == infrav1.PowerOffModeHard:
			return HardOff
		case s.Observed == infrav1.PowerStateSuspended:
			return Resume
		case s.SoftRequested.IsZero():
			return SoftOff
		case s.Now.Sub(s.SoftRequested) < s.Grace:
			// A request time ahead of the clock (skew between the
			// provider's restarts) waits too.
			return Wait
		case mode == infrav1.PowerOffModeTrySoft:
			return HardOff
		default:
			return SoftOff
		}
	}
	return None
}

// ErrSoftUnavailable is a backend's answer to SoftOff when the guest
// cannot be asked (no VMware Tools running): TrySoft then powers off hard
// at once, Soft reports it.
var ErrSoftUnavailable = errors.New("the guest cannot be asked to shut down")

// Backend is what a backend does to one VM: the primitive actions and a
// fresh reading of its power state.
type Backend interface {
	Observe(ctx context.Context) (infrav1.PowerState, error)
	Start(ctx context.Context) error
	// Resume starts the VM from the memory Suspend saved.
	Resume(ctx context.Context) error
	// Suspend saves the VM's memory to disk and stops it.
	Suspend(ctx context.Context) error
	// SoftOff asks the guest to shut down and returns without waiting for
	// it; ErrSoftUnavailable when the guest cannot be asked.
	SoftOff(ctx context.Context) error
	// HardOff powers the VM off, dropping any saved memory.
	HardOff(ctx context.Context) error
}

// Request is one power call: where to go, how, and the record of an
// earlier soft request.
type Request struct {
	Desired infrav1.PowerState
	Mode    infrav1.PowerOffMode
	Grace   time.Duration
	// SoftRequested is the recorded time of the soft request in flight.
	SoftRequested time.Time
	// Record persists the time of a soft request before it is sent; nil
	// records nothing (the grace period then starts again on every call).
	Record func(ctx context.Context, at time.Time) error
	// Now is the clock; time.Now when nil.
	Now func() time.Time
}

// maxSteps bounds Drive: the longest path (Suspended to PoweredOff with
// TrySoft: resume, soft off, hard off) is three steps.
const maxSteps = 4

// Drive takes the VM towards r.Desired step by step, as far as it can
// without waiting for the guest: it returns once the VM is there, or the
// guest was asked to shut down and has time left (the caller looks again;
// the VM still reports its old state).
func Drive(ctx context.Context, b Backend, r Request) error {
	now := r.Now
	if now == nil {
		now = time.Now
	}
	softRequested := r.SoftRequested
	for range maxSteps {
		observed, err := b.Observe(ctx)
		if err != nil {
			return fmt.Errorf("reading the power state: %w", err)
		}
		a := Next(State{Desired: r.Desired, Observed: observed, Mode: r.Mode, Grace: r.Grace, SoftRequested: softRequested, Now: now()})
		switch a {
		case None, Wait:
			return nil
		case Start:
			err = b.Start(ctx)
		case Resume:
			err = b.Resume(ctx)
		case Suspend:
			err = b.Suspend(ctx)
		case HardOff:
			err = b.HardOff(ctx)
		case SoftOff:
			at := now()
			if r.Record != nil {
				if err := r.Record(ctx, at); err != nil {
					return fmt.Errorf("recording the shutdown request: %w", err)
				}
			}
			err = b.SoftOff(ctx)
			if errors.Is(err, ErrSoftUnavailable) && r.Mode != infrav1.PowerOffModeSoft {
				err = b.HardOff(ctx)
				a = HardOff
			}
			if err == nil && a == SoftOff {
				return nil // the guest has its grace period
			}
			softRequested = at
		default:
			return fmt.Errorf("unknown power action %q", a)
		}
		if err != nil {
			return fmt.Errorf("%s towards %s: %w", a, r.Desired, err)
		}
	}
	return fmt.Errorf("power state %s not reached in %d steps", r.Desired, maxSteps)
}
