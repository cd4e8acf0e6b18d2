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

// Package consoletest attaches to virtualmachines/NAME/console as a user
// does (client-go's websocket executor, what kubectl banlieue console
// uses), for the end-to-end tests of every backend.
package consoletest

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
)

// Session is an attached console and what it printed so far.
type Session struct {
	in     *io.PipeWriter
	cancel context.CancelFunc
	mu     sync.Mutex
	out    bytes.Buffer
	err    error
	done   chan struct{}
}

// Attach attaches to VM namespace/name's console through cfg's server
// (kube-apiserver), taking it over when takeover; the session is left at
// the test's end.
func Attach(t *testing.T, cfg *rest.Config, namespace, name string, takeover bool) *Session {
	t.Helper()
	u := cfg.Host + "/apis/banlieue.io/v1alpha1/namespaces/" + namespace + "/virtualmachines/" + name + "/console"
	if takeover {
		u += "?takeover=true"
	}
	exec, err := remotecommand.NewWebSocketExecutor(rest.CopyConfig(cfg), "GET", u)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	s := &Session{in: inW, cancel: cancel, done: make(chan struct{})}
	go func() {
		err := exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: s, Tty: true})
		s.mu.Lock()
		s.err = err
		s.mu.Unlock()
		close(s.done)
	}()
	t.Cleanup(s.Leave)
	return s
}

// Write is the console's output arriving.
func (s *Session) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.Write(p)
}

// Text is what the console printed so far.
func (s *Session) Text() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.out.String()
}

// TypeLine types line and a newline.
func (s *Session) TypeLine(line string) {
	go func() { _, _ = io.WriteString(s.in, line+"\n") }()
}

// Wait fails the test unless want is printed within timeout.
func (s *Session) Wait(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	if err := s.WaitOrEnd(want, timeout); err != nil {
		t.Fatal(err)
	}
}

// WaitOrEnd waits for want on the console; an error when the session
// ended or the time ran out first.
func (s *Session) WaitOrEnd(want string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		if strings.Contains(s.Text(), want) {
			return nil
		}
		select {
		case <-s.done:
			return fmt.Errorf("the session ended (%v) before %q; read: %q", s.err, want, s.Text())
		case <-deadline:
			return fmt.Errorf("no %q on the console after %s; read: %q", want, timeout, s.Text())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ended waits for the session to end and returns how.
func (s *Session) Ended(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		t.Fatalf("the session has not ended after %s; read: %q", timeout, s.Text())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err
}

// Leave is the client going away.
func (s *Session) Leave() {
	s.cancel()
	_ = s.in.Close()
}
