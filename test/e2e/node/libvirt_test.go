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

package node

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/pki"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestLibvirtProviderRunsAsPods: the shipped libvirt provider Deployment,
// applied as it is, runs as a pod that reaches a real libvirtd over
// qemu+tls:// from the pod network (libvirtd on loopback, its port exposed
// on the bridge's gateway, its certificate naming that address), with the
// client certificate and CA read by the names its Role grants
// (libvirt-creds, libvirt-ca), and reports the Provider Ready
// (runStaticProvider). (A libvirtd listening for
// TLS has no guest network of its own: this is the connection a remote
// host gives, not a VM.)
func TestLibvirtProviderRunsAsPods(t *testing.T) {
	if why := libvirtd.Missing(); why != "" {
		t.Fatalf("a libvirtd needs %s", why)
	}
	ctx := context.Background()
	c, err := env.ServedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	endpoint, ca := podsLibvirtd(t, ctx)

	objs := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "libvirt-creds", Namespace: devenv.Namespace}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: ca.clientCert, corev1.TLSPrivateKeyKey: ca.clientKey}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "libvirt-ca", Namespace: devenv.Namespace}, Data: map[string]string{"ca.crt": string(ca.pem)}},
	}
	for _, o := range objs {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "pod-libvirt", Namespace: devenv.Namespace},
		Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"},
			Connection: v1alpha1.ProviderConnection{Endpoint: endpoint,
				CredentialsRef: v1alpha1.LocalObjectReference{Name: "libvirt-creds"},
				CABundle:       &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Name: "libvirt-ca"}}}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}

	runStaticProvider(t, ctx, c, p, "libvirt")
}

// libvirtTLS is what a libvirt host's TLS takes: its CA (PEM) and a client
// certificate it signed.
type libvirtTLS struct{ pem, clientCert, clientKey []byte }

// podsLibvirtd starts a private libvirtd listening for TLS that pods reach
// (its port exposed on the bridge's gateway, its certificate naming that
// address) and returns the endpoint pods use and its TLS material; the
// daemon stops when the test ends.
func podsLibvirtd(t *testing.T, ctx context.Context) (string, libvirtTLS) {
	t.Helper()
	ca, err := pki.NewCA("libvirt-ca")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.IssueServing("libvirtd", nil, []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(env.NodeGateway())})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("banlieue-provider-libvirt")
	if err != nil {
		t.Fatal(err)
	}
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	log, err := os.Create(filepath.Join(dir, "libvirtd.log"))
	if err != nil {
		t.Fatal(err)
	}
	start, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := libvirtd.StartTLS(start, filepath.Join(dir, "d"), "", log,
		libvirtd.TLS{Port: port, CA: ca.CertPEM, ServerCert: server.CertPEM, ServerKey: server.KeyPEM})
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("libvirtd: %v\n%s", err, b)
	}
	t.Cleanup(d.Stop)
	addr, err := env.ExposeToPods(port)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("qemu+tls://%s/system", addr), libvirtTLS{pem: ca.CertPEM, clientCert: client.CertPEM, clientKey: client.KeyPEM}
}
