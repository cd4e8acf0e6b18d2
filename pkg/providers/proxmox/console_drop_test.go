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

package proxmox

import (
	"context"
	"io"
	"net"
	"net/url"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
	"github.com/firestoned/banlieue/pkg/proxytest"
)

// TestConsoleBackendDrop: a console session whose vncwebsocket connection
// is cut on the way (issue 34) ends cleanly. The backend reaches the
// simulator through a TCP proxy; once the session's shell answered, the
// proxy closes the session's websocket connection, both ends (nothing
// else: the Provider's API connections stay). The session's reads end
// within a bound, a write fails, Close returns; no goroutine of the
// session is left here or in the simulator (its termproxy and qm
// terminal), and no more goroutines than before. The VM's serial port is
// not left held: a new session hears the guest's shell at once (a port
// still held would keep it waiting in line, silent), and the Provider's
// connection serves calls.
func TestConsoleBackendDrop(t *testing.T) {
	sim := pvesim.New(pvesim.Options{TaskDelay: 20 * time.Millisecond, AgentDelay: 50 * time.Millisecond,
		Users: []pvesim.User{{ID: consoleUser, Password: consolePass, ACL: []pvesim.ACL{{Path: "/vms", Privileges: []string{"VM.Console"}}}}}})
	t.Cleanup(sim.Close)
	// A TCP proxy to the simulator (TLS passes through: the simulator's
	// certificate is for 127.0.0.1, the proxy's address too).
	u, err := url.Parse(sim.URL)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	upstream := u.Host
	p := proxytest.Start(t, ln, func() (net.Conn, error) { return net.Dial("tcp", upstream) })
	u.Host = ln.Addr().String()
	conn := connection(sim, sim.Secret)
	conn.Endpoint = u.String()
	conn.Credentials.ConsoleUsername, conn.Credentials.ConsolePassword = consoleUser, consolePass
	c, err := Connect(context.Background(), conn, Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	spec := machine("team.drop", "5c0e5a1e-0000-4c0e-8a1e-000000000037")
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	// Idle keep-alive connections of the API client are no leak of the
	// console's: closed, and their proxying ended, before counting.
	c.httpClient.CloseIdleConnections()
	idle(t, p)
	base := runtime.NumGoroutine()

	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	before := p.Accepted()
	st, err := c.OpenConsole(actx, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	opened := p.Accepted()
	if opened <= before {
		t.Fatalf("the console opened no connection through the proxy (%d before, %d after)", before, opened)
	}
	readUntil(t, st, "$ ")
	if _, err := io.WriteString(st, "echo DROP$((6*7))\r"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, st, "DROP42")

	// The websocket is the session's last connection: its API requests
	// (login, termproxy) come first, on a client of its own.
	p.Cut(opened - 1)
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, st)
		ended <- err
	}()
	select {
	case err := <-ended:
		t.Logf("the session's reads ended after the cut (io.Copy: %v)", err)
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived its connection by 5 s")
	}
	if _, err := st.Write([]byte("echo late\r")); err == nil {
		t.Error("a write to the session whose connection was cut succeeded")
	}
	closed := make(chan error, 1)
	go func() { closed <- st.Close() }()
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatalf("Close has not returned in 5 s:\n%s", consoletest.AllStacks())
	}
	if _, err := st.Read(make([]byte, 8)); err != io.EOF {
		t.Errorf("a read after Close: %v, want EOF", err)
	}
	c.httpClient.CloseIdleConnections()
	settled(t, base)

	// The serial port is free: a new session hears the shell (the
	// banner and prompt come only once it holds the port).
	again, err := c.OpenConsole(actx, spec, false)
	if err != nil {
		t.Fatalf("a console after the cut: %v", err)
	}
	if got := readUntil(t, again, "$ "); !strings.Contains(got, "stand-in") {
		t.Errorf("no stand-in banner on the new session: %q", got)
	}
	if _, err := io.WriteString(again, "echo AGAIN$((6*7))\r"); err != nil {
		t.Fatal(err)
	}
	readUntil(t, again, "AGAIN42")
	if err := again.Close(); err != nil {
		t.Error(err)
	}
	if vms := namedVMs(sim, spec.Name); len(vms) != 1 || vms[0].Status != "running" {
		t.Errorf("VMs after the sessions: %+v, want the one, running", vms)
	}
	c.httpClient.CloseIdleConnections()
	settled(t, base)
}

// idle waits until no connection is being proxied.
func idle(t *testing.T, p *proxytest.Proxy) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		live := p.Live()
		if live == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still proxied 5 s after the client closed its idle ones", live)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
