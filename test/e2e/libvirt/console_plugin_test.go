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
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestConsolePlugin (issue 34): kubectl banlieue console, the built
// kubectl-banlieue run as a process with the environment's kubeconfig and
// its input a pipe (not a terminal), on a real guest's serial shell: a
// command typed there runs; a second attach fails naming the holder; a
// takeover ends the first, which fails saying so; a client closing its
// input leaves cleanly; a power-off ends the session with the reason and a
// non-zero exit.
func TestConsolePlugin(t *testing.T) {
	plugin := filepath.Join(filepath.Dir(kubectlBin), "kubectl-banlieue")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: build it first (make build)", err)
	}
	ctx := context.Background()
	vm, p := bootedGuest(t, "console-plugin")
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Console == nil || p.Status.Console.Endpoint == "" {
			return fmt.Errorf("Provider %s publishes no console endpoint yet", p.Name)
		}
		return nil
	})

	first := startPluginConsole(t, plugin, vm.Name)
	first.typeLine("echo TOKEN$((6*7))")
	first.Wait(t, "TOKEN42", 30*time.Second)

	// One session per console: the second attach fails, naming the holder.
	refused := startPluginConsole(t, plugin, vm.Name)
	if stderr, err := refused.exited(t, 30*time.Second); err == nil || !strings.HasPrefix(stderr, "error: ") || !strings.Contains(stderr, "in use by") {
		t.Errorf("a second attach: %v, stderr %q; want a failure saying the console is in use", err, stderr)
	} else {
		t.Logf("a second attach: %s", stderr)
	}

	// A takeover ends the first session: it fails, saying so.
	second := startPluginConsole(t, plugin, vm.Name, "--takeover")
	if stderr, err := first.exited(t, 30*time.Second); err == nil || !strings.Contains(stderr, "taken over") {
		t.Errorf("the first session after a takeover: %v, stderr %q; want a failure saying it was taken over", err, stderr)
	} else {
		t.Logf("the first session after a takeover: %s", stderr)
	}
	token := strings.ToUpper(randomHex(t))
	second.typeLine(fmt.Sprintf("echo %s$((6*7))", token))
	second.Wait(t, token+"42", 30*time.Second)

	// The client closes its input: it leaves, and that is no failure.
	_ = second.in.Close()
	if stderr, err := second.exited(t, 30*time.Second); err != nil {
		t.Errorf("a session whose input ended: %v, stderr %q; want a clean exit", err, stderr)
	}

	// On a terminal (script(1) gives the process a pseudo-terminal, its
	// input our pipe): raw mode, so Ctrl+] reaches the plugin as a byte,
	// which detaches, a clean exit. The console is free again once the
	// last session's release has gone through.
	var tty *pluginConsole
	eventually(t, 30*time.Second, func() error {
		s := startPluginConsoleOnTTY(t, plugin, vm.Name)
		tok := strings.ToUpper(randomHex(t))
		s.typeLine(fmt.Sprintf("echo %s$((6*7))", tok))
		if err := s.WaitOrEnd(tok+"42", 15*time.Second); err != nil {
			_ = s.in.Close()
			return err
		}
		tty = s
		return nil
	})
	go func() { _, _ = tty.in.Write([]byte{0x1d}) }()
	if _, err := tty.exited(t, 30*time.Second); err != nil || !strings.Contains(tty.Text(), "Detached from the console of "+ns+"/"+vm.Name) {
		t.Errorf("Ctrl+] on a terminal: %v; want a clean exit saying it detached; read: %q", err, tty.Text())
	}

	// The console is free again; the VM powers off: the session ends with
	// the reason and a failure.
	var third *pluginConsole
	eventually(t, 30*time.Second, func() error {
		s := startPluginConsole(t, plugin, vm.Name)
		tok := strings.ToUpper(randomHex(t))
		s.typeLine(fmt.Sprintf("echo %s$((6*7))", tok))
		if err := s.WaitOrEnd(tok+"42", 15*time.Second); err != nil {
			_ = s.in.Close()
			return err
		}
		third = s
		return nil
	})
	setPower(t, vm, "PoweredOff")
	if stderr, err := third.exited(t, 2*time.Minute); err == nil || !strings.Contains(stderr, "console stream ended") {
		t.Errorf("the session after the power-off: %v, stderr %q; want a failure with the reason", err, stderr)
	} else {
		t.Logf("the session after the power-off: %s", stderr)
	}
}

// pluginConsole is a kubectl-banlieue console process, its input a pipe,
// its stdout the transcript, its exit the transcript's end.
type pluginConsole struct {
	*consoletest.Transcript
	cmd    *exec.Cmd
	in     io.WriteCloser
	mu     sync.Mutex
	stderr bytes.Buffer
}

func startPluginConsole(t *testing.T, plugin, name string, extra ...string) *pluginConsole {
	t.Helper()
	args := append([]string{"console", name, "-n", ns, "--kubeconfig", env.AdminKubeconfig}, extra...)
	return startConsoleProcess(t, exec.Command(plugin, args...))
}

// startPluginConsoleOnTTY runs kubectl-banlieue console under script(1),
// on a pseudo-terminal whose input is the returned pipe and whose output
// (the plugin's stdout and stderr both) is read.
func startPluginConsoleOnTTY(t *testing.T, plugin, name string) *pluginConsole {
	t.Helper()
	line := strings.Join([]string{plugin, "console", name, "-n", ns, "--kubeconfig", env.AdminKubeconfig}, " ")
	return startConsoleProcess(t, exec.Command("script", "--quiet", "--return", "--command", line, "/dev/null"))
}

func startConsoleProcess(t *testing.T, cmd *exec.Cmd) *pluginConsole {
	t.Helper()
	s := &pluginConsole{Transcript: consoletest.NewTranscript(), cmd: cmd}
	s.cmd.Stdout = s.Transcript
	s.cmd.Stderr = lockedWriter{&s.mu, &s.stderr}
	in, err := s.cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.in = in
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { s.End(s.cmd.Wait()) }()
	t.Cleanup(func() {
		_ = s.in.Close()
		select {
		case <-s.Done():
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.Done()
		}
	})
	return s
}

type lockedWriter struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (w lockedWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.Write(p)
}

func (s *pluginConsole) typeLine(line string) { consoletest.TypeLine(s.in, line) }

// exited waits for the process to exit and returns how, with its stderr.
func (s *pluginConsole) exited(t *testing.T, timeout time.Duration) (string, error) {
	t.Helper()
	err := s.Ended(t, timeout)
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stderr.String(), err
}
