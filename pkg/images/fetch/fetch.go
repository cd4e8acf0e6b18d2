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

// Package fetch reads an image from its URL for a provider: over a
// connection that refuses the link-local metadata address and the ranges
// the provider denies (at connect time, so neither a redirect nor a DNS
// answer gets around it), checking the checksum while the bytes stream, so
// whoever consumes the body sees an error instead of the last byte of an
// image that does not match.
package fetch

import (
	"context"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Source is what to fetch and how to authenticate.
type Source struct {
	// URL to fetch, http or https.
	URL string
	// Checksum is "sha256:HEX" or "sha512:HEX".
	Checksum string
	// Username and Password (basic) or Token (bearer) for a private
	// mirror; CA (PEM) verifies it instead of the system roots.
	Username, Password, Token string
	CA                        []byte
}

// Guard is what a fetch may connect to.
type Guard struct {
	// Deny are address ranges refused besides the link-local ones (which
	// hold the cloud metadata service and are always refused), e.g. the
	// cluster's service network.
	Deny []netip.Prefix
}

// FetchError is a fetch that failed before or while reading: the
// FetchFailed reason, with the HTTP status when the server answered.
type FetchError struct {
	StatusCode int
	Err        error
}

func (e *FetchError) Error() string {
	if e.StatusCode != 0 {
		return fmt.Sprintf("HTTP %d %s: %v", e.StatusCode, http.StatusText(e.StatusCode), e.Err)
	}
	return e.Err.Error()
}

func (e *FetchError) Unwrap() error { return e.Err }

// ChecksumError says the bytes fetched do not match the checksum.
type ChecksumError struct {
	Want, Got string
}

func (e *ChecksumError) Error() string {
	return fmt.Sprintf("the image's checksum is %s, spec.import.checksum says %s", e.Got, e.Want)
}

// ErrDenied is a connection the guard refused.
var ErrDenied = errors.New("address refused")

// Body is an image being fetched.
type Body struct {
	// Size is the image's length in bytes, -1 when the server did not say.
	Size int64
	// Done is how many bytes were read so far.
	Done func() int64
	io.ReadCloser
}

// Open starts fetching src. Reading the body to its end returns a
// *ChecksumError instead of io.EOF when the bytes do not match, and a
// *FetchError when the connection breaks.
func Open(ctx context.Context, src Source, guard Guard) (*Body, error) {
	h, want, err := hasher(src.Checksum)
	if err != nil {
		return nil, err
	}
	c, err := client(src, guard)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, src.URL, nil)
	if err != nil {
		return nil, &FetchError{Err: err}
	}
	switch {
	case src.Token != "":
		req.Header.Set("Authorization", "Bearer "+src.Token)
	case src.Username != "":
		req.SetBasicAuth(src.Username, src.Password)
	}
	resp, err := c.Do(req)
	if err != nil {
		return nil, &FetchError{Err: err}
	}
	if resp.StatusCode != http.StatusOK {
		_ = resp.Body.Close()
		return nil, &FetchError{StatusCode: resp.StatusCode, Err: fmt.Errorf("GET %s", redactURL(src.URL))}
	}
	v := newVerifier(resp.Body, h, want, strings.SplitN(src.Checksum, ":", 2)[0])
	return &Body{Size: resp.ContentLength, Done: v.n.Load, ReadCloser: v}, nil
}

// verifier checks the sum of what it reads at the end. The hashing runs
// beside the reads, on copies in a few chunk buffers (hashChunks of
// hashChunk: bounded memory), so a fetch goes as fast as the slower of the
// two, not their sum (sha256 alone is about as fast as a simulated
// backend's upload: the vSphere row of bench/results/images.md).
type verifier struct {
	r         io.ReadCloser
	want, alg string
	n         atomic.Int64

	cur    []byte
	chunks chan []byte   // to the hasher, closed at the end
	free   chan []byte   // back from it
	sum    chan string   // the hex sum, once chunks is closed
	stop   chan struct{} // closed by Close: the hasher and the reads give up
	got    string        // the sum, once received
	ended  sync.Once
	closed sync.Once
}

const (
	hashChunk  = 1 << 20
	hashChunks = 4
)

func newVerifier(r io.ReadCloser, h hash.Hash, want, alg string) *verifier {
	v := &verifier{r: r, want: want, alg: alg, chunks: make(chan []byte, hashChunks),
		free: make(chan []byte, hashChunks+1), sum: make(chan string, 1), stop: make(chan struct{})}
	for range hashChunks + 1 {
		v.free <- make([]byte, 0, hashChunk)
	}
	v.cur = <-v.free
	go v.hasher(h)
	return v
}

func (v *verifier) hasher(h hash.Hash) {
	for {
		select {
		case c, ok := <-v.chunks:
			if !ok {
				v.sum <- hex.EncodeToString(h.Sum(nil))
				return
			}
			h.Write(c)
			v.free <- c[:0]
		case <-v.stop:
			return
		}
	}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.hash(p[:n])
	v.n.Add(int64(n))
	switch {
	case errors.Is(err, io.EOF):
		if got := v.finish(); got != v.want {
			return n, &ChecksumError{Want: v.alg + ":" + v.want, Got: v.alg + ":" + got}
		}
	case err != nil:
		return n, &FetchError{Err: err}
	}
	return n, err
}

// hash hands p to the hasher, a full chunk at a time.
func (v *verifier) hash(p []byte) {
	for len(p) > 0 {
		k := min(len(p), hashChunk-len(v.cur))
		v.cur = append(v.cur, p[:k]...)
		p = p[k:]
		if len(v.cur) < hashChunk {
			continue
		}
		select {
		case v.chunks <- v.cur:
		case <-v.stop:
			return
		}
		select {
		case v.cur = <-v.free:
		case <-v.stop:
			return
		}
	}
}

// finish hashes the last chunk and returns the sum ("" once closed).
func (v *verifier) finish() string {
	v.ended.Do(func() {
		if len(v.cur) > 0 {
			select {
			case v.chunks <- v.cur:
			case <-v.stop:
				return
			}
		}
		close(v.chunks)
		select {
		case v.got = <-v.sum:
		case <-v.stop:
		}
	})
	return v.got
}

// Close stops the hasher (a fetch given up) and the body.
func (v *verifier) Close() error {
	v.closed.Do(func() { close(v.stop) })
	return v.r.Close()
}

func hasher(checksum string) (hash.Hash, string, error) {
	alg, digest, _ := strings.Cut(checksum, ":")
	switch alg {
	case "sha256":
		return sha256.New(), digest, nil
	case "sha512":
		return sha512.New(), digest, nil
	}
	return nil, "", fmt.Errorf("checksum %q: want sha256:HEX or sha512:HEX", checksum)
}

// client connects only where guard allows, to every address a name
// resolves to and after every redirect, as the check runs on the
// address being dialled.
func client(src Source, guard Guard) (*http.Client, error) {
	dialer := &net.Dialer{Timeout: 30 * time.Second, Control: func(_, address string, _ syscall.RawConn) error {
		return guard.Check(address)
	}}
	tlsConfig := &tls.Config{MinVersion: tls.VersionTLS12}
	if len(src.CA) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(src.CA) {
			return nil, &FetchError{Err: errors.New("the mirror's CA (ca.crt) holds no PEM certificate")}
		}
		tlsConfig.RootCAs = pool
	}
	transport := &http.Transport{
		DialContext:           dialer.DialContext,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   30 * time.Second,
		ResponseHeaderTimeout: time.Minute,
		// No proxy: the guard checks the address the bytes come from.
		Proxy: nil,
	}
	return &http.Client{Transport: transport, CheckRedirect: func(req *http.Request, via []*http.Request) error {
		if len(via) >= 5 {
			return errors.New("more than 5 redirects")
		}
		if req.URL.Scheme != "http" && req.URL.Scheme != "https" {
			return fmt.Errorf("redirect to a %s URL", req.URL.Scheme)
		}
		return nil
	}}, nil
}

// Check refuses address (host:port, an IP) when it is link-local or in a
// denied range.
func (g Guard) Check(address string) error {
	host, _, err := net.SplitHostPort(address)
	if err != nil {
		host = address
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return fmt.Errorf("%w: %q is not an IP address", ErrDenied, host)
	}
	ip = ip.Unmap()
	if ip.IsLinkLocalUnicast() || ip.IsLinkLocalMulticast() {
		return fmt.Errorf("%w: %s is link-local (the cloud metadata service's range)", ErrDenied, ip)
	}
	for _, p := range g.Deny {
		if p.Contains(ip) {
			return fmt.Errorf("%w: %s is in the denied range %s", ErrDenied, ip, p)
		}
	}
	return nil
}

// redactURL drops a URL's query (signed URLs carry their signature there).
func redactURL(s string) string {
	if i := strings.IndexAny(s, "?#"); i >= 0 {
		return s[:i] + "?…"
	}
	return s
}
