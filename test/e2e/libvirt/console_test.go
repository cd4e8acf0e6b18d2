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
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt"
)

// TestConsoleOnLibvirt: the libvirt backend's serial console (issue 34) on
// a VM the provider built, reached as the provider reaches its backend (a
// session of libvirt.Sessions, opened here by the test process itself on
// the daemon's local socket: the backend's own calls are under test, and
// this process's goroutines are the ones it counts). A command
// typed into the guest's shell runs there (its arithmetic comes back
// worked out); a second session without force is ErrConsoleBusy, with
// force it takes over and the first one's reads end; closing leaves no
// goroutine in this process and no client on libvirtd, and frees the
// console for a new session without force (through a Provider of named
// hosts this time: the multi-host backend forwards the call); powering
// the VM off ends that session's reads, and a stopped VM has no console.
func TestConsoleOnLibvirt(t *testing.T) {
	ctx := context.Background()
	vm, p := bootedGuest(t, "console")
	domain := providers.BackendName(ns, vm.Name)
	lm := machineOf(t, vm)
	spec := providers.MachineSpec{Name: domain, InstanceUUID: string(lm.UID), Location: failuredomain.Location{Host: p.Status.FailureDomains[0].Host}}

	sessions := libvirt.NewSessions(libvirt.Options{DomainType: "qemu"})
	t.Cleanup(func() { sessions.Forget("console-test/one"); sessions.Forget("console-test/hosts"); sessions.Wait() })
	backend, err := sessions.Get(ctx, "console-test/one", providers.Connection{Endpoint: daemon.URI})
	if err != nil {
		t.Fatal(err)
	}
	consoles, ok := backend.(providers.Consoles)
	if !ok {
		t.Fatalf("the libvirt backend (%T) has no console", backend)
	}
	// The baseline: this process with its session to libvirtd logged in,
	// and libvirtd's clients with it.
	goroutines := runtime.NumGoroutine()
	libvirtStacks := consoletest.GoroutinesIn("github.com/digitalocean/go-libvirt")
	clients, err := daemon.Clients()
	if err != nil {
		t.Fatal(err)
	}

	first := openConsole(t, consoles, spec, false)
	if got, err := daemon.Clients(); err != nil {
		t.Fatal(err)
	} else if len(got) != len(clients)+1 {
		t.Errorf("libvirtd clients with a console open: %d, want %d (one connection per session)\nbefore: %v\nnow: %v", len(got), len(clients)+1, clients, got)
	} else {
		t.Logf("libvirtd clients: %d before, %d with a console open", len(clients), len(got))
	}
	token := strings.ToUpper(randomHex(t))
	// The input echoes back as typed: only a shell that ran it prints
	// the token followed by 42.
	if _, err := fmt.Fprintf(first, "echo %s$((6*7))\n", token); err != nil {
		t.Fatal(err)
	}
	first.wait(t, token+"42", 30*time.Second)

	second, err := consoles.OpenConsole(ctx, spec, false)
	if !errors.Is(err, providers.ErrConsoleBusy) {
		if second != nil {
			_ = second.Close()
		}
		t.Fatalf("a second console without force: %v; want ErrConsoleBusy", err)
	}
	t.Logf("second console without force: %v", err)

	forced := openConsole(t, consoles, spec, true)
	endErr := first.ended(t, 20*time.Second)
	t.Logf("the first session's read after the takeover: %v", endErr)
	// The session that took over is a working console.
	token2 := strings.ToUpper(randomHex(t))
	if _, err := fmt.Fprintf(forced, "echo %s$((6*7))\n", token2); err != nil {
		t.Fatal(err)
	}
	forced.wait(t, token2+"42", 30*time.Second)
	if _, err := first.s.Write([]byte("echo late\n")); err == nil {
		t.Error("a write to the session that was taken over succeeded")
	}
	_ = first.s.Close()
	_ = forced.s.Close()
	forced.ended(t, 5*time.Second)

	eventually(t, 20*time.Second, func() error {
		if n := consoletest.GoroutinesIn("github.com/digitalocean/go-libvirt"); n != libvirtStacks {
			return fmt.Errorf("%d goroutines in go-libvirt, %d before the sessions", n, libvirtStacks)
		}
		if n := runtime.NumGoroutine(); n > goroutines {
			return fmt.Errorf("%d goroutines, %d before the sessions:\n%s", n, goroutines, consoletest.AllStacks())
		}
		got, err := daemon.Clients()
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(clients) {
			return fmt.Errorf("libvirtd clients %v, before the sessions %v", got, clients)
		}
		return nil
	})
	t.Logf("after closing: %d goroutines (%d before), %d in go-libvirt as before, %d libvirtd clients as before",
		runtime.NumGoroutine(), goroutines, libvirtStacks, len(clients))

	// A Provider of named hosts (one here): the set forwards the call to
	// the machine's host. The console is free again: no force needed.
	hosts, err := sessions.Get(ctx, "console-test/hosts", providers.Connection{Hosts: []providers.Host{{Name: spec.Location.Host, Endpoint: daemon.URI}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := hosts.(providers.Consoles); !ok {
		t.Fatalf("the libvirt backend of hosts (%T) has no console", hosts)
	}
	last := openConsole(t, hosts.(providers.Consoles), spec, false)
	token3 := strings.ToUpper(randomHex(t))
	if _, err := fmt.Fprintf(last, "echo %s$((6*7))\n", token3); err != nil {
		t.Fatal(err)
	}
	last.wait(t, token3+"42", 30*time.Second)
	setPower(t, vm, "PoweredOff")
	endErr = last.ended(t, 2*time.Minute)
	t.Logf("the session's read after the power-off: %v", endErr)
	if !strings.Contains(daemon.SerialLog(domain), token3+"42") {
		t.Errorf("the serial log file lacks what the shell printed on the console:\n%s", daemon.SerialLog(domain))
	}
	_ = last.s.Close()
	eventually(t, time.Minute, func() error {
		s, err := consoles.OpenConsole(ctx, spec, false)
		if s != nil {
			_ = s.Close()
		}
		if !errors.Is(err, providers.ErrNoConsole) {
			return fmt.Errorf("console of the powered-off VM: %v; want ErrNoConsole", err)
		}
		return nil
	})
}

// session is an open console and what has been read from it so far, by a
// goroutine that reads until the stream ends.
type session struct {
	s io.ReadWriteCloser
	*consoletest.Transcript
}

func openConsole(t *testing.T, consoles providers.Consoles, spec providers.MachineSpec, force bool) *session {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := consoles.OpenConsole(ctx, spec, force)
	if err != nil {
		t.Fatalf("opening the console (force %v): %v", force, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	out := &session{s: s, Transcript: consoletest.Read(s)}
	return out
}

func (s *session) Write(p []byte) (int, error) { return s.s.Write(p) }

// wait waits for want among what the console printed.
func (s *session) wait(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		if got := s.Text(); !strings.Contains(got, want) {
			return fmt.Errorf("no %q on the console; read so far: %q", want, got)
		}
		return nil
	})
}

// ended waits for the session's reads to end and returns how they ended.
func (s *session) ended(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-s.Done():
	case <-time.After(timeout):
		t.Fatalf("the console's reads have not ended after %s; read: %q", timeout, s.Text())
	}
	return s.Err()
}

func randomHex(t *testing.T) string {
	t.Helper()
	b := make([]byte, 8)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}
