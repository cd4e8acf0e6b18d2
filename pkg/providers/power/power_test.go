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

package power

import (
	"context"
	"slices"
	"testing"
	"time"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

const (
	on   = infrav1.PowerStatePoweredOn
	off  = infrav1.PowerStatePoweredOff
	susp = infrav1.PowerStateSuspended
)

func TestNext(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	grace := time.Minute
	asked := func(ago time.Duration) time.Time { return now.Add(-ago) }
	cases := []struct {
		name              string
		desired, observed infrav1.PowerState
		mode              infrav1.PowerOffMode
		softRequested     time.Time
		want              Action
	}{
		{"on and on", on, on, "", time.Time{}, None},
		{"off and off", off, off, infrav1.PowerOffModeHard, time.Time{}, None},
		{"suspended and suspended", susp, susp, "", time.Time{}, None},
		{"start", on, off, "", time.Time{}, Start},
		{"resume from saved memory", on, susp, "", time.Time{}, Resume},
		{"suspend a running VM", susp, on, "", time.Time{}, Suspend},
		{"start before suspending", susp, off, "", time.Time{}, Start},
		{"hard", off, on, infrav1.PowerOffModeHard, time.Time{}, HardOff},
		{"hard drops saved memory", off, susp, infrav1.PowerOffModeHard, time.Time{}, HardOff},
		{"hard ignores a soft request", off, on, infrav1.PowerOffModeHard, asked(time.Second), HardOff},
		{"soft asks", off, on, infrav1.PowerOffModeSoft, time.Time{}, SoftOff},
		{"soft waits", off, on, infrav1.PowerOffModeSoft, asked(30 * time.Second), Wait},
		{"soft asks again after the grace", off, on, infrav1.PowerOffModeSoft, asked(2 * time.Minute), SoftOff},
		{"soft resumes a suspended guest first", off, susp, infrav1.PowerOffModeSoft, time.Time{}, Resume},
		{"try-soft asks", off, on, infrav1.PowerOffModeTrySoft, time.Time{}, SoftOff},
		{"try-soft waits within the grace", off, on, infrav1.PowerOffModeTrySoft, asked(59 * time.Second), Wait},
		{"try-soft cuts the power at the grace", off, on, infrav1.PowerOffModeTrySoft, asked(time.Minute), HardOff},
		{"try-soft cuts the power after the grace", off, on, infrav1.PowerOffModeTrySoft, asked(time.Hour), HardOff},
		{"try-soft resumes a suspended guest first", off, susp, infrav1.PowerOffModeTrySoft, time.Time{}, Resume},
		{"empty mode is try-soft", off, on, "", asked(2 * time.Minute), HardOff},
		{"a request from the future waits", off, on, "", now.Add(time.Hour), Wait},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := Next(State{Desired: tc.desired, Observed: tc.observed, Mode: tc.mode, Grace: grace, SoftRequested: tc.softRequested, Now: now})
			if got != tc.want {
				t.Errorf("Next = %s, want %s", got, tc.want)
			}
		})
	}
}

// vm is a VM in memory that obeys the primitives at once and logs them;
// guestListens says whether a soft request turns it off.
type vm struct {
	state        infrav1.PowerState
	guestListens bool
	noTools      bool
	calls        []string
}

func (v *vm) Observe(context.Context) (infrav1.PowerState, error) { return v.state, nil }
func (v *vm) Start(context.Context) error {
	v.calls = append(v.calls, "Start")
	v.state = on
	return nil
}
func (v *vm) Resume(context.Context) error {
	v.calls = append(v.calls, "Resume")
	v.state = on
	return nil
}
func (v *vm) Suspend(context.Context) error {
	v.calls = append(v.calls, "Suspend")
	v.state = susp
	return nil
}
func (v *vm) HardOff(context.Context) error {
	v.calls = append(v.calls, "HardOff")
	v.state = off
	return nil
}
func (v *vm) SoftOff(context.Context) error {
	v.calls = append(v.calls, "SoftOff")
	if v.noTools {
		return ErrSoftUnavailable
	}
	if v.guestListens {
		v.state = off
	}
	return nil
}

func TestDrive(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name       string
		vm         vm
		req        Request
		wantCalls  []string
		wantState  infrav1.PowerState
		wantRecord bool
	}{
		{"suspend from off starts first", vm{state: off}, Request{Desired: susp}, []string{"Start", "Suspend"}, susp, false},
		{"try-soft asks and returns", vm{state: on}, Request{Desired: off, Grace: time.Minute}, []string{"SoftOff"}, on, true},
		{"try-soft past the recorded grace", vm{state: on}, Request{Desired: off, Grace: time.Minute, SoftRequested: now.Add(-2 * time.Minute)}, []string{"HardOff"}, off, false},
		{"try-soft without tools goes hard at once", vm{state: on, noTools: true}, Request{Desired: off, Grace: time.Minute}, []string{"SoftOff", "HardOff"}, off, true},
		{"soft from suspended resumes then asks", vm{state: susp}, Request{Desired: off, Mode: infrav1.PowerOffModeSoft}, []string{"Resume", "SoftOff"}, on, true},
		{"hard from suspended drops the memory", vm{state: susp}, Request{Desired: off, Mode: infrav1.PowerOffModeHard}, []string{"HardOff"}, off, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var recorded time.Time
			tc.req.Record = func(_ context.Context, at time.Time) error { recorded = at; return nil }
			tc.req.Now = func() time.Time { return now }
			v := tc.vm
			if err := Drive(context.Background(), &v, tc.req); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(v.calls, tc.wantCalls) || v.state != tc.wantState || recorded.IsZero() == tc.wantRecord {
				t.Errorf("calls %v, state %s, recorded %v; want %v, %s, recorded %v", v.calls, v.state, recorded, tc.wantCalls, tc.wantState, tc.wantRecord)
			}
		})
	}
	t.Run("soft without tools is an error", func(t *testing.T) {
		v := vm{state: on, noTools: true}
		if err := Drive(context.Background(), &v, Request{Desired: off, Mode: infrav1.PowerOffModeSoft}); err == nil || v.state != on {
			t.Errorf("err %v, state %s; want an error and the VM on", err, v.state)
		}
	})
}
