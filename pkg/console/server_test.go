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

package console

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/firestoned/banlieue/pkg/providers"
)

// upperGuest stands for a guest's serial line in this unit test of the
// server alone (the e2e tests attach to real guests): it answers each
// line with the line in capitals.
type upperGuest struct {
	toGuest   *io.PipeWriter
	fromGuest *io.PipeReader
	closed    *atomic.Int32
	once      sync.Once
}

func newUpperGuest(closed *atomic.Int32) *upperGuest {
	inR, inW := io.Pipe()
	outR, outW := io.Pipe()
	go func() {
		sc := bufio.NewScanner(inR)
		for sc.Scan() {
			if _, err := fmt.Fprintln(outW, strings.ToUpper(sc.Text())); err != nil {
				return
			}
		}
		_ = outW.CloseWithError(io.EOF)
	}()
	return &upperGuest{toGuest: inW, fromGuest: outR, closed: closed}
}

func (g *upperGuest) Read(p []byte) (int, error)  { return g.fromGuest.Read(p) }
func (g *upperGuest) Write(p []byte) (int, error) { return g.toGuest.Write(p) }
func (g *upperGuest) Close() error {
	g.once.Do(func() {
		_ = g.toGuest.Close()
		_ = g.fromGuest.Close()
		g.closed.Add(1)
	})
	return nil
}

// syncBuffer is a Buffer a test reads while the executor writes it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type fixture struct {
	srv     *Server
	http    *httptest.Server
	url     string
	opened  atomic.Int32
	closed  atomic.Int32
	guests  chan *upperGuest
	openErr error
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	f := &fixture{guests: make(chan *upperGuest, 8)}
	f.srv = &Server{
		Client: "system:serviceaccount:banlieue-apiserver:banlieue-apiserver",
		// Tokens as TokenReview answers them: each valid for one
		// audience only.
		Authenticate: func(_ context.Context, token, audience string) (string, error) {
			switch {
			case token == "apiserver-token" && audience == ProviderAudience("ns/p1"):
				return "system:serviceaccount:banlieue-apiserver:banlieue-apiserver", nil
			case token == "apiserver-token-p2" && audience == ProviderAudience("ns/p2"):
				return "system:serviceaccount:banlieue-apiserver:banlieue-apiserver", nil
			case token == "tenant-token" && audience == ProviderAudience("ns/p1"):
				return "system:serviceaccount:tenant:default", nil
			}
			return "", errors.New("token not valid")
		},
		Open: func(_ context.Context, tg Target, _ bool) (io.ReadWriteCloser, error) {
			if f.openErr != nil {
				return nil, f.openErr
			}
			if tg.Name != "vm-1" {
				return nil, ErrNotServed
			}
			f.opened.Add(1)
			g := newUpperGuest(&f.closed)
			f.guests <- g
			return g, nil
		},
	}
	hs := httptest.NewTLSServer(f.srv)
	t.Cleanup(hs.Close)
	f.url, f.http = hs.URL, hs
	return f
}

// attach opens the console as client-go's websocket executor does, until
// ctx ends; its result arrives on the returned channel.
func (f *fixture) attach(ctx context.Context, t *testing.T, token, name, query string, stdin io.Reader, stdout io.Writer) <-chan error {
	t.Helper()
	cfg := &rest.Config{Host: f.url, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	if query == "" {
		query = "?provider=ns/p1"
	} else {
		query += "&provider=ns/p1"
	}
	u := f.url + Target{Namespace: "ns", Resource: "libvirtmachines", Name: name}.Path() + query
	exec, err := remotecommand.NewWebSocketExecutor(cfg, "GET", u)
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan error, 1)
	go func() {
		out <- exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: stdin, Stdout: stdout, Tty: true})
	}()
	return out
}

func eventually(t *testing.T, what string, ok func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !ok() {
		if time.Now().After(deadline) {
			t.Fatalf("not within 10s: %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func waitErr(t *testing.T, ch <-chan error) error {
	t.Helper()
	select {
	case err := <-ch:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the session did not end within 10s")
		return nil
	}
}

// TestSession: what is typed reaches the guest and its answer comes
// back; a second attach is refused naming who holds it; a takeover ends
// the first session with its reason; a guest that ends, and a client that
// goes, end theirs; every session releases its backend stream, and no
// goroutine is left.
func TestSession(t *testing.T) {
	before := runtime.NumGoroutine()
	f := newFixture(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	inR, inW := io.Pipe()
	out := &syncBuffer{}
	first := f.attach(ctx, t, "apiserver-token", "vm-1", "", inR, out)
	eventually(t, "a session", func() bool { return f.srv.Sessions() == 1 && f.opened.Load() == 1 })
	if _, err := io.WriteString(inW, "echo banlieue\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the guest's answer", func() bool { return strings.Contains(out.String(), "ECHO BANLIEUE") })

	// A second attach is refused, naming the holder.
	err := waitErr(t, f.attach(ctx, t, "apiserver-token", "vm-1", "", strings.NewReader(""), io.Discard))
	if err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("second attach: %v, want refused as in use", err)
	}
	if f.opened.Load() != 1 {
		t.Errorf("a refused attach opened the backend console (%d opens)", f.opened.Load())
	}

	// A takeover ends the first session with its reason.
	in2R, in2W := io.Pipe()
	out2 := &syncBuffer{}
	second := f.attach(ctx, t, "apiserver-token", "vm-1", "?takeover=true", in2R, out2)
	if err := waitErr(t, first); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("first session after a takeover: %v, want ended as taken over", err)
	}
	_ = inW.Close()
	eventually(t, "the first stream released", func() bool { return f.closed.Load() == 1 })
	eventually(t, "the takeover attached", func() bool { return f.opened.Load() == 2 && f.srv.Sessions() == 1 })
	if _, err := io.WriteString(in2W, "still here\n"); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the second session's answer", func() bool { return strings.Contains(out2.String(), "STILL HERE") })

	// The guest ends: the session ends, saying so.
	g := <-f.guests
	g = <-f.guests // the second session's
	_ = g.toGuest.Close()
	if err := waitErr(t, second); err == nil || !strings.Contains(err.Error(), "console stream ended") {
		t.Errorf("session whose guest ended: %v, want ended with the reason", err)
	}
	_ = in2W.Close()
	eventually(t, "the second stream released", func() bool { return f.closed.Load() == 2 && f.srv.Sessions() == 0 })

	// The client goes: its session ends and releases the stream.
	cctx, ccancel := context.WithCancel(ctx)
	in3R, in3W := io.Pipe()
	third := f.attach(cctx, t, "apiserver-token", "vm-1", "", in3R, io.Discard)
	eventually(t, "a third session", func() bool { return f.srv.Sessions() == 1 })
	ccancel()
	_ = in3W.Close()
	_ = waitErr(t, third)
	eventually(t, "the third stream released", func() bool { return f.closed.Load() == 3 && f.srv.Sessions() == 0 })

	cancel()
	f.srv.Close()
	f.http.Close() // its connections' goroutines outlive sessions by design
	// The last to go is client-go's websocket heartbeat, at its next
	// beat (5 s).
	eventually(t, fmt.Sprintf("goroutines back to %d", before), func() bool { return runtime.NumGoroutine() <= before })
}

// TestRefusals: only the API server's identity attaches; a machine not
// served here, and the backend's answers, are refused with their reason.
func TestRefusals(t *testing.T) {
	f := newFixture(t)
	ctx := context.Background()
	for _, tc := range []struct {
		name, token, vm string
		openErr         error
		want            string
	}{
		{"no valid token", "nonsense", "vm-1", nil, "token not valid"},
		{"another identity", "tenant-token", "vm-1", nil, "is not banlieue's API server"},
		{"the API server's token for another Provider", "apiserver-token-p2", "vm-1", nil, "token not valid"},
		{"not served here", "apiserver-token", "vm-2", nil, "not found"},
		{"held by another backend client", "apiserver-token", "vm-1", fmt.Errorf("virsh console holds it: %w", providers.ErrConsoleBusy), "takeover=true"},
		{"no console", "apiserver-token", "vm-1", fmt.Errorf("domain is shut off: %w", providers.ErrNoConsole), "has no console"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.openErr = tc.openErr
			err := waitErr(t, f.attach(ctx, t, tc.token, tc.vm, "", strings.NewReader(""), io.Discard))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("attach: %v, want %q in it", err, tc.want)
			}
			if f.srv.Sessions() != 0 {
				t.Errorf("%d sessions left", f.srv.Sessions())
			}
		})
	}
}
