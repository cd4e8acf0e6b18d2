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
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/firestoned/banlieue/pkg/providers"
)

func rsaKey(t *testing.T, bits int) *rsa.PrivateKey {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, bits)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func pkcs1PEM(k *rsa.PrivateKey) string {
	return string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&k.PublicKey)}))
}

// TestEncryptURL: what EncryptURL makes decrypts, with the private key,
// as vm-operator's clients decrypt it (RSA-OAEP, SHA-512, base64), for
// both PEM forms; other keys, small keys and non-RSA keys are refused.
func TestEncryptURL(t *testing.T) {
	k := rsaKey(t, 2048)
	const u = "wss://esx-1.example.com:443/ticket/0123456789abcdef0123456789abcdef"
	pkix, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for name, key := range map[string]string{
		"PKCS #1": pkcs1PEM(k),
		"PKIX":    string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pkix})),
	} {
		enc, err := EncryptURL(key, u)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if strings.Contains(enc, "ticket") {
			t.Errorf("%s: %q is the URL in the clear", name, enc)
		}
		// Decrypted by hand, not by DecryptURL, so the wire format is
		// checked rather than only the round trip.
		raw, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			t.Fatalf("%s: not standard base64: %v", name, err)
		}
		got, err := rsa.DecryptOAEP(sha512.New(), nil, k, raw, nil)
		if err != nil || string(got) != u {
			t.Errorf("%s: decrypted %q, %v; want %q", name, got, err, u)
		}
		if got, err := DecryptURL(k, enc); err != nil || got != u {
			t.Errorf("%s: DecryptURL %q, %v", name, got, err)
		}
		if _, err := DecryptURL(rsaKey(t, 2048), enc); err == nil {
			t.Errorf("%s: another key decrypted it", name)
		}
	}

	small := rsaKey(t, 1024)
	if _, err := EncryptURL(pkcs1PEM(small), u); err == nil || !strings.Contains(err.Error(), "2048") {
		t.Errorf("a 1024-bit key: %v; want refused", err)
	}
	if _, err := EncryptURL("not a key", u); err == nil {
		t.Error("a non-PEM key was accepted")
	}
	eck, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ec, err := x509.MarshalPKIXPublicKey(&eck.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := EncryptURL(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: ec})), u); err == nil || !strings.Contains(err.Error(), "not an RSA key") {
		t.Errorf("an ECDSA key: %v; want refused", err)
	}
	// A URL longer than the key can take is an error, not a truncation.
	if _, err := EncryptURL(pkcs1PEM(k), "wss://"+strings.Repeat("h", 200)+":443/ticket/x"); err == nil {
		t.Error("a URL too long for the key was encrypted")
	}
}

// webFixture serves WebConsoles over TLS as the provider does, and
// reaches it as the API server does (RequestWebConsole, pinned).
type webFixture struct {
	endpoint Endpoint
	asked    int
}

func newWebFixture(t *testing.T, answer func(Target) (string, time.Time, error)) *webFixture {
	t.Helper()
	f := &webFixture{}
	cert, digest, err := SelfSigned("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	web := &WebConsoles{
		Client: "system:serviceaccount:banlieue-apiserver:banlieue-apiserver",
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
		URL: func(_ context.Context, t Target) (string, time.Time, error) {
			f.asked++
			return answer(t)
		},
	}
	mux := http.NewServeMux()
	mux.Handle(WebConsolePathPrefix, web)
	srv := httptest.NewUnstartedServer(mux)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	f.endpoint = Endpoint{URL: srv.URL, CertificateSHA256: digest}
	return f
}

// TestWebConsoles: the provider's side answers the API server, and only
// it, with the backend's URL encrypted for the requester; the backend's
// refusals come back as Statuses the API server passes on; a key that
// cannot carry the URL is refused before the backend is asked; a
// certificate other than the published one is not talked to.
func TestWebConsoles(t *testing.T) {
	ctx := context.Background()
	const u = "wss://esx-1:443/ticket/abc"
	expires := time.Now().Add(2 * time.Minute).Truncate(time.Second)
	f := newWebFixture(t, func(tg Target) (string, time.Time, error) {
		switch tg.Name {
		case "on":
			return u, expires, nil
		case "off":
			return "", time.Time{}, fmt.Errorf("%w: off is poweredOff", providers.ErrNotPoweredOn)
		case "libvirt":
			return "", time.Time{}, fmt.Errorf("%w (libvirt)", providers.ErrNoWebConsole)
		}
		return "", time.Time{}, fmt.Errorf("%w: %s", ErrNotServed, tg.Name)
	})
	k := rsaKey(t, 2048)
	target := func(name string) Target {
		return Target{Namespace: "team-a", Resource: "vspheremachines", Name: name, Provider: "ns/p1"}
	}

	a, err := RequestWebConsole(ctx, f.endpoint, target("on"), "apiserver-token", "alice", pkcs1PEM(k))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecryptURL(k, a.URL); err != nil || got != u {
		t.Errorf("decrypted %q, %v; want %q", got, err, u)
	}
	if !a.ExpiresAt.Equal(expires) {
		t.Errorf("expiresAt %s, want %s", a.ExpiresAt, expires)
	}

	for _, tc := range []struct {
		name, token, target, key string
		want                     func(error) bool
		asks                     bool
	}{
		{"powered off", "apiserver-token", "off", pkcs1PEM(k), apierrors.IsConflict, true},
		{"no web console", "apiserver-token", "libvirt", pkcs1PEM(k), apierrors.IsBadRequest, true},
		{"not served", "apiserver-token", "gone", pkcs1PEM(k), apierrors.IsNotFound, true},
		{"another user's token", "tenant-token", "on", pkcs1PEM(k), apierrors.IsForbidden, false},
		{"a token for another Provider", "apiserver-token-p2", "on", pkcs1PEM(k), apierrors.IsUnauthorized, false},
		{"a small key", "apiserver-token", "on", pkcs1PEM(rsaKey(t, 1024)), apierrors.IsBadRequest, false},
	} {
		before := f.asked
		_, err := RequestWebConsole(ctx, f.endpoint, target(tc.target), tc.token, "alice", tc.key)
		if !tc.want(err) {
			t.Errorf("%s: %v (%T)", tc.name, err, err)
		}
		if asked := f.asked > before; asked != tc.asks {
			t.Errorf("%s: backend asked %v, want %v", tc.name, asked, tc.asks)
		}
	}

	// Another certificate than the published one: refused before any
	// request (so the token is not sent to it).
	wrong := sha256.Sum256([]byte("another certificate"))
	before := f.asked
	_, err = RequestWebConsole(ctx, Endpoint{URL: f.endpoint.URL, CertificateSHA256: hex.EncodeToString(wrong[:])},
		target("on"), "apiserver-token", "alice", pkcs1PEM(k))
	if !apierrors.IsServiceUnavailable(err) || !strings.Contains(err.Error(), "certificate") || f.asked != before {
		t.Errorf("a pinned certificate mismatch: %v, asked %d→%d", err, before, f.asked)
	}
}
