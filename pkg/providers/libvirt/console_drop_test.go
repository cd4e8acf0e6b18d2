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
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/proxytest"
)

// TestConsoleBackendDrop: a console session whose libvirt connection
// drops under it (issue 34) ends cleanly. Two ways the connection goes,
// each on a live session whose shell answered first:
//
//   - libvirtd drops the client (virt-admin client-disconnect, libvirt's
//     admin API, on the session's own client id);
//   - the connection is cut on the way (a unix-socket proxy between the
//     Provider and libvirtd closes the session's connection, both ends),
//     the Provider's own connection through the same proxy untouched.
//
// Either way: the session's reads end within a bound, a write fails,
// Close returns, and afterwards this process has no more goroutines (none
// in go-libvirt) and libvirtd no more clients than before the session;
// the console is not left held: a new session without force attaches and
// its shell answers, and closing that one leaves nothing either.
func TestConsoleBackendDrop(t *testing.T) {
	ctx := context.Background()
	c := connect(t)
	spec := providers.MachineSpec{Name: "console-drop", HostName: "console-drop", InstanceUUID: "3e5d0c1a-7b2f-4e8a-9c6d-0a1b2c3d4e5f",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks: []providers.Disk{{Name: "root", SizeGiB: 1}}, PowerState: v1alpha1.PowerStatePoweredOn}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(context.Background(), spec, (&recorder{}).record) })
	waitSerial(t, spec.Name, "BANLIEUE-READY")

	t.Run("libvirtd drops the client", func(t *testing.T) {
		before := takeCounts(t)
		s := openDropSession(t, c, spec)
		id := newClient(t, before.clients)
		s.shellAnswers(t)

		out, err := exec.Command("virt-admin", "-c", daemon.AdminURI(), "client-disconnect", "libvirtd", id).CombinedOutput()
		if err != nil {
			t.Fatalf("virt-admin client-disconnect libvirtd %s: %v\n%s", id, err, out)
		}
		s.endsCleanly(t, before)
		again := openDropSession(t, c, spec)
		again.shellAnswers(t)
		again.close(t)
		before.settle(t)
	})

	t.Run("the connection is cut", func(t *testing.T) {
		// A unix-socket proxy to libvirtd's.
		socket := filepath.Join(t.TempDir(), "proxy-sock")
		ln, err := net.Listen("unix", socket)
		if err != nil {
			t.Fatal(err)
		}
		p := proxytest.Start(t, ln, func() (net.Conn, error) { return net.Dial("unix", daemon.Socket) })
		viaProxy, err := Connect(ctx, providers.Connection{Endpoint: "qemu+unix:///system?socket=" + socket}, Options{DomainType: "qemu"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = viaProxy.Close(context.Background()) })
		if n := p.Accepted(); n != 1 {
			t.Fatalf("%d connections through the proxy after the login, want 1 (the Provider's)", n)
		}
		before := takeCounts(t)
		s := openDropSession(t, viaProxy, spec)
		if n := p.Accepted(); n != 2 {
			t.Fatalf("%d connections through the proxy with a console open, want 2 (one of the session's own)", n)
		}
		newClient(t, before.clients)
		s.shellAnswers(t)

		p.Cut(1)
		s.endsCleanly(t, before)
		// The Provider's own connection was not the session's.
		if !viaProxy.l.IsConnected() {
			t.Fatal("the Provider's connection dropped with the session's")
		}
		if ok, err := viaProxy.ImageExists(ctx, spec.Location, image); err != nil || !ok {
			t.Errorf("the Provider's connection after the session's was cut: image check %v, %v", ok, err)
		}
		again := openDropSession(t, viaProxy, spec)
		again.shellAnswers(t)
		again.close(t)
		before.settle(t)
	})
}

// counts are what a session may leak: goroutines of this process (and
// those in go-libvirt), libvirtd's clients.
type counts struct {
	goroutines, inLibvirt int
	clients               []string
}

func takeCounts(t *testing.T) counts {
	t.Helper()
	clients, err := daemon.Clients()
	if err != nil {
		t.Fatal(err)
	}
	return counts{goroutines: runtime.NumGoroutine(), inLibvirt: consoletest.GoroutinesIn("github.com/digitalocean/go-libvirt"), clients: clients}
}

// settle waits until nothing counted exceeds before: the same libvirtd
// clients, as many goroutines in go-libvirt, no more goroutines.
func (before counts) settle(t *testing.T) {
	t.Helper()
	var last string
	deadline := time.Now().Add(20 * time.Second)
	for {
		n, inLibvirt := runtime.NumGoroutine(), consoletest.GoroutinesIn("github.com/digitalocean/go-libvirt")
		clients, err := daemon.Clients()
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case inLibvirt != before.inLibvirt:
			last = fmt.Sprintf("%d goroutines in go-libvirt, %d before the session:\n%s", inLibvirt, before.inLibvirt, consoletest.AllStacks())
		case n > before.goroutines:
			last = fmt.Sprintf("%d goroutines, %d before the session:\n%s", n, before.goroutines, consoletest.AllStacks())
		case !slices.Equal(clients, before.clients):
			last = fmt.Sprintf("libvirtd clients %v, before the session %v", clients, before.clients)
		default:
			t.Logf("settled: %d goroutines (%d before), %d in go-libvirt as before, libvirtd clients as before %v", n, before.goroutines, inLibvirt, clients)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("20 s after the session: %s", last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// newClient is the id of the one libvirtd client that is not in before
// (the session's own connection).
func newClient(t *testing.T, before []string) string {
	t.Helper()
	clients, err := daemon.Clients()
	if err != nil {
		t.Fatal(err)
	}
	var added []string
	for _, c := range clients {
		if !slices.Contains(before, c) {
			added = append(added, c)
		}
	}
	if len(added) != 1 {
		t.Fatalf("libvirtd clients added by opening a console: %v, want one (the session's connection); before: %v", added, before)
	}
	return strings.Fields(added[0])[0]
}

// dropSession is an open console and what has been read from it so far,
// by a goroutine that reads until the stream ends.
type dropSession struct {
	s io.ReadWriteCloser
	*consoletest.Transcript
}

func openDropSession(t *testing.T, c *Client, spec providers.MachineSpec) *dropSession {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.OpenConsole(ctx, spec, false)
	if err != nil {
		t.Fatalf("opening the console: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	out := &dropSession{s: s, Transcript: consoletest.Read(s)}
	return out
}

// shellAnswers types a command into the guest's shell and waits for its
// answer: the typed line echoes back as TOKEN$((6*7)), only a shell that
// ran it prints TOKEN42.
func (s *dropSession) shellAnswers(t *testing.T) {
	t.Helper()
	b := make([]byte, 6)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	token := "DR0P" + strings.ToUpper(hex.EncodeToString(b))
	if _, err := fmt.Fprintf(s.s, "\necho %s$((6*7))\n", token); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(s.Text(), token+"42") {
		select {
		case <-s.Done():
			t.Fatalf("the console ended (%v) before the shell's answer %s42: %q", s.Err(), token, s.Text())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %s42 from the guest's shell in 30 s: %q", token, s.Text())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// endsCleanly: the session's connection has dropped; its reads end within
// 20 s, a write fails, Close returns within 10 s, and nothing counted is
// left beyond before.
func (s *dropSession) endsCleanly(t *testing.T, before counts) {
	t.Helper()
	start := time.Now()
	select {
	case <-s.Done():
	case <-time.After(20 * time.Second):
		t.Fatalf("the console's reads have not ended 20 s after its connection dropped; read: %q", s.Text())
	}
	t.Logf("the session's read %v after the drop: %v", time.Since(start).Round(time.Millisecond), s.Err())
	if s.Err() == nil {
		t.Error("the read ended without an error")
	}
	if _, err := s.s.Write([]byte("echo late\n")); err == nil {
		t.Error("a write to the dropped session succeeded")
	}
	s.close(t)
	before.settle(t)
}

// close closes the session, which must return within 10 s and end its
// reads.
func (s *dropSession) close(t *testing.T) {
	t.Helper()
	closed := make(chan error, 1)
	go func() { closed <- s.s.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("Close: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("Close has not returned in 10 s:\n%s", consoletest.AllStacks())
	}
	select {
	case <-s.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("reads go on after Close")
	}
}
