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
	"crypto/sha256"
	"crypto/subtle"
	"crypto/tls"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/proxy"
	"k8s.io/client-go/transport"
)

// Endpoint is where a Provider's consoles are served
// (Provider.status.console).
type Endpoint struct {
	URL string
	// CertificateSHA256 is the hex SHA-256 of the server's certificate
	// (DER), the only one accepted.
	CertificateSHA256 string
}

// Proxy is the API server's side of an attach: the client's upgraded
// connection carried to the provider's endpoint, whose certificate is
// pinned, with the API server's own token for that Provider
// (ProviderAudience) instead of any credential of the client's.
type Proxy struct {
	Endpoint  Endpoint
	Target    Target
	Takeover  bool
	Requester string
	Token     string
	Responder proxy.ErrorResponder
}

// Handler is the connect handler of virtualmachines/NAME/console.
func (p Proxy) Handler() (http.Handler, error) {
	u, err := url.Parse(p.Endpoint.URL)
	if err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("console endpoint %q is not an https URL", p.Endpoint.URL)
	}
	u.Path = p.Target.Path()
	q := url.Values{"provider": {p.Target.Provider}}
	if p.Takeover {
		q.Set("takeover", "true")
	}
	u.RawQuery = q.Encode()
	conn, err := p.Endpoint.transport()
	if err != nil {
		return nil, err
	}
	withToken := transport.NewBearerAuthRoundTripper(p.Token, proxy.MirrorRequest)
	h := proxy.NewUpgradeAwareHandler(u, conn, false, true, p.Responder)
	h.UpgradeTransport = proxy.NewUpgradeRequestRoundTripper(conn, withToken)
	return http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r := req.Clone(req.Context())
		for k := range r.Header {
			if dropped(k) {
				r.Header.Del(k)
			}
		}
		r.Header.Set(RequesterHeader, p.Requester)
		h.ServeHTTP(w, r)
	}), nil
}

// transport reaches e, accepting only the certificate it publishes.
func (e Endpoint) transport() (*http.Transport, error) {
	pin, err := hex.DecodeString(e.CertificateSHA256)
	if err != nil || len(pin) != sha256.Size {
		return nil, fmt.Errorf("console endpoint certificate digest %q is not a hex SHA-256", e.CertificateSHA256)
	}
	return &http.Transport{TLSClientConfig: &tls.Config{
		MinVersion: tls.VersionTLS12,
		// The certificate is self-signed by the provider's process: its
		// digest, published by that process, is what is verified.
		InsecureSkipVerify: true, //nolint:gosec // pinned by VerifyConnection
		VerifyConnection: func(cs tls.ConnectionState) error {
			if len(cs.PeerCertificates) == 0 {
				return fmt.Errorf("the console endpoint presented no certificate")
			}
			got := sha256.Sum256(cs.PeerCertificates[0].Raw)
			if subtle.ConstantTimeCompare(got[:], pin) != 1 {
				return fmt.Errorf("the console endpoint's certificate is not the one its Provider publishes (a replica that lost its leadership?); attach again")
			}
			return nil
		},
	}}, nil
}

// dropped are the request headers that carry the client's identity or
// credentials: none reaches a provider.
func dropped(header string) bool {
	h := http.CanonicalHeaderKey(header)
	return h == "Authorization" || h == "Cookie" || strings.HasPrefix(h, "X-Remote-") || strings.HasPrefix(h, "Impersonate-")
}
