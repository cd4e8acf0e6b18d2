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

package integration

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/firestoned/banlieue/pkg/cmd/apiserver"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/pki"
)

// TestStandaloneKubeconfig: the administrator kubeconfig written at start-up
// works; a certificate from another CA and anonymous requests do not.
func TestStandaloneKubeconfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	startServer(t, filepath.Join(dir, "etcd"), "--standalone-kubeconfig="+kubeconfig)
	ctx := context.Background()

	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	admin := clientset.NewForConfigOrDie(cfg)
	if _, err := admin.BanlieueV1alpha1().VMClasses().List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("admin list: %v", err)
	}

	other, err := pki.NewCA("other")
	if err != nil {
		t.Fatal(err)
	}
	forged, err := other.IssueClient("mallory", "system:masters")
	if err != nil {
		t.Fatal(err)
	}
	bad := restclient.CopyConfig(cfg)
	bad.CertData, bad.KeyData = forged.CertPEM, forged.KeyPEM
	_, err = clientset.NewForConfigOrDie(bad).BanlieueV1alpha1().VMClasses().List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) {
		t.Errorf("foreign certificate: err = %v, want 401/403", err)
	}
	// Anonymous requests are turned away by default, as unauthenticated.
	anon := restclient.AnonymousClientConfig(cfg)
	_, err = clientset.NewForConfigOrDie(anon).BanlieueV1alpha1().VMClasses().List(ctx, metav1.ListOptions{})
	if !apierrors.IsUnauthorized(err) {
		t.Errorf("anonymous: err = %v, want 401", err)
	}
}

// TestEncryptionAtRest: with --encryption-provider-config, VirtualMachines
// are stored encrypted in etcd while Providers (not configured) stay plain,
// and both read back through the API.
func TestEncryptionAtRest(t *testing.T) {
	dir := t.TempDir()
	encCfg := filepath.Join(dir, "encryption.yaml")
	if err := os.WriteFile(encCfg, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: [virtualmachines.banlieue.io]
    providers:
      - aescbc:
          keys:
            - name: key1
              secret: c2VjcmV0IGlzIHNlY3VyZSwgb3IgaXMgaXQ/IDMyYmI=
      - identity: {}
`), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startServer(t, filepath.Join(dir, "etcd"), "--encryption-provider-config="+encCfg)
	ctx := context.Background()
	seed(t, ctx, s.Client)
	if _, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, newVM("secret-vm", "db-prod-large", "ubuntu-22.04-cloudinit"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Get(ctx, "secret-vm", metav1.GetOptions{}); err != nil {
		t.Fatalf("read back: %v", err)
	}

	vmValue, providerValue := storedValue(t, s.EtcdURL, "virtualmachines", "secret-vm"), storedValue(t, s.EtcdURL, "providers", "prod-vsphere")
	if !bytes.HasPrefix(vmValue, []byte("k8s:enc:aescbc:v1:key1:")) || bytes.Contains(vmValue, []byte("db-prod-large")) {
		t.Errorf("VirtualMachine stored unencrypted: %.60q", vmValue)
	}
	if !bytes.Contains(providerValue, []byte("vcenter.example.com")) || !bytes.HasPrefix(providerValue, []byte("k8s\x00")) || !bytes.Contains(providerValue, []byte("banlieue.io/v1alpha1")) {
		t.Errorf("Provider not stored as plain v1alpha1 protobuf: %.80q", providerValue)
	}
}

// TestStorageMediaType: --storage-media-type acts. A server storing JSON
// writes a VM; restarted on the same etcd with the default, protobuf, it
// still reads that VM, stores a new one as protobuf (Kubernetes' "k8s\x00"
// envelope), and rewrites the old one in protobuf on its next update.
func TestStorageMediaType(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	s := startServer(t, filepath.Join(dir, "etcd"), "--storage-media-type=application/json")
	seed(t, ctx, s.Client)
	if _, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, newVM("json-vm", "db-prod-large", "ubuntu-22.04-cloudinit"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := storedValue(t, s.EtcdURL, "virtualmachines", "json-vm"); !bytes.HasPrefix(v, []byte("{")) {
		t.Fatalf("--storage-media-type=application/json stored %.40q", v)
	}
	s.stop()

	s = startServer(t, filepath.Join(dir, "etcd"))
	old, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Get(ctx, "json-vm", metav1.GetOptions{})
	if err != nil || old.Spec.ClassRef.Name != "db-prod-large" {
		t.Fatalf("the JSON-stored VM read through protobuf storage: %+v, %v", old, err)
	}
	if _, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, newVM("proto-vm", "db-prod-large", "ubuntu-22.04-cloudinit"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := storedValue(t, s.EtcdURL, "virtualmachines", "proto-vm"); !bytes.HasPrefix(v, []byte("k8s\x00")) {
		t.Errorf("the default storage media type stored %.40q", v)
	}
	old.Labels = map[string]string{"rewritten": "yes"}
	if _, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Update(ctx, old, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if v := storedValue(t, s.EtcdURL, "virtualmachines", "json-vm"); !bytes.HasPrefix(v, []byte("k8s\x00")) {
		t.Errorf("the updated VM is still stored as %.40q", v)
	}
}

// storedValue is the etcd value of the object name of resource in ns.
func storedValue(t *testing.T, etcdURL, resource, name string) []byte {
	t.Helper()
	etcd, err := clientv3.New(clientv3.Config{Endpoints: []string{etcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer etcd.Close()
	resp, err := etcd.Get(context.Background(), "/registry/banlieue.io/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range resp.Kvs {
		if key := string(kv.Key); strings.Contains(key, "/"+resource+"/") && strings.HasSuffix(key, "/"+ns+"/"+name) {
			return kv.Value
		}
	}
	t.Fatalf("%s %s not under /registry/banlieue.io/ (%d keys)", resource, name, len(resp.Kvs))
	return nil
}

// TestStandaloneSafeByDefault: a standalone server listens on loopback and
// turns away requests without credentials unless told otherwise.
func TestStandaloneSafeByDefault(t *testing.T) {
	for _, tc := range []struct {
		flags     []string
		bind      string
		anonymous bool
	}{
		{nil, "127.0.0.1", false},
		{[]string{"--bind-address=0.0.0.0"}, "0.0.0.0", false},
		{[]string{"--standalone-anonymous"}, "127.0.0.1", true},
	} {
		o := apiserver.NewOptions()
		o.Standalone = true
		applyFlags(t, o, tc.flags)
		if err := o.Complete(); err != nil {
			t.Fatalf("options: %v", err)
		}
		if got := o.RecommendedOptions.SecureServing.BindAddress.String(); got != tc.bind {
			t.Errorf("flags %v: bind address %s, want %s", tc.flags, got, tc.bind)
		}
		if got := o.StandaloneAnonymous; got != tc.anonymous {
			t.Errorf("flags %v: anonymous %t, want %t", tc.flags, got, tc.anonymous)
		}
	}
	o := apiserver.NewOptions()
	applyFlags(t, o, []string{"--standalone-anonymous"})
	if err := o.Validate(); err == nil || !strings.Contains(err.Error(), "--standalone-anonymous needs --standalone") {
		t.Errorf("--standalone-anonymous without --standalone: %v", err)
	}

	// What an anonymous request meets when let in: /healthz is always
	// allowed, so 200 there is authentication admitting it.
	// (TestStandaloneKubeconfig checks the default: 401.)
	srv := startServer(t, t.TempDir(), "--standalone-anonymous")
	// A plain HTTP/1.1 client without keep-alive, so no connection of the
	// test's outlives the request (a lingering one would hold the server's
	// graceful shutdown).
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.Config.CAData)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: srv.Config.ServerName}, DisableKeepAlives: true}}
	resp, err := hc.Get(srv.Config.Host + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("--standalone-anonymous: anonymous GET /healthz = %d, want 200", resp.StatusCode)
	}
}
