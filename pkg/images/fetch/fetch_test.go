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

package fetch

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestOpen(t *testing.T) {
	data := []byte(strings.Repeat("banlieue image bytes ", 50000))
	sum := sha256.Sum256(data)
	good := "sha256:" + hex.EncodeToString(sum[:])
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/image":
			w.Header().Set("Content-Length", strconv.Itoa(len(data)))
			_, _ = w.Write(data)
		case "/private":
			if u, p, ok := r.BasicAuth(); !ok || u != "mirror" || p != "s3cret" {
				http.Error(w, "who are you", http.StatusUnauthorized)
				return
			}
			_, _ = w.Write(data)
		case "/metadata":
			http.Redirect(w, r, "http://169.254.169.254/latest/meta-data/", http.StatusFound)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name  string
		src   Source
		guard Guard
		check func(t *testing.T, err error)
	}{
		{name: "matches", src: Source{URL: srv.URL + "/image", Checksum: good}, check: func(t *testing.T, err error) {
			if err != nil {
				t.Fatalf("a matching image: %v", err)
			}
		}},
		{name: "checksum mismatch", src: Source{URL: srv.URL + "/image", Checksum: "sha256:" + strings.Repeat("0", 64)},
			check: func(t *testing.T, err error) {
				var ce *ChecksumError
				if !errors.As(err, &ce) || ce.Got != good {
					t.Fatalf("want a ChecksumError naming %s, got %v", good, err)
				}
			}},
		{name: "not found", src: Source{URL: srv.URL + "/nothing", Checksum: good}, check: func(t *testing.T, err error) {
			var fe *FetchError
			if !errors.As(err, &fe) || fe.StatusCode != http.StatusNotFound || !strings.Contains(err.Error(), "404") {
				t.Fatalf("want a FetchError with 404, got %v", err)
			}
		}},
		{name: "credentials", src: Source{URL: srv.URL + "/private", Checksum: good, Username: "mirror", Password: "s3cret"},
			check: func(t *testing.T, err error) {
				if err != nil {
					t.Fatalf("with credentials: %v", err)
				}
			}},
		{name: "no credentials", src: Source{URL: srv.URL + "/private", Checksum: good}, check: func(t *testing.T, err error) {
			var fe *FetchError
			if !errors.As(err, &fe) || fe.StatusCode != http.StatusUnauthorized {
				t.Fatalf("want 401, got %v", err)
			}
		}},
		{name: "redirect to the metadata service", src: Source{URL: srv.URL + "/metadata", Checksum: good},
			check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "link-local") {
					t.Fatalf("want a refusal naming link-local, got %v", err)
				}
			}},
		{name: "denied range", src: Source{URL: srv.URL + "/image", Checksum: good},
			guard: Guard{Deny: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}, check: func(t *testing.T, err error) {
				if !errors.Is(err, ErrDenied) || !strings.Contains(err.Error(), "127.0.0.0/8") {
					t.Fatalf("want a refusal naming the range, got %v", err)
				}
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.check(t, read(tc.src, tc.guard, len(data)))
		})
	}
}

// read fetches src to its end, and checks that Done counted every byte.
func read(src Source, guard Guard, size int) error {
	b, err := Open(context.Background(), src, guard)
	if err != nil {
		return err
	}
	defer b.Close()
	n, err := io.Copy(io.Discard, b)
	// A chunked answer (as large writes are) has no length.
	if err == nil && (n != int64(size) || b.Done() != n || (b.Size != n && b.Size != -1)) {
		return errors.New("byte counts disagree")
	}
	return err
}

func TestGuardCheck(t *testing.T) {
	g := Guard{Deny: []netip.Prefix{netip.MustParsePrefix("10.96.0.0/12")}}
	for addr, denied := range map[string]bool{
		"169.254.169.254:80": true, "[fe80::1]:443": true, "[::ffff:169.254.169.254]:80": true,
		"10.96.0.1:443": true, "10.112.0.1:443": false, "127.0.0.1:8080": false, "192.0.2.7:80": false,
	} {
		if err := g.Check(addr); (err != nil) != denied {
			t.Errorf("Check(%s) = %v, want denied %v", addr, err, denied)
		}
	}
}

// TestVerifierHashesBeside: a sum over several hash chunks and a partial
// last one is right, a wrong one is a ChecksumError, and a body closed
// before its end leaves no hasher running.
func TestVerifierHashesBeside(t *testing.T) {
	data := bytes.Repeat([]byte("banlieue"), (3*hashChunk+12345)/8)
	sum := sha256.Sum256(data)
	for _, tc := range []struct {
		name string
		want string
		ok   bool
	}{{"right", hex.EncodeToString(sum[:]), true}, {"wrong", strings.Repeat("ab", 32), false}} {
		t.Run(tc.name, func(t *testing.T) {
			v := newVerifier(io.NopCloser(bytes.NewReader(data)), sha256.New(), tc.want, "sha256")
			n, err := io.Copy(io.Discard, v)
			var ce *ChecksumError
			if tc.ok && err != nil || !tc.ok && !errors.As(err, &ce) || n != int64(len(data)) {
				t.Errorf("read %d of %d bytes, error %v", n, len(data), err)
			}
			_ = v.Close()
		})
	}
	before := runtime.NumGoroutine()
	for range 20 {
		v := newVerifier(io.NopCloser(bytes.NewReader(data)), sha256.New(), "", "sha256")
		if _, err := io.CopyN(io.Discard, v, 2*hashChunk+1); err != nil {
			t.Fatal(err)
		}
		_ = v.Close()
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			t.Fatalf("%d goroutines after 20 bodies closed early, %d before", runtime.NumGoroutine(), before)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
