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
// uses), for the end-to-end tests of every backend; and counts a
// process's goroutines (GoroutinesIn, AllStacks) for the tests that check
// a session leaves none behind.
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

// Transcript is what a console client printed and how it ended: the
// API session below, or a kubectl-banlieue console process.
type Transcript struct {
	mu   sync.Mutex
	out  bytes.Buffer
	err  error
	done chan struct{}
}

// NewTranscript is an empty transcript of a client still running.
func NewTranscript() *Transcript { return &Transcript{done: make(chan struct{})} }

// Write is the console's output arriving.
func (tr *Transcript) Write(p []byte) (int, error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.out.Write(p)
}

// Text is what the console printed so far.
func (tr *Transcript) Text() string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.out.String()
}

// End records how the client ended; once.
func (tr *Transcript) End(err error) {
	tr.mu.Lock()
	tr.err = err
	tr.mu.Unlock()
	close(tr.done)
}

// Done is closed once the client ended.
func (tr *Transcript) Done() <-chan struct{} { return tr.done }

// Err is how the client ended (nil while it runs, or when it ended
// without an error).
func (tr *Transcript) Err() error {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.err
}

// Read is the transcript of a console stream read as a client reads it:
// a goroutine copies what r yields until a read fails, and ends the
// transcript with that error (io.EOF included).
func Read(r io.Reader) *Transcript {
	tr := NewTranscript()
	go func() {
		b := make([]byte, 4096)
		for {
			n, err := r.Read(b)
			_, _ = tr.Write(b[:n])
			if err != nil {
				tr.End(err)
				return
			}
		}
	}()
	return tr
}

// Wait fails the test unless want is printed within timeout.
func (tr *Transcript) Wait(t *testing.T, want string, timeout time.Duration) {
	t.Helper()
	if err := tr.WaitOrEnd(want, timeout); err != nil {
		t.Fatal(err)
	}
}

// WaitOrEnd waits for want on the console; an error when the client
// ended or the time ran out first.
func (tr *Transcript) WaitOrEnd(want string, timeout time.Duration) error {
	deadline := time.After(timeout)
	for {
		if strings.Contains(tr.Text(), want) {
			return nil
		}
		select {
		case <-tr.done:
			return fmt.Errorf("the console client ended (%v) before %q; read: %q", tr.err, want, tr.Text())
		case <-deadline:
			return fmt.Errorf("no %q on the console after %s; read: %q", want, timeout, tr.Text())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Ended waits for the client to end and returns how.
func (tr *Transcript) Ended(t *testing.T, timeout time.Duration) error {
	t.Helper()
	select {
	case <-tr.done:
	case <-time.After(timeout):
		t.Fatalf("the console client has not ended after %s; read: %q", timeout, tr.Text())
	}
	tr.mu.Lock()
	defer tr.mu.Unlock()
	return tr.err
}

// Session is an attached console and what it printed so far.
type Session struct {
	*Transcript
	in     *io.PipeWriter
	cancel context.CancelFunc
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
	s := &Session{Transcript: NewTranscript(), in: inW, cancel: cancel}
	go func() {
		s.End(exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: s.Transcript, Tty: true}))
	}()
	t.Cleanup(s.Leave)
	return s
}

// TypeLine types line and a newline.
func (s *Session) TypeLine(line string) { TypeLine(s.in, line) }

// TypeLine writes line and a newline to a console's input, without
// waiting for it to be read.
func TypeLine(in io.Writer, line string) {
	go func() { _, _ = io.WriteString(in, line+"\n") }()
}

// Leave is the client going away.
func (s *Session) Leave() {
	s.cancel()
	_ = s.in.Close()
}
