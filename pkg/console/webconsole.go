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
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/firestoned/banlieue/pkg/providers"
)

// WebConsolePathPrefix starts a web console request's path on a
// provider's console endpoint: /webconsole/v1/namespaces/NAMESPACE/
// RESOURCE/NAME?provider=, POST. The same endpoint, certificate and
// tokens as the serial console's; no session: each POST is one ticket.
const WebConsolePathPrefix = "/webconsole/v1/namespaces/"

// WebConsolePath is t's web console path on a provider.
func (t Target) WebConsolePath() string {
	return WebConsolePathPrefix + t.Namespace + "/" + t.Resource + "/" + t.Name
}

// WebConsoleFunc asks the backend for a web console URL of t's machine
// (providers.WebConsoles, the machine found): its errors are
// ErrNotServed, providers.ErrNoConsole (not built),
// providers.ErrNoWebConsole, providers.ErrNotPoweredOn or the backend's.
type WebConsoleFunc func(ctx context.Context, t Target) (url string, expires time.Time, err error)

// WebConsoleRequest is what the API server POSTs: the requester's key.
type WebConsoleRequest struct {
	PublicKey string `json:"publicKey"`
}

// WebConsoleAnswer is the provider's answer: the URL encrypted with that
// key (EncryptURL), so that the API server, which passes it on, never
// holds the ticket in the clear.
type WebConsoleAnswer struct {
	URL       string    `json:"url"`
	ExpiresAt time.Time `json:"expiresAt"`
}

// maxWebConsoleRequest bounds a request body: a PEM RSA key of 8192 bits
// is under 2 KiB.
const maxWebConsoleRequest = 64 << 10

// WebConsoles serves web console requests to one client identity,
// authorized exactly as the serial consoles are.
type WebConsoles struct {
	URL          WebConsoleFunc
	Authenticate AuthenticateFunc
	// Client is the only user allowed: banlieue's API server.
	Client string
	// Timeout bounds the backend's answer; DefaultOpenTimeout when zero.
	Timeout time.Duration
}

func (s *WebConsoles) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	t, ok := parseWebConsolePath(req.URL.Path)
	t.Provider = req.URL.Query().Get("provider")
	if !ok || t.Provider == "" {
		writeStatus(w, apierrors.NewNotFound(schema.GroupResource{Resource: "webconsole"}, req.URL.Path))
		return
	}
	if err := authorize(req, t, s.Authenticate, s.Client); err != nil {
		writeStatus(w, err)
		return
	}
	if req.Method != http.MethodPost {
		writeStatus(w, apierrors.NewMethodNotSupported(schema.GroupResource{Resource: "webconsole"}, req.Method))
		return
	}
	var in WebConsoleRequest
	if err := json.NewDecoder(io.LimitReader(req.Body, maxWebConsoleRequest)).Decode(&in); err != nil {
		writeStatus(w, apierrors.NewBadRequest("the request is not a web console request: "+err.Error()))
		return
	}
	// Checked before a ticket is asked for: a key that cannot take the
	// URL would waste one.
	if _, err := ParsePublicKey(in.PublicKey); err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	timeout := s.Timeout
	if timeout <= 0 {
		timeout = DefaultOpenTimeout
	}
	ctx, cancel := context.WithTimeout(req.Context(), timeout)
	u, expires, err := s.URL(ctx, t)
	cancel()
	if err != nil {
		writeStatus(w, webConsoleError(t, err))
		return
	}
	enc, err := EncryptURL(in.PublicKey, u)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(WebConsoleAnswer{URL: enc, ExpiresAt: expires})
}

// webConsoleError is the Status of a failed web console request.
func webConsoleError(t Target, err error) *apierrors.StatusError {
	switch {
	case errors.Is(err, ErrNotServed):
		return apierrors.NewNotFound(schema.GroupResource{Resource: t.Resource}, t.Name)
	case errors.Is(err, providers.ErrNotPoweredOn):
		return conflict(fmt.Sprintf("%s/%s has no web console while it is not powered on: %v", t.Namespace, t.Name, err))
	case errors.Is(err, providers.ErrNoWebConsole):
		return apierrors.NewBadRequest(fmt.Sprintf("%s/%s has no web console: %v", t.Namespace, t.Name, err))
	case errors.Is(err, providers.ErrNoConsole):
		return conflict(fmt.Sprintf("%s/%s has no console yet: %v", t.Namespace, t.Name, err))
	}
	return apierrors.NewServiceUnavailable(fmt.Sprintf("asking the backend for a web console of %s/%s: %v", t.Namespace, t.Name, err))
}

// parseWebConsolePath reads WebConsolePathPrefix NAMESPACE/RESOURCE/NAME.
func parseWebConsolePath(p string) (Target, bool) {
	rest, ok := strings.CutPrefix(p, WebConsolePathPrefix)
	if !ok {
		return Target{}, false
	}
	return parsePath(PathPrefix + rest)
}

// ParsePublicKey reads an RSA public key, PEM: "RSA PUBLIC KEY" (PKCS #1,
// as vm-operator's WebConsoleRequest takes it) or "PUBLIC KEY" (PKIX).
// Keys under 2048 bits are refused (they could not carry a URL either).
func ParsePublicKey(s string) (*rsa.PublicKey, error) {
	block, _ := pem.Decode([]byte(s))
	if block == nil {
		return nil, fmt.Errorf("publicKey is not PEM")
	}
	var pub *rsa.PublicKey
	switch block.Type {
	case "RSA PUBLIC KEY":
		k, err := x509.ParsePKCS1PublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("publicKey: %w", err)
		}
		pub = k
	case "PUBLIC KEY":
		k, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("publicKey: %w", err)
		}
		rk, ok := k.(*rsa.PublicKey)
		if !ok {
			return nil, fmt.Errorf("publicKey is a %T, not an RSA key", k)
		}
		pub = rk
	default:
		return nil, fmt.Errorf("publicKey is a PEM %q block, not \"RSA PUBLIC KEY\" or \"PUBLIC KEY\"", block.Type)
	}
	if pub.N.BitLen() < 2048 {
		return nil, fmt.Errorf("publicKey has %d bits; 2048 at least", pub.N.BitLen())
	}
	return pub, nil
}

// EncryptURL encrypts u with the PEM key as vm-operator does
// (EncryptWebMKS): RSA-OAEP with SHA-512, no label, standard base64.
func EncryptURL(publicKey, u string) (string, error) {
	pub, err := ParsePublicKey(publicKey)
	if err != nil {
		return "", err
	}
	b, err := rsa.EncryptOAEP(sha512.New(), rand.Reader, pub, []byte(u), nil)
	if err != nil {
		return "", fmt.Errorf("the web console URL (%d bytes) cannot be encrypted with a %d-bit key: %w", len(u), pub.N.BitLen(), err)
	}
	return base64.StdEncoding.EncodeToString(b), nil
}

// DecryptURL is EncryptURL's inverse, for clients (kubectl, tests).
func DecryptURL(key *rsa.PrivateKey, encrypted string) (string, error) {
	b, err := base64.StdEncoding.DecodeString(encrypted)
	if err != nil {
		return "", err
	}
	u, err := rsa.DecryptOAEP(sha512.New(), rand.Reader, key, b, nil)
	if err != nil {
		return "", err
	}
	return string(u), nil
}

// RequestWebConsole is the API server's side: it POSTs the requester's
// key to the provider's endpoint (pinned, with the API server's token for
// t's Provider) and returns the provider's answer; a Status the provider
// answers comes back as a *apierrors.StatusError, passed to the client
// as is. ctx bounds the whole exchange.
func RequestWebConsole(ctx context.Context, e Endpoint, t Target, token, requester, publicKey string) (WebConsoleAnswer, error) {
	u, err := url.Parse(e.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return WebConsoleAnswer{}, fmt.Errorf("console endpoint %q is not an https URL", e.URL)
	}
	u.Path = t.WebConsolePath()
	u.RawQuery = url.Values{"provider": {t.Provider}}.Encode()
	rt, err := e.transport()
	if err != nil {
		return WebConsoleAnswer{}, err
	}
	defer rt.CloseIdleConnections()
	body, _ := json.Marshal(WebConsoleRequest{PublicKey: publicKey})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), bytes.NewReader(body))
	if err != nil {
		return WebConsoleAnswer{}, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	req.Header.Set(RequesterHeader, requester)
	resp, err := rt.RoundTrip(req)
	if err != nil {
		return WebConsoleAnswer{}, apierrors.NewServiceUnavailable(fmt.Sprintf("reaching the console endpoint %s: %v", e.URL, err))
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxWebConsoleRequest))
	if err != nil {
		return WebConsoleAnswer{}, apierrors.NewServiceUnavailable(fmt.Sprintf("reading the console endpoint's answer: %v", err))
	}
	if resp.StatusCode != http.StatusOK {
		var st metav1.Status
		if json.Unmarshal(b, &st) == nil && st.Kind == "Status" {
			st.Kind, st.APIVersion = "", ""
			return WebConsoleAnswer{}, &apierrors.StatusError{ErrStatus: st}
		}
		return WebConsoleAnswer{}, apierrors.NewServiceUnavailable(fmt.Sprintf("the console endpoint answered %s", resp.Status))
	}
	var a WebConsoleAnswer
	if err := json.Unmarshal(b, &a); err != nil {
		return WebConsoleAnswer{}, apierrors.NewServiceUnavailable(fmt.Sprintf("the console endpoint's answer: %v", err))
	}
	return a, nil
}
