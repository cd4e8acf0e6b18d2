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
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// fakeBackend answers each call as its fields say.
type fakeBackend struct {
	inventoryErr error
	// ensureBlocks: EnsureMachine waits for its context to end.
	ensureBlocks bool
	snapshotsErr error
}

func (f *fakeBackend) Inventory(context.Context) ([]failuredomain.Location, error) {
	return nil, f.inventoryErr
}

func (f *fakeBackend) ImageExists(context.Context, failuredomain.Location, string) (bool, error) {
	return true, nil
}

func (f *fakeBackend) EnsureMachine(ctx context.Context, _ MachineSpec, _ TaskRecorder) (MachineStatus, error) {
	if f.ensureBlocks {
		<-ctx.Done()
		return MachineStatus{}, fmt.Errorf("awaiting the clone task: %w", ctx.Err())
	}
	return MachineStatus{}, ErrUserDataNeeded
}

func (f *fakeBackend) DeleteMachine(context.Context, MachineSpec, TaskRecorder) error { return nil }

func (f *fakeBackend) SnapshotLimits() SnapshotLimits { return SnapshotLimits{} }

func (f *fakeBackend) ListSnapshots(context.Context, MachineSpec) ([]SnapshotInfo, error) {
	return nil, f.snapshotsErr
}

func (f *fakeBackend) CreateSnapshot(context.Context, MachineSpec, SnapshotSpec, string, TaskRecorder) (SnapshotInfo, error) {
	return SnapshotInfo{}, nil
}

func (f *fakeBackend) RevertSnapshot(context.Context, MachineSpec, string, string, TaskRecorder) error {
	return nil
}

func (f *fakeBackend) DeleteSnapshot(context.Context, MachineSpec, string, string, TaskRecorder) error {
	return nil
}

// TestErrorKind: each error a backend call ends with is counted as its
// kind, wrapped or not; a request for user data is no failure.
func TestErrorKind(t *testing.T) {
	deadline, cancel := context.WithTimeout(context.Background(), 0)
	defer cancel()
	<-deadline.Done()
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, ""},
		{ErrUserDataNeeded, ""},
		{fmt.Errorf("listing nodes: %w", deadline.Err()), ErrorKindTimeout},
		{context.Canceled, ErrorKindCanceled},
		{fmt.Errorf("%w: pve.example: dial tcp: refused", ErrConnect), ErrorKindConnect},
		// A login that outlasted the wait is a connect failure, not a timeout.
		{fmt.Errorf("%w: waiting for the login: %w", ErrConnect, context.DeadlineExceeded), ErrorKindConnect},
		{ErrLoginPending, ErrorKindConnect},
		{fmt.Errorf("vm 42: %w", ErrNoMachine), ErrorKindNotFound},
		{ErrNoSnapshot, ErrorKindNotFound},
		{ErrNoConsole, ErrorKindNotFound},
		{ErrConsoleBusy, ErrorKindBusy},
		{&DegradedError{Unreachable: []string{"esx1: refused"}}, ErrorKindDegraded},
		{errors.New("HTTP 500: internal error"), ErrorKindOther},
	} {
		if got := ErrorKind(c.err); got != c.want {
			t.Errorf("ErrorKind(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// TestBoundedCallMetrics: every call through Bounded, and through the
// optional interfaces' wrappers, is timed under its backend and
// operation; a call its deadline cuts short counts as a timeout, a
// refused connection as connect, a missing VM as notfound; a backend not
// given a class records nothing.
func TestBoundedCallMetrics(t *testing.T) {
	class := uniqueClass("test-bounded")
	f := &fakeBackend{inventoryErr: fmt.Errorf("%w: refused", ErrConnect), ensureBlocks: true, snapshotsErr: ErrNoMachine}
	b := Bounded(f, class, Deadlines{Machine: 20 * time.Millisecond})
	ctx := context.Background()

	calls := func(op string) uint64 { return histogramCount(t, class, op) }
	errs := func(op, kind string) float64 {
		return testutil.ToFloat64(BackendCallErrors.WithLabelValues(class, op, kind))
	}

	if _, err := b.ImageExists(ctx, failuredomain.Location{}, "img"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Inventory(ctx); !errors.Is(err, ErrConnect) {
		t.Fatalf("Inventory: %v", err)
	}
	start := time.Now()
	if _, err := b.EnsureMachine(ctx, MachineSpec{}, nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("EnsureMachine: %v", err)
	}
	took := time.Since(start)
	s, ok := SnapshotsOf(b)
	if !ok {
		t.Fatal("the bounded backend lost its Snapshots")
	}
	if _, err := s.ListSnapshots(ctx, MachineSpec{}); !errors.Is(err, ErrNoMachine) {
		t.Fatalf("ListSnapshots: %v", err)
	}

	for _, op := range []string{"ImageExists", "Inventory", "EnsureMachine", "ListSnapshots"} {
		if n := calls(op); n != 1 {
			t.Errorf("%s: %d calls timed, want 1", op, n)
		}
	}
	if n := errs("ImageExists", ErrorKindOther) + errs("ImageExists", ErrorKindTimeout); n != 0 {
		t.Errorf("a successful ImageExists counted %v errors", n)
	}
	if n := errs("Inventory", ErrorKindConnect); n != 1 {
		t.Errorf("Inventory connect errors = %v, want 1", n)
	}
	if n := errs("EnsureMachine", ErrorKindTimeout); n != 1 {
		t.Errorf("EnsureMachine timeout errors = %v, want 1", n)
	}
	if n := errs("ListSnapshots", ErrorKindNotFound); n != 1 {
		t.Errorf("ListSnapshots notfound errors = %v, want 1", n)
	}
	// The timed-out call's duration is its deadline, not 0.
	if sum := histogramSum(t, class, "EnsureMachine"); sum < 0.02 || sum > took.Seconds()+0.001 {
		t.Errorf("EnsureMachine took %v in total, want [0.02, %v]", sum, took.Seconds())
	}

	// A request for user data is no failure.
	f.ensureBlocks = false
	if _, err := b.EnsureMachine(ctx, MachineSpec{}, nil); !errors.Is(err, ErrUserDataNeeded) {
		t.Fatalf("EnsureMachine: %v", err)
	}
	if n := calls("EnsureMachine"); n != 2 {
		t.Errorf("EnsureMachine: %d calls timed, want 2", n)
	}
	if n := errs("EnsureMachine", ErrorKindOther); n != 0 {
		t.Errorf("ErrUserDataNeeded counted as an error (%v)", n)
	}

	// No class, no series.
	before := testutil.CollectAndCount(BackendCallDuration)
	unclassed, _ := SnapshotsOf(f)
	_, _ = unclassed.ListSnapshots(ctx, MachineSpec{})
	_, _ = Bounded(f, "", Deadlines{}).Inventory(ctx)
	if after := testutil.CollectAndCount(BackendCallDuration); after != before {
		t.Errorf("an unclassed backend's call made %d series", after-before)
	}
}

// histogramCount is how many calls of op on backend were timed.
func histogramCount(t *testing.T, backend, op string) uint64 {
	t.Helper()
	return histogram(t, backend, op).GetSampleCount()
}

func histogramSum(t *testing.T, backend, op string) float64 {
	t.Helper()
	return histogram(t, backend, op).GetSampleSum()
}

func histogram(t *testing.T, backend, op string) *dto.Histogram {
	t.Helper()
	var m dto.Metric
	if err := BackendCallDuration.WithLabelValues(backend, op).(prometheus.Metric).Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetHistogram()
}

// TestSessionMetrics: a login counts by result; the session it opens is
// counted open until it dies or its Provider goes; a login for a
// Provider that had a session is a reconnect.
func TestSessionMetrics(t *testing.T) {
	class := uniqueClass("test-sessions")
	var alive, fail atomic.Bool
	alive.Store(true)
	s := NewSessions(SessionHooks[int]{
		Backend: class,
		Login: func(context.Context, Connection) (int, error) {
			if fail.Load() {
				return 0, fmt.Errorf("%w: refused", ErrConnect)
			}
			return 1, nil
		},
		Alive: func(context.Context, int) bool { return alive.Load() },
	})
	s.FailureBackoff = 0
	open := func() float64 { return testutil.ToFloat64(SessionsOpen.WithLabelValues(class)) }
	logins := func(result string) float64 { return testutil.ToFloat64(SessionLogins.WithLabelValues(class, result)) }
	reconnects := func() float64 { return testutil.ToFloat64(SessionReconnects.WithLabelValues(class)) }
	ctx := context.Background()
	conn := Connection{Endpoint: "https://pve.example:8006"}

	if _, err := s.Get(ctx, "ns/a", conn); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "ns/b", conn); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, "ns/a", conn); err != nil { // cached
		t.Fatal(err)
	}
	if open() != 2 || logins("success") != 2 || reconnects() != 0 {
		t.Fatalf("two Providers logged in: open %v, logins %v, reconnects %v; want 2, 2, 0", open(), logins("success"), reconnects())
	}

	// a's session dies and its login fails: a reconnect, a failure, one
	// session open.
	alive.Store(false)
	fail.Store(true)
	if _, err := s.Get(ctx, "ns/a", conn); !errors.Is(err, ErrConnect) {
		t.Fatalf("a dead session's failed login: %v", err)
	}
	// b's session is found dead at its next Get only.
	if open() != 1 {
		t.Fatalf("open = %v after a's session died, want 1", open())
	}
	if logins("failure") != 1 || reconnects() != 1 {
		t.Fatalf("failures %v, reconnects %v after a's session died; want 1, 1", logins("failure"), reconnects())
	}

	// It comes back.
	alive.Store(true)
	fail.Store(false)
	// The first Get answers with the last failure while the login runs.
	_, _ = s.Get(ctx, "ns/a", conn)
	s.Wait()
	if _, err := s.Get(ctx, "ns/a", conn); err != nil {
		t.Fatal(err)
	}
	if open() != 2 || logins("success") != 3 || reconnects() != 2 {
		t.Fatalf("a reconnected: open %v, logins %v, reconnects %v; want 2, 3, 2", open(), logins("success"), reconnects())
	}

	// A Provider that goes closes its session; a new one of its name
	// logs in afresh, no reconnect.
	s.Forget("ns/b")
	if open() != 1 {
		t.Fatalf("open = %v after b went, want 1", open())
	}
	if _, err := s.Get(ctx, "ns/b", conn); err != nil {
		t.Fatal(err)
	}
	if open() != 2 || reconnects() != 2 {
		t.Fatalf("a new b: open %v, reconnects %v; want 2, 2", open(), reconnects())
	}
	s.Forget("ns/a")
	s.Forget("ns/b")
	s.Wait()
	if open() != 0 {
		t.Fatalf("open = %v with no Provider left, want 0", open())
	}
}

var classes atomic.Int64

// uniqueClass is a backend label no other run of a test has used (the
// metrics are the process's: -count=N runs a test N times).
func uniqueClass(prefix string) string {
	return fmt.Sprintf("%s-%d", prefix, classes.Add(1))
}
