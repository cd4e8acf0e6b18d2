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
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
	"time"

	goproxmox "github.com/luthermonson/go-proxmox"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

const (
	consoleUser = "console@pve"
	consolePass = "serial-secret"
)

// consoleBackend is a simulator with a console user holding VM.Console
// alone, and a backend whose Secret names it.
func consoleBackend(t *testing.T) (*pvesim.Simulator, *Client) {
	t.Helper()
	sim := pvesim.New(pvesim.Options{TaskDelay: 20 * time.Millisecond, AgentDelay: 50 * time.Millisecond,
		Users: []pvesim.User{{ID: consoleUser, Password: consolePass, ACL: []pvesim.ACL{{Path: "/vms", Privileges: []string{"VM.Console"}}}}}})
	t.Cleanup(sim.Close)
	conn := connection(sim, sim.Secret)
	conn.Credentials.ConsoleUsername, conn.Credentials.ConsolePassword = consoleUser, consolePass
	c, err := Connect(context.Background(), conn, Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return sim, c
}

// readUntil reads r until its output holds want (or 5 s pass, or it ends).
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	got := make(chan string, 1)
	go func() {
		var b strings.Builder
		buf := make([]byte, 256)
		for !strings.Contains(b.String(), want) {
			n, err := r.Read(buf)
			b.Write(buf[:n])
			if err != nil {
				break
			}
		}
		got <- b.String()
	}()
	select {
	case s := <-got:
		if !strings.Contains(s, want) {
			t.Fatalf("the console ended without %q: %q", want, s)
		}
		return s
	case <-time.After(5 * time.Second):
		t.Fatalf("no %q from the console within 5 s", want)
	}
	return ""
}

// consoleGoroutines are the goroutines of a console session in this
// process: go-proxmox's websocket workers, the stream's own, the
// simulator's termproxy.
func consoleGoroutines() []string {
	var out []string
	for _, g := range strings.Split(consoletest.AllStacks(), "\n\n") {
		if strings.Contains(g, "go-proxmox.(*Client).VNCWebSocket") || strings.Contains(g, "proxmox.(*consoleStream)") ||
			strings.Contains(g, "pvesim.(*Simulator).qmTerminal") || strings.Contains(g, "pvesim.(*Simulator).vncWebsocket") {
			out = append(out, g)
		}
	}
	return out
}

// settled waits until the goroutine count is back to at most base and no
// console goroutine is left.
func settled(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		left := consoleGoroutines()
		n := runtime.NumGoroutine()
		if len(left) == 0 && n <= base {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Close: %d goroutines (%d before the console), console goroutines left:\n%s", n, base, strings.Join(left, "\n\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestConsoleEcho: a VM built the normal way has serial0: socket; its
// console reaches the simulator's stand-in shell, which gets the input
// and answers echo with the arithmetic expanded; Close ends every
// goroutine the session started, here and in the simulator.
func TestConsoleEcho(t *testing.T) {
	sim, c := consoleBackend(t)
	ctx := context.Background()
	spec := machine("team.console", "5c0e5a1e-0000-4c0e-8a1e-000000000034")
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	if vms := namedVMs(sim, spec.Name); len(vms) != 1 || vms[0].Config["serial0"] != "socket" || vms[0].Status != "running" {
		t.Fatalf("VMs %+v: want one running, with serial0: socket", vms)
	}
	// Idle keep-alive connections of the API client are no leak of
	// the console's: closed before counting.
	c.httpClient.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()

	actx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	st, err := c.OpenConsole(actx, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	if got := readUntil(t, st, "$ "); !strings.Contains(got, "stand-in") {
		t.Errorf("no stand-in banner: %q", got)
	}
	if r, ok := st.(interface{ Resize(cols, rows uint16) error }); !ok {
		t.Error("the stream has no Resize")
	} else if err := r.Resize(120, 40); err != nil {
		t.Error(err)
	}
	if _, err := io.WriteString(st, "echo TOKEN$((6*7))\r"); err != nil {
		t.Fatal(err)
	}
	got := readUntil(t, st, "TOKEN42")
	if !strings.Contains(got, "echo TOKEN$((6*7))") {
		t.Errorf("the input did not come back as typed: %q", got)
	}
	if err := st.Close(); err != nil {
		t.Error(err)
	}
	if _, err := st.Read(make([]byte, 8)); err != io.EOF {
		t.Errorf("a read after Close: %v, want EOF", err)
	}
	if _, err := st.Write([]byte("x")); err == nil {
		t.Error("a write after Close succeeded")
	}
	c.httpClient.CloseIdleConnections()
	settled(t, base)
}

// TestConsoleEndsWithVM: stopping the VM ends the stream (EOF), and the
// stream's Close still cleans up.
func TestConsoleEndsWithVM(t *testing.T) {
	sim, c := consoleBackend(t)
	ctx := context.Background()
	spec := machine("team.stops", "5c0e5a1e-0000-4c0e-8a1e-000000000035")
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	c.httpClient.CloseIdleConnections()
	time.Sleep(50 * time.Millisecond)
	base := runtime.NumGoroutine()
	st, err := c.OpenConsole(ctx, spec, false)
	if err != nil {
		t.Fatal(err)
	}
	readUntil(t, st, "$ ")
	vm := namedVMs(sim, spec.Name)[0]
	token := goproxmox.NewClient(sim.URL, goproxmox.WithHTTPClient(sim.Client()), goproxmox.WithAPIToken(sim.TokenID, sim.Secret))
	task, err := token.NodeRef(vm.Node).VirtualMachineRef(vm.VMID).Stop(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := task.Wait(ctx, 10*time.Millisecond, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	ended := make(chan error, 1)
	go func() {
		_, err := io.Copy(io.Discard, st)
		ended <- err
	}()
	select {
	case err := <-ended:
		if err != nil {
			t.Errorf("the stream ended with %v, want EOF", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the stream outlived the VM")
	}
	_ = st.Close()
	c.httpClient.CloseIdleConnections()
	sim.Client().CloseIdleConnections() // the token client's, above
	settled(t, base)
}

// TestConsoleRefused: no VM, a VM off, a VM without serial port (made
// before banlieue gave one: it gets it while off, at the next converge)
// and a Secret without console user are ErrNoConsole, with why.
func TestConsoleRefused(t *testing.T) {
	sim, c := consoleBackend(t)
	ctx := context.Background()
	spec := machine("team.old", "5c0e5a1e-0000-4c0e-8a1e-000000000036")
	if _, err := c.OpenConsole(ctx, spec, false); !errors.Is(err, providers.ErrNoConsole) || !strings.Contains(err.Error(), "no VM") {
		t.Errorf("no VM: %v", err)
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	// As a VM made before: serial0 taken away while off.
	vm := namedVMs(sim, spec.Name)[0]
	token := goproxmox.NewClient(sim.URL, goproxmox.WithHTTPClient(sim.Client()), goproxmox.WithAPIToken(sim.TokenID, sim.Secret))
	ref := token.NodeRef(vm.Node).VirtualMachineRef(vm.VMID)
	for _, step := range []func(context.Context) (*goproxmox.Task, error){ref.Stop,
		func(ctx context.Context) (*goproxmox.Task, error) {
			return ref.Config(ctx, goproxmox.VirtualMachineOption{Name: "delete", Value: "serial0"})
		}, ref.Start} {
		task, err := step(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := task.Wait(ctx, 10*time.Millisecond, 5*time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenConsole(ctx, spec, false); !errors.Is(err, providers.ErrNoConsole) || !strings.Contains(err.Error(), "serial0: socket") {
		t.Errorf("no serial port: %v", err)
	}
	// Converged while it runs: no serial port (PVE would keep it
	// pending, and converge would restart the VM for it).
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	if v := namedVMs(sim, spec.Name)[0]; v.Config["serial0"] != nil || v.Boots != 2 {
		t.Errorf("a running VM was given serial0 or restarted: %v, %d boots", v.Config["serial0"], v.Boots)
	}
	off := spec
	off.PowerState, off.PowerOffMode = infrav1.PowerStatePoweredOff, infrav1.PowerOffModeHard
	for i := 0; i < 2; i++ {
		if _, err := c.EnsureMachine(ctx, off, (&recorder{}).record); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.OpenConsole(ctx, off, false); !errors.Is(err, providers.ErrNoConsole) || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("VM off: %v", err)
	}
	if v := namedVMs(sim, spec.Name)[0]; v.Config["serial0"] != "socket" {
		t.Errorf("converged while off, the VM has serial0 %v", v.Config["serial0"])
	}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatal(err)
	}
	st, err := c.OpenConsole(ctx, spec, false)
	if err != nil {
		t.Fatalf("after the power cycle: %v", err)
	}
	readUntil(t, st, "stand-in")
	_ = st.Close()

	noUser, err := Connect(ctx, connection(sim, sim.Secret), Options{TaskPoll: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := noUser.OpenConsole(ctx, spec, false); !errors.Is(err, providers.ErrNoConsole) || !strings.Contains(err.Error(), "consoleUsername") {
		t.Errorf("no console user: %v", err)
	}
	sim.AddUser(pvesim.User{ID: "auditor@pve", Password: "a", ACL: []pvesim.ACL{{Path: "/vms", Privileges: []string{"VM.Audit"}}}})
	c.console = providers.Credentials{Username: "auditor@pve", Password: "a"}
	if _, err := c.OpenConsole(ctx, spec, false); err == nil || !strings.Contains(err.Error(), "VM.Console") {
		t.Errorf("a console user without VM.Console: %v", err)
	}
}
