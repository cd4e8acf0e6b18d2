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

package imagetest

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// Server serves files from loopback, as an image mirror would: the
// e2e tests' spec.import.url points at it.
type Server struct {
	// Base is the server's root, http://127.0.0.1:PORT; Base plus a path
	// the server was not given is a URL that answers 404 Not Found.
	Base string
}

// Serve serves each file at its path (files maps a URL path, "/a.qcow2",
// to a file on disk) until the test ends. The answer is
// http.ServeFile's: the file's length, ranges and HEAD honoured, as a
// real mirror's; any other path is 404 Not Found.
func Serve(t testing.TB, files map[string]string) *Server {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	// A copy: the caller changing its map afterwards changes nothing
	// served, and the handler reads it from other goroutines.
	served := make(map[string]string, len(files))
	for p, f := range files {
		served[p] = f
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f, ok := served[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, f)
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &Server{Base: "http://" + l.Addr().String()}
}

// URL is the URL of path ("/a.qcow2") on the server.
func (s *Server) URL(path string) string { return s.Base + path }

// WriteFile writes data to a file named name in a directory of the
// test's own and returns its path: bytes built in memory (an ISO) to
// Serve.
func WriteFile(t testing.TB, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Checksum is the file's SHA-256 as spec.import.checksum writes it,
// "sha256:<hex>". The file is streamed: tests serve images of a GiB.
func Checksum(t testing.TB, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}
