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

package devenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/pki"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// PodsLibvirtd is a private libvirtd (its guest network and pool, in a
// network namespace of its own) that provider pods reach over
// qemu+tls://, as they reach a libvirt host of a real site: its
// forwarder's port is exposed on the node's bridge gateway, which its
// serving certificate names.
type PodsLibvirtd struct {
	*libvirtd.Daemon
	// Endpoint is the qemu+tls:// URI pods use.
	Endpoint string
	// CA is the PEM of the CA that signed the daemon's and ClientCert.
	CA []byte
	// ClientCert and ClientKey are a client certificate the daemon takes.
	ClientCert, ClientKey []byte

	log *os.File // the daemon's and its forwarder's
	// ca and client are its site's, for StartPodsLibvirtdBeside.
	ca     *pki.CA
	client *pki.KeyPair
}

// StartPodsLibvirtd starts a PodsLibvirtd named name (its folder under
// the environment's, its log beside the environment's logs), with a CA of
// its own. Stop it with StopAndCheck.
func (e *Env) StartPodsLibvirtd(ctx context.Context, name string) (*PodsLibvirtd, error) {
	ds, err := e.StartPodsLibvirtds(ctx, name)
	if err != nil {
		return nil, err
	}
	return ds[0], nil
}

// StartPodsLibvirtds starts a PodsLibvirtd for each name as the hosts of
// one site: one CA signs every daemon's serving certificate and the one
// client certificate they all take, so that one Provider of them all
// names one credentials Secret and one CA bundle. On an error it stops
// those it started.
func (e *Env) StartPodsLibvirtds(ctx context.Context, names ...string) ([]*PodsLibvirtd, error) {
	if e.node == nil {
		return nil, fmt.Errorf("libvirtds %v: no real node for their pods (Config.Node)", names)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("libvirtds: no name given")
	}
	ca, err := pki.NewCA(names[0] + "-ca")
	if err != nil {
		return nil, err
	}
	client, err := ca.IssueClient("banlieue-provider-libvirt")
	if err != nil {
		return nil, err
	}
	var ds []*PodsLibvirtd
	for _, name := range names {
		d, err := e.startPodsLibvirtd(ctx, name, ca, client)
		if err != nil {
			for _, started := range ds {
				_ = started.StopAndCheck()
			}
			return nil, err
		}
		ds = append(ds, d)
	}
	return ds, nil
}

// StartPodsLibvirtdBeside starts a PodsLibvirtd named name as another
// host of first's site (StartPodsLibvirtds), when the test needs it only
// later: first's CA signs it, and it takes first's client certificate.
func (e *Env) StartPodsLibvirtdBeside(ctx context.Context, name string, first *PodsLibvirtd) (*PodsLibvirtd, error) {
	return e.startPodsLibvirtd(ctx, name, first.ca, first.client)
}

// startPodsLibvirtd starts the PodsLibvirtd name, its serving certificate
// signed by ca, taking client.
func (e *Env) startPodsLibvirtd(ctx context.Context, name string, ca *pki.CA, client *pki.KeyPair) (*PodsLibvirtd, error) {
	server, err := ca.IssueServing("libvirtd", nil, []net.IP{net.IPv4(127, 0, 0, 1), net.ParseIP(e.NodeGateway())})
	if err != nil {
		return nil, err
	}
	port, err := loopback.FreePort()
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(e.Logs(), "libvirtd-"+name+".log"))
	if err != nil {
		return nil, err
	}
	d, err := libvirtd.StartTLS(ctx, filepath.Join(e.Dir(), "libvirtd-"+name), filepath.Join(e.cfg.BinDir, ".libvirt-cache"), log,
		libvirtd.TLS{Port: port, CA: ca.CertPEM, ServerCert: server.CertPEM, ServerKey: server.KeyPEM})
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		_ = log.Close()
		return nil, fmt.Errorf("libvirtd %s: %w\n%s", name, err, b)
	}
	addr, err := e.ExposeToPods(port)
	if err != nil {
		d.Stop()
		_ = log.Close()
		return nil, err
	}
	return &PodsLibvirtd{Daemon: d, Endpoint: fmt.Sprintf("qemu+tls://%s/system", addr),
		CA: ca.CertPEM, ClientCert: client.CertPEM, ClientKey: client.KeyPEM, log: log, ca: ca, client: client}, nil
}

// Credentials are the objects a libvirt Provider of d names in
// namespace: the client certificate as kubernetes.io/tls Secret secret,
// the CA as key ca.crt of ConfigMap configMap.
func (d *PodsLibvirtd) Credentials(namespace, secret, configMap string) (*corev1.Secret, *corev1.ConfigMap) {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret, Namespace: namespace}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{corev1.TLSCertKey: d.ClientCert, corev1.TLSPrivateKeyKey: d.ClientKey}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: configMap, Namespace: namespace}, Data: map[string]string{"ca.crt": string(d.CA)}}
}

// StopAndCheck stops the daemon and says what it left running in its
// network namespace (nothing, or an error naming the processes).
func (d *PodsLibvirtd) StopAndCheck() error {
	d.Stop()
	_ = d.log.Close()
	if left := d.Processes(); len(left) > 0 {
		return fmt.Errorf("processes %v still in the libvirtd's network namespace after Stop", left)
	}
	return nil
}
