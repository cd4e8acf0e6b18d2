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
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// get fetches url and returns its status, body and Content-Length.
func get(t *testing.T, url string) (int, []byte, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, body, resp.Header.Get("Content-Length")
}

// sumOf is what an importer computes over the bytes it downloaded.
func sumOf(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

// TestServe: each file at its own URL, whole and with its length; a path
// not given, and a given one whose file is gone, are 404 Not Found (what
// the e2e tests' FetchFailed cases rely on).
func TestServe(t *testing.T) {
	a := WriteFile(t, "a.qcow2", []byte("first image"))
	b := WriteFile(t, "b.iso", bytes.Repeat([]byte{0xab}, 1<<20))
	gone := WriteFile(t, "gone.raw", []byte("removed before it is asked for"))
	s := Serve(t, map[string]string{"/a.qcow2": a, "/b.iso": b, "/gone.raw": gone})
	if err := os.Remove(gone); err != nil {
		t.Fatal(err)
	}
	for path, file := range map[string]string{"/a.qcow2": a, "/b.iso": b} {
		want, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		code, body, length := get(t, s.URL(path))
		if code != http.StatusOK || !bytes.Equal(body, want) || length != strconv.Itoa(len(want)) {
			t.Errorf("GET %s: %d, %d bytes, Content-Length %q; want 200 and the file's %d bytes", path, code, len(body), length, len(want))
		}
	}
	for _, path := range []string{"/missing.qcow2", "/", "/gone.raw"} {
		if code, _, _ := get(t, s.URL(path)); code != http.StatusNotFound {
			t.Errorf("GET %s: %d, want 404", path, code)
		}
	}
}

// TestChecksum: Checksum agrees with coreutils' sha256sum, and with the
// sum of what the server sends; once the file changes by one byte, the
// sum taken before no longer matches what is served (the mismatch an
// importer must report).
func TestChecksum(t *testing.T) {
	file := WriteFile(t, "guest.raw", bytes.Repeat([]byte("banlieue"), 100000))
	sum := Checksum(t, file)
	out := Run(t, "sha256sum", file)
	if want := "sha256:" + strings.Fields(out)[0]; sum != want {
		t.Fatalf("Checksum %s, sha256sum says %s", sum, want)
	}
	s := Serve(t, map[string]string{"/guest.raw": file})
	if _, body, _ := get(t, s.URL("/guest.raw")); sumOf(body) != sum {
		t.Fatalf("the served bytes sum to %s, the file to %s", sumOf(body), sum)
	}

	f, err := os.OpenFile(file, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{'B'}, 400000); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	_, body, _ := get(t, s.URL("/guest.raw"))
	if got := sumOf(body); got == sum {
		t.Errorf("one byte changed, yet the served bytes still sum to the old %s", sum)
	}
	if got := Checksum(t, file); got != sumOf(body) || got == sum {
		t.Errorf("Checksum of the changed file %s; want the served bytes' %s, not the old %s", got, sumOf(body), sum)
	}
}
