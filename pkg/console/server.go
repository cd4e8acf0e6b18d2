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

// Package console streams VMs' serial consoles from the process serving
// their Provider to banlieue's API server, which proxies
// virtualmachines/NAME/console to it (docs/design/console.md). The wire
// is Kubernetes' remote command protocol over a websocket
// (v5.channel.k8s.io: stdin, stdout, an error channel, resize), so
// client-go's websocket executor is a client.
package console

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/klog/v2"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/firestoned/banlieue/pkg/providers"
)

// PathPrefix starts a console's path on a provider:
// /console/v1/namespaces/NAMESPACE/RESOURCE/NAME, RESOURCE being the
// machine's (libvirtmachines), NAME the machine's name.
const PathPrefix = "/console/v1/namespaces/"

// RequesterHeader names the user who asked, as the API server
// authenticated them: for logs and a taken-over session's message only.
const RequesterHeader = "X-Banlieue-Requester"

// Target is the machine whose console is asked for, and the Provider
// (NAMESPACE/NAME) it is asked of.
type Target struct {
	Namespace, Resource, Name string
	Provider                  string
}

func (t Target) String() string { return t.Namespace + "/" + t.Resource + "/" + t.Name }

// Path is t's path on a provider's console endpoint (the Provider goes in
// the query, ?provider=).
func (t Target) Path() string { return PathPrefix + t.Namespace + "/" + t.Resource + "/" + t.Name }

// OpenFunc attaches to t's console (providers.Consoles.OpenConsole, the
// machine found): its errors are providers.ErrConsoleBusy,
// providers.ErrNoConsole, ErrNotServed or the backend's.
type OpenFunc func(ctx context.Context, t Target, force bool) (io.ReadWriteCloser, error)

// ErrNotServed: no machine of that name is served by this process.
var ErrNotServed = errors.New("no machine of that name is served here")

// AuthenticateFunc tells who presents a bearer token of audience.
type AuthenticateFunc func(ctx context.Context, token, audience string) (user string, err error)

// Server serves the consoles, to one client identity: one session per
// console; a second attach is refused unless it takes the console over.
type Server struct {
	Open         OpenFunc
	Authenticate AuthenticateFunc
	// Client is the only user allowed: banlieue's API server.
	Client string
	// OpenTimeout bounds the attach; DefaultOpenTimeout when zero.
	OpenTimeout time.Duration

	mu       sync.Mutex
	sessions map[string]*session
	closed   bool
	wg       sync.WaitGroup
}

// DefaultOpenTimeout bounds an attach (the backend's console lookup).
const DefaultOpenTimeout = 30 * time.Second

// idleTimeout closes a session nobody typed into or read from: the
// websocket layer's read and write deadline.
const idleTimeout = 4 * time.Hour

// session is one attached console.
type session struct {
	requester string
	since     time.Time
	// end receives why it is stopped (a Status for its client, nil when
	// the client went); done is closed once it ended and released
	// everything.
	end  chan *apierrors.StatusError
	done chan struct{}
}

// stop ends ss with why for its client; stopping one already ending does
// nothing.
func (ss *session) stop(why *apierrors.StatusError) {
	select {
	case ss.end <- why:
	default:
	}
}

// Sessions is how many consoles are attached.
func (s *Server) Sessions() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.sessions)
}

func (s *Server) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	t, ok := parsePath(req.URL.Path)
	t.Provider = req.URL.Query().Get("provider")
	if !ok || t.Provider == "" {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "console"}, req.URL.Path))
		return
	}
	if err := s.authorize(req, t); err != nil {
		attaches.WithLabelValues("refused").Inc()
		writeStatus(w, err)
		return
	}
	if !wsstream.IsWebSocketRequest(req) {
		writeStatus(w, apierrors.NewBadRequest("a console is a websocket (v5.channel.k8s.io)"))
		return
	}
	requester := req.Header.Get(RequesterHeader)
	takeover := req.URL.Query().Get("takeover") == "true"
	ss, refused := s.claim(t, requester, takeover)
	if refused != nil {
		attaches.WithLabelValues("busy").Inc()
		writeStatus(w, refused)
		return
	}
	defer s.release(t, ss)

	ctx, cancel := context.WithTimeout(req.Context(), s.openTimeout())
	stream, err := s.Open(ctx, t, takeover)
	cancel()
	if err != nil {
		result := "failed"
		if errors.Is(err, ErrNotServed) {
			result = "refused"
		}
		attaches.WithLabelValues(result).Inc()
		writeStatus(w, openError(t, err))
		return
	}
	attaches.WithLabelValues("attached").Inc()
	sessionsOpen.Inc()
	defer sessionsOpen.Dec()
	s.serve(w, req, t, ss, stream)
}

// authorize lets the Client in, with a token for t's Provider; nobody
// else.
func (s *Server) authorize(req *http.Request, t Target) *apierrors.StatusError {
	return authorize(req, t, s.Authenticate, s.Client)
}

// authorize lets client in, with a token for t's Provider that
// authenticate accepts; nobody else. The web consoles share it.
func authorize(req *http.Request, t Target, authenticate AuthenticateFunc, client string) *apierrors.StatusError {
	token, ok := strings.CutPrefix(req.Header.Get("Authorization"), "Bearer ")
	if !ok || token == "" {
		return apierrors.NewUnauthorized("a bearer token is required")
	}
	user, err := authenticate(req.Context(), token, ProviderAudience(t.Provider))
	if err != nil {
		return apierrors.NewUnauthorized(err.Error())
	}
	if user != client {
		return apierrors.NewForbidden(schema.GroupResource{Resource: "console"}, "", fmt.Errorf("%s is not banlieue's API server (%s)", user, client))
	}
	return nil
}

// claim reserves t's console for a new session: refused while another
// holds it, unless takeover, which stops that one and waits for it to
// release the backend.
func (s *Server) claim(t Target, requester string, takeover bool) (*session, *apierrors.StatusError) {
	for {
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			return nil, apierrors.NewServiceUnavailable("the provider is stopping")
		}
		if s.sessions == nil {
			s.sessions = map[string]*session{}
		}
		old := s.sessions[t.String()]
		if old == nil {
			ss := &session{requester: requester, since: time.Now(), end: make(chan *apierrors.StatusError, 1), done: make(chan struct{})}
			s.sessions[t.String()] = ss
			s.wg.Add(1)
			s.mu.Unlock()
			return ss, nil
		}
		s.mu.Unlock()
		if !takeover {
			return nil, busy(t, old.requester, old.since)
		}
		old.stop(conflict(fmt.Sprintf("the console was taken over by %s", orSomeone(requester))))
		<-old.done
	}
}

func (s *Server) release(t Target, ss *session) {
	s.mu.Lock()
	if s.sessions[t.String()] == ss {
		delete(s.sessions, t.String())
	}
	s.mu.Unlock()
	close(ss.done)
	s.wg.Done()
}

// Close ends every session (the provider stops or lost its leadership)
// and waits until they released their backends; later attaches are
// refused.
func (s *Server) Close() {
	s.mu.Lock()
	s.closed = true
	var open []*session
	for _, ss := range s.sessions {
		open = append(open, ss)
	}
	s.mu.Unlock()
	for _, ss := range open {
		ss.stop(apierrors.NewServiceUnavailable("the provider serving this console stopped; attach again"))
	}
	s.wg.Wait()
}

// serve upgrades the request and copies both ways until either side ends
// or the session is stopped; everything is released when it returns.
func (s *Server) serve(w http.ResponseWriter, req *http.Request, t Target, ss *session, stream io.ReadWriteCloser) {
	defer stream.Close()
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommandconsts.StreamProtocolV5Name: {Binary: true, Channels: []wsstream.ChannelType{
			remotecommandconsts.StreamStdIn:  wsstream.ReadChannel,
			remotecommandconsts.StreamStdOut: wsstream.WriteChannel,
			remotecommandconsts.StreamStdErr: wsstream.IgnoreChannel,
			remotecommandconsts.StreamErr:    wsstream.WriteChannel,
			remotecommandconsts.StreamResize: wsstream.ReadChannel,
		}},
	})
	conn.SetIdleTimeout(idleTimeout)
	_, streams, err := conn.Open(w, req)
	if err != nil {
		klog.FromContext(req.Context()).Info("Console upgrade failed", "console", t.String(), "err", err)
		return
	}
	defer conn.Close()
	// An empty write tells the client the session is established.
	if _, err := streams[remotecommandconsts.StreamStdOut].Write(nil); err != nil {
		return
	}

	var wg sync.WaitGroup
	wg.Add(3)
	go func() { // client → guest
		defer wg.Done()
		_, _ = io.Copy(stream, streams[remotecommandconsts.StreamStdIn])
		ss.stop(nil) // the client went
	}()
	go func() { // guest → client
		defer wg.Done()
		_, err := io.Copy(streams[remotecommandconsts.StreamStdOut], stream)
		ss.stop(ended(err))
	}()
	go func() {
		defer wg.Done()
		resize(streams[remotecommandconsts.StreamResize], stream)
	}()
	why := <-ss.end
	if why != nil {
		if b, err := json.Marshal(why.Status()); err == nil {
			_, _ = streams[remotecommandconsts.StreamErr].Write(b)
		}
	}
	// Closing both ends unblocks the copies.
	_ = conn.Close()
	_ = stream.Close()
	wg.Wait()
}

// ended is the Status of a console whose guest side ended: the VM
// stopped, or the backend connection dropped.
func ended(err error) *apierrors.StatusError {
	msg := "the console stream ended: the VM stopped or its backend connection dropped"
	if err != nil && !errors.Is(err, io.EOF) {
		msg += ": " + err.Error()
	}
	return apierrors.NewServiceUnavailable(msg)
}

// resize passes the client's terminal sizes to a stream that takes them.
func resize(r io.Reader, stream io.ReadWriteCloser) {
	rs, ok := stream.(providers.Resizer)
	dec := json.NewDecoder(r)
	for {
		// client-go's remotecommand.TerminalSize, as its executor sends it.
		var size struct{ Width, Height uint16 }
		if err := dec.Decode(&size); err != nil {
			return
		}
		if ok {
			_ = rs.Resize(size.Width, size.Height)
		}
	}
}

func (s *Server) openTimeout() time.Duration {
	if s.OpenTimeout > 0 {
		return s.OpenTimeout
	}
	return DefaultOpenTimeout
}

// openError is the Status of a failed attach.
func openError(t Target, err error) *apierrors.StatusError {
	switch {
	case errors.Is(err, ErrNotServed):
		return apierrors.NewNotFound(schema.GroupResource{Resource: t.Resource}, t.Name)
	case errors.Is(err, providers.ErrConsoleBusy):
		return conflict(fmt.Sprintf("the console of %s/%s is held by another client of the backend; takeover=true closes it: %v", t.Namespace, t.Name, err))
	case errors.Is(err, providers.ErrNoConsole):
		return conflict(fmt.Sprintf("%s/%s has no console to attach to: %v", t.Namespace, t.Name, err))
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("attaching to the console of %s/%s: %v", t.Namespace, t.Name, err))
}

func busy(t Target, requester string, since time.Time) *apierrors.StatusError {
	return conflict(fmt.Sprintf("the console of %s/%s is in use by %s since %s; takeover=true closes that session",
		t.Namespace, t.Name, orSomeone(requester), since.UTC().Format(time.RFC3339)))
}

func conflict(msg string) *apierrors.StatusError {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusConflict,
		Reason: metav1.StatusReasonConflict, Message: msg}}
}

func orSomeone(user string) string {
	if user == "" {
		return "another user"
	}
	return user
}

// parsePath reads PathPrefix NAMESPACE/RESOURCE/NAME.
func parsePath(p string) (Target, bool) {
	rest, ok := strings.CutPrefix(p, PathPrefix)
	if !ok {
		return Target{}, false
	}
	parts := strings.Split(rest, "/")
	if len(parts) != 3 || parts[0] == "" || parts[1] == "" || parts[2] == "" {
		return Target{}, false
	}
	return Target{Namespace: parts[0], Resource: parts[1], Name: parts[2]}, true
}

// writeStatus answers a request not upgraded with a Status, as the API
// server would: the proxy passes it on to the client.
func writeStatus(w http.ResponseWriter, err *apierrors.StatusError) {
	st := err.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(int(st.Code))
	_ = json.NewEncoder(w).Encode(st)
}
