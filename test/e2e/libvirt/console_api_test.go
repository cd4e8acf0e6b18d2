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
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestConsoleThroughTheAPI (issue 34): virtualmachines/NAME/console as a
// user reaches it, through kube-apiserver's aggregation proxy, banlieue's
// API server and the libvirt provider's console endpoint, to the real
// guest's serial shell. A command typed there runs (its arithmetic comes
// back worked out); a second attach is refused naming who holds the
// console; a takeover ends the first session saying by whom; once a client
// goes, its console is free again; powering the VM off ends the session
// with a reason.
func TestConsoleThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	vm, p := bootedGuest(t, "console-api")
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Console == nil || p.Status.Console.Endpoint == "" {
			return fmt.Errorf("Provider %s publishes no console endpoint yet", p.Name)
		}
		return nil
	})

	first := attachAPI(t, vm, false)
	token := strings.ToUpper(randomHex(t))
	first.typeLine(t, fmt.Sprintf("echo %s$((6*7))", token))
	first.wait(t, token+"42", 30*time.Second)

	// One session per console: refused, naming the holder.
	refused := attachAPI(t, vm, false)
	if err := refused.ended(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("a second attach: %v; want it refused as in use", err)
	} else {
		t.Logf("a second attach: %v", err)
	}

	// A takeover ends the first session, saying so.
	second := attachAPI(t, vm, true)
	if err := first.ended(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("the first session after a takeover: %v; want ended as taken over", err)
	}
	token2 := strings.ToUpper(randomHex(t))
	second.typeLine(t, fmt.Sprintf("echo %s$((6*7))", token2))
	second.wait(t, token2+"42", 30*time.Second)

	// The client goes: the console is free for an attach without takeover.
	second.leave()
	_ = second.ended(t, 30*time.Second)
	var third *apiSession
	eventually(t, 30*time.Second, func() error {
		s := attachAPI(t, vm, false)
		token3 := strings.ToUpper(randomHex(t))
		s.typeLine(t, fmt.Sprintf("echo %s$((6*7))", token3))
		if err := s.waitOrEnd(token3+"42", 15*time.Second); err != nil {
			s.leave()
			return err
		}
		third = s
		return nil
	})

	// The VM powers off: the session ends with the reason.
	setPower(t, vm, "PoweredOff")
	if err := third.ended(t, 2*time.Minute); err == nil || !strings.Contains(err.Error(), "console stream ended") {
		t.Errorf("the session after the power-off: %v; want ended with the reason", err)
	}
}

// apiSession is a console attached through kube-apiserver as
// client-go's websocket executor attaches (what kubectl banlieue console
// uses), with what it printed so far.
type apiSession struct {
	in     *io.PipeWriter
	cancel context.CancelFunc
	mu     sync.Mutex
	out    bytes.Buffer
	err    error
	done   chan struct{}
}

func attachAPI(t *testing.T, vm *v1alpha1.VirtualMachine, takeover bool) *apiSession {
	t.Helper()
	u := env.Admin.Host + "/apis/banlieue.io/v1alpha1/namespaces/" + vm.Namespace + "/virtualmachines/" + vm.Name + "/console"
	if takeover {
		u += "?takeover=true"
	}
	exec, err := remotecommand.NewWebSocketExecutor(rest.CopyConfig(env.Admin), "GET", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	s := &apiSession{in: inW, cancel: cancel, done: make(chan struct{})}
	go func() {
		err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: s, Tty: true})
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	}()
	t.Cleanup(s.leave)
	return s
}

func (s *apiSession) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

func (s *apiSession) text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

func (s *apiSession) typeLine(t *testing.T, line string) {
	t.Helper()
	go func() { _, _ = io.WriteString(s.in, line+"\n") }()
}

func (s *apiSession) wait(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	if err := s.waitOrEnd(want, timeout); err != nil {
		t.Fatal(err)
	}
}

// waitOrEnd waits for want on the console; an error when the session
// ended or the time ran out first.
func (s *apiSession) waitOrEnd(want string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		if strings.Contains(s.text(), want) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("the session ended (%v) before %q; read: %q", s.err, want, s.text())
		case <-deadline:
			return fmt.Errorf("no %q on the console after %s; read: %q", want, timeout, s.text())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// ended waits for the session to end and returns how.
func (s *apiSession) ended(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		t.Fatalf("the session has not ended after %s; read: %q", timeout, s.text())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// leave is the client going away.
func (s *apiSession) leave() {
	s.cancel()
	_ = s.in.Close()
}
