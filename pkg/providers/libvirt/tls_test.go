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

package libvirt

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// pki is a CA and the PEM certificates it signed.
type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T, name string) *pki {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &pki{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a certificate and key (PEM) for a server (127.0.0.1) or a client.
func (ca *pki) issue(t *testing.T, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn, Organization: []string{"banlieue"}},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

// TestTLSEndpoint: qemu+tls://HOST:PORT/system with a client certificate
// from the credentials Secret, verified by the CA bundle, against a real
// libvirtd listening for TLS on loopback; a wrong CA bundle and a client
// certificate libvirtd does not trust are ConnectFailed.
func TestTLSEndpoint(t *testing.T) {
	ca, rogue := newCA(t, "banlieue-test-ca"), newCA(t, "rogue-ca")
	serverCert, serverKey := ca.issue(t, "127.0.0.1", true)
	clientCert, clientKey := ca.issue(t, "banlieue-provider", false)
	rogueCert, rogueKey := rogue.issue(t, "intruder", false)
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "libvirtd.log"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	d, err := libvirtd.StartTLS(ctx, filepath.Join(dir, "d"), "", log,
		libvirtd.TLS{Port: port, CA: ca.pem, ServerCert: serverCert, ServerKey: serverKey})
	if err != nil {
		b, _ := os.ReadFile(filepath.Join(dir, "libvirtd.log"))
		t.Fatalf("%v\n%s", err, b)
	}
	defer d.Stop()
	endpoint := fmt.Sprintf("qemu+tls://127.0.0.1:%d/system", port)
	opts := Options{DomainType: "qemu"}
	for _, tc := range []struct {
		name     string
		conn     providers.Connection
		wantFail bool
	}{
		{"trusted", providers.Connection{Endpoint: endpoint, CABundle: ca.pem,
			Credentials: providers.Credentials{ClientCertificate: clientCert, ClientKey: clientKey}}, false},
		{"insecure, no bundle", providers.Connection{Endpoint: endpoint, InsecureSkipTLSVerify: true,
			Credentials: providers.Credentials{ClientCertificate: clientCert, ClientKey: clientKey}}, false},
		{"wrong CA bundle", providers.Connection{Endpoint: endpoint, CABundle: rogue.pem,
			Credentials: providers.Credentials{ClientCertificate: clientCert, ClientKey: clientKey}}, true},
		{"untrusted client", providers.Connection{Endpoint: endpoint, CABundle: ca.pem,
			Credentials: providers.Credentials{ClientCertificate: rogueCert, ClientKey: rogueKey}}, true},
	} {
		t.Logf("case %s", tc.name)
		c, err := Connect(ctx, tc.conn, opts)
		if err == nil {
			var locs []string
			l, ierr := c.Inventory(ctx)
			for _, x := range l {
				locs = append(locs, x.Host)
			}
			_ = c.Close(context.Background())
			if ierr != nil {
				err = ierr
			} else if fmt.Sprint(locs) != "[127.0.0.1]" {
				t.Errorf("%s: inventory %v, want the one host 127.0.0.1", tc.name, locs)
			}
		}
		switch {
		case tc.wantFail && err == nil:
			t.Errorf("%s: connected", tc.name)
		case tc.wantFail && !errors.Is(err, providers.ErrConnect):
			t.Errorf("%s: %v, want a ConnectFailed error", tc.name, err)
		case !tc.wantFail && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		}
	}
}
