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
package apiserver

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/firestoned/banlieue/pkg/pki"
)

// writeStandaloneAccess makes a standalone server reachable with kubectl: it
// creates a CA, a serving certificate for loopback, a client CA that
// authenticates users, and writes a kubeconfig for an administrator
// (group system:masters, which the delegating authorizer always allows).
func (o *Options) writeStandaloneAccess() error {
	path := o.StandaloneKubeconfig
	dir := filepath.Join(filepath.Dir(path), "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	ca, err := pki.NewCA("banlieue-standalone-ca")
	if err != nil {
		return err
	}
	serving, err := ca.IssueServing("localhost", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback})
	if err != nil {
		return err
	}
	admin, err := ca.IssueClient("banlieue-admin", "system:masters")
	if err != nil {
		return err
	}
	files := map[string][]byte{
		"ca.crt": ca.CertPEM, "serving.crt": serving.CertPEM, "serving.key": serving.KeyPEM,
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	ss := o.RecommendedOptions.SecureServing
	ss.ServerCert.CertKey.CertFile = filepath.Join(dir, "serving.crt")
	ss.ServerCert.CertKey.KeyFile = filepath.Join(dir, "serving.key")
	o.RecommendedOptions.Authentication.ClientCert.ClientCA = filepath.Join(dir, "ca.crt")

	port := ss.BindPort
	if ss.Listener != nil {
		port = ss.Listener.Addr().(*net.TCPAddr).Port
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["banlieue"] = &clientcmdapi.Cluster{
		Server:                   "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		CertificateAuthorityData: ca.CertPEM,
	}
	cfg.AuthInfos["banlieue-admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: admin.CertPEM, ClientKeyData: admin.KeyPEM}
	cfg.Contexts["banlieue"] = &clientcmdapi.Context{Cluster: "banlieue", AuthInfo: "banlieue-admin", Namespace: "default"}
	cfg.CurrentContext = "banlieue"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		return fmt.Errorf("writing kubeconfig %s: %w", path, err)
	}
	return nil
}
