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

package count

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// The helpers are fed a crafted loss and a crafted duplicate and must
// report them; a clean run must report nothing.
func TestLost(t *testing.T) {
	for _, tc := range []struct {
		name          string
		acked, stored map[string]string
		want          []string
	}{
		{"nothing lost", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "2", "c": "3"}, nil},
		{"one missing", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1"}, []string{"b"}},
		{"recreated under the same name", map[string]string{"a": "1", "b": "2"}, map[string]string{"a": "1", "b": "9"}, []string{"b"}},
		{"everything missing", map[string]string{"b": "2", "a": "1"}, nil, []string{"a", "b"}},
	} {
		if got := Lost(tc.acked, tc.stored); !slices.Equal(got, tc.want) {
			t.Errorf("%s: Lost = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestMissing(t *testing.T) {
	seen := Sightings([]string{"a", "c", "c"})
	if got := Missing([]string{"a", "b", "c", "d"}, seen); !slices.Equal(got, []string{"b", "d"}) {
		t.Errorf("Missing = %v, want [b d]", got)
	}
	if got := Missing([]string{"a", "c"}, seen); got != nil {
		t.Errorf("Missing = %v, want none", got)
	}
}

func TestDuplicated(t *testing.T) {
	for _, tc := range []struct {
		name  string
		seen  []string
		extra int
		keys  []string
	}{
		{"each once", []string{"a", "b", "c"}, 0, nil},
		{"one delivered twice", []string{"a", "b", "a"}, 1, []string{"a"}},
		{"one thrice, one twice", []string{"b", "a", "b", "c", "b", "a"}, 3, []string{"a", "b"}},
		{"nothing seen", nil, 0, nil},
	} {
		extra, keys := Duplicated(Sightings(tc.seen))
		if extra != tc.extra || !slices.Equal(keys, tc.keys) {
			t.Errorf("%s: Duplicated = %d %v, want %d %v", tc.name, extra, keys, tc.extra, tc.keys)
		}
	}
}

// A crafted lost increment and a crafted increment applied twice.
func TestShortfall(t *testing.T) {
	acked := map[string]int{"a": 3, "b": 2, "c": 1}
	stored := map[string]int{"a": 3, "b": 1, "d": 5}
	if n, keys := Shortfall(acked, stored); n != 2 || !slices.Equal(keys, []string{"b", "c"}) {
		t.Errorf("lost increments = %d %v, want 2 [b c]", n, keys)
	}
	if n, keys := Shortfall(stored, acked); n != 5 || !slices.Equal(keys, []string{"d"}) {
		t.Errorf("extra increments = %d %v, want 5 [d]", n, keys)
	}
	if n, keys := Shortfall(acked, acked); n != 0 || keys != nil {
		t.Errorf("Shortfall of equal counters = %d %v, want 0", n, keys)
	}
}

// Only drops the sightings of other keys, duplicates included, and keeps
// this scenario's duplicates.
func TestOnly(t *testing.T) {
	got := Only(Sightings([]string{"a", "x", "b", "a", "x", "x"}), []string{"a", "b", "c"})
	if extra, keys := Duplicated(got); extra != 1 || !slices.Equal(keys, []string{"a"}) {
		t.Errorf("Duplicated(Only) = %d %v, want 1 [a]", extra, keys)
	}
	if missing := Missing([]string{"a", "b", "c"}, got); !slices.Equal(missing, []string{"c"}) {
		t.Errorf("Missing(Only) = %v, want [c]", missing)
	}
}

// Distinct on a crafted failure: VM b's machine deleted and created again
// under the same name (another UID), which a count of machines by name
// could never see.
func TestDistinct(t *testing.T) {
	seen := []Seen[string, string]{
		{"a", "machine-1"}, {"b", "machine-2"}, {"a", "machine-1"}, // a's machine in a watch and a list
		{"b", "machine-3"},
	}
	per := Distinct(seen)
	if extra, keys := Duplicated(per); extra != 1 || !slices.Equal(keys, []string{"b"}) {
		t.Errorf("Duplicated(Distinct) = %d %v, want 1 [b]", extra, keys)
	}
	if missing := Missing([]string{"a", "b", "c"}, per); !slices.Equal(missing, []string{"c"}) {
		t.Errorf("Missing(Distinct) = %v, want [c]", missing)
	}
	if extra, _ := Duplicated(Distinct(seen[:3])); extra != 0 {
		t.Errorf("one object seen twice counted as %d duplicates", extra)
	}
}

var gr = schema.GroupResource{Group: "banlieue.io", Resource: "virtualmachines"}

func TestIsAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"success", nil, true},
		{"403", apierrors.NewForbidden(gr, "vm-1", errors.New("no")), true},
		{"503, wrapped", fmt.Errorf("listing: %w", apierrors.NewServiceUnavailable("down")), true},
		{"AlreadyExists", apierrors.NewAlreadyExists(gr, "vm-1"), true},
		{"deadline", context.DeadlineExceeded, false},
		{"reset", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")}, false},
		{"arbitrary", errors.New("something else"), false},
	} {
		if got := IsAnswer(tc.err); got != tc.want {
			t.Errorf("%s: IsAnswer(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
}

// Against real sockets: a server refusing a TLS version answers; a closed
// port does not.
func TestIsAnswerOnTheWire(t *testing.T) {
	srv := httptest.NewUnstartedServer(http.NotFoundHandler())
	srv.TLS = &tls.Config{MinVersion: tls.VersionTLS12}
	srv.StartTLS()
	defer srv.Close()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	conn, err := tls.DialWithDialer(dialer, "tcp", srv.Listener.Addr().String(),
		&tls.Config{MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS10, InsecureSkipVerify: true})
	if err == nil {
		conn.Close()
		t.Fatal("TLS 1.0 handshake with a TLS 1.2 server succeeded")
	}
	if !IsAnswer(err) {
		t.Errorf("a refused TLS version is the server's answer: IsAnswer(%v) = false", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	if _, err := tls.DialWithDialer(dialer, "tcp", addr, &tls.Config{InsecureSkipVerify: true}); err == nil || IsAnswer(err) {
		t.Errorf("a closed port answered: %v", err)
	}
}

// Ops on crafted outcomes: a retry counted once, an unanswered request not
// at all, every concurrent one exactly once.
func TestOps(t *testing.T) {
	var o Ops
	if o.N() != 0 {
		t.Fatalf("a new Ops counts %d", o.N())
	}
	o.Done("create vm-1", apierrors.NewServiceUnavailable("down"))
	o.Done("create vm-1", nil) // the retry
	o.Done("create vm-2", context.DeadlineExceeded)
	o.Answered("kubectl create")
	if o.N() != 2 {
		t.Errorf("Ops = %d, want 2 (vm-1 once, kubectl; vm-2 unanswered)", o.N())
	}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o.Done(fmt.Sprintf("concurrent %d", i), nil)
			o.Done(fmt.Sprintf("concurrent %d", i), nil)
		}()
	}
	wg.Wait()
	if o.N() != 102 {
		t.Errorf("Ops = %d after 100 concurrent operations, each recorded twice, want 102", o.N())
	}
}
