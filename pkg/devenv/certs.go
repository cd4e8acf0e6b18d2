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
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"net"
	"os"
	"path/filepath"

	"github.com/firestoned/banlieue/pkg/pki"
)

// writeCertificates issues a fresh set of certificates for every start:
//   - the cluster CA: kube-apiserver's serving certificate and every client
//     certificate (admin, banlieue's identity, test users);
//   - the front-proxy CA: the client certificate the aggregator proxies with;
//   - banlieue's own CA: its serving certificate, which the APIService's
//     caBundle pins;
//   - the service-account signing key.
func (e *Env) writeCertificates() error {
	dir := filepath.Join(e.cfg.Dir, "pki")
	files := map[string][]byte{}
	loopback := []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}

	ca, err := pki.NewCA("devenv-cluster-ca")
	if err != nil {
		return err
	}
	e.ca = ca
	files["ca.crt"] = ca.CertPEM
	serving, err := ca.IssueServing("kube-apiserver",
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"},
		append(loopback, net.IPv4(10, 96, 0, 1)))
	if err != nil {
		return err
	}
	files["kube-apiserver.crt"], files["kube-apiserver.key"] = serving.CertPEM, serving.KeyPEM

	// kube-apiserver's identity to a real node's kubelet (node.go).
	kubeletClient, err := ca.IssueClient(kubeletClientUser)
	if err != nil {
		return err
	}
	files["kubelet-client.crt"], files["kubelet-client.key"] = kubeletClient.CertPEM, kubeletClient.KeyPEM

	frontProxyCA, err := pki.NewCA("devenv-front-proxy-ca")
	if err != nil {
		return err
	}
	files["front-proxy-ca.crt"] = frontProxyCA.CertPEM
	proxyClient, err := frontProxyCA.IssueClient("front-proxy-client")
	if err != nil {
		return err
	}
	files["front-proxy-client.crt"], files["front-proxy-client.key"] = proxyClient.CertPEM, proxyClient.KeyPEM

	banlieueCA, err := pki.NewCA("devenv-banlieue-ca")
	if err != nil {
		return err
	}
	e.BanlieueCA = banlieueCA.CertPEM
	files["banlieue-ca.crt"] = banlieueCA.CertPEM
	bServing, err := banlieueCA.IssueServing("banlieue-apiserver",
		[]string{"localhost", loopbackService + "." + APIServerNamespace + ".svc", "banlieue-apiserver." + APIServerNamespace + ".svc"}, loopback)
	if err != nil {
		return err
	}
	files["banlieue-serving.crt"], files["banlieue-serving.key"] = bServing.CertPEM, bServing.KeyPEM

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saDER, err := x509.MarshalECPrivateKey(saKey)
	if err != nil {
		return err
	}
	saPub, err := x509.MarshalPKIXPublicKey(&saKey.PublicKey)
	if err != nil {
		return err
	}
	files["sa.key"] = pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: saDER})
	files["sa.pub"] = pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: saPub})

	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
