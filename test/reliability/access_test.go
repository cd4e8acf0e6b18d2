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
package reliability

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// userClient is an HTTP client holding user's client certificate.
func userClient(t *testing.T, user string) *http.Client {
	t.Helper()
	kubeconfig, err := env.UserKubeconfig(user)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	hc, err := restclient.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return hc
}

// TestRBACMatrix: people bound to Kubernetes' view, edit and admin roles in
// one namespace, and someone bound to nothing, get exactly what
// artifacts/deploy/base/rbac-users.yaml grants, through kube-apiserver:
// every verb on VMs, their status, resolved and placement subresources,
// Providers and the catalogue, in their namespace and in another. Nobody
// but the controllers writes status.
func TestRBACMatrix(t *testing.T) {
	ctx := context.Background()
	kube, err := kubernetes.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	const mine, other = "rbac-mine", "rbac-other"

	users := []string{"ns-viewer", "ns-editor", "ns-admin", "nobody"}
	for _, ns := range []string{mine, other} {
		namespace(t, ns)
		if _, err := client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, testVM(ns, "vm-1"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		for _, u := range users {
			if _, err := client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, testVM(ns, "victim-"+u), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "p-1", Namespace: ns}, Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection:       v1alpha1.ProviderConnection{Endpoint: "https://vcenter.example.com/sdk", CredentialsRef: v1alpha1.LocalObjectReference{Name: "creds"}}}}
		if _, err := client.BanlieueV1alpha1().Providers(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, role := range []string{"view", "edit", "admin"} {
		user := map[string]string{"view": "ns-viewer", "edit": "ns-editor", "admin": "ns-admin"}[role]
		rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: mine},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role},
			Subjects: []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: user}}}
		if _, err := kube.RbacV1().RoleBindings(mine).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	vmJSON := func(ns, name string) string { return string(mustJSON(testVM(ns, name))) }
	type action struct {
		name, method, path, body string
		// allowed lists the users allowed in their own namespace.
		allowed []string
		// cluster actions are the same in both namespaces.
		cluster bool
	}
	vms := func(ns string) string { return "/apis/banlieue.io/v1alpha1/namespaces/" + ns + "/virtualmachines" }
	provs := func(ns string) string { return "/apis/banlieue.io/v1alpha1/namespaces/" + ns + "/providers" }
	readers := []string{"ns-viewer", "ns-editor", "ns-admin"}
	writers := []string{"ns-editor", "ns-admin"}
	actions := func(ns, user string) []action {
		const statusBody = `{"status":{"observedGeneration":7}}`
		return []action{
			{"list VMs", http.MethodGet, vms(ns), "", readers, false},
			{"get a VM", http.MethodGet, vms(ns) + "/vm-1", "", readers, false},
			{"watch VMs", http.MethodGet, vms(ns) + "?watch=true&timeoutSeconds=1", "", readers, false},
			{"get a VM's status", http.MethodGet, vms(ns) + "/vm-1/status", "", readers, false},
			{"get a VM's resolved view", http.MethodGet, vms(ns) + "/vm-1/resolved", "", readers, false},
			{"get a VM's placement", http.MethodGet, vms(ns) + "/vm-1/placement", "", readers, false},
			{"create a VM", http.MethodPost, vms(ns), vmJSON(ns, "new-"+user), writers, false},
			{"patch a VM", http.MethodPatch, vms(ns) + "/vm-1", `{"metadata":{"labels":{"by":"` + user + `"}}}`, writers, false},
			{"delete a VM", http.MethodDelete, vms(ns) + "/victim-" + user, "", writers, false},
			{"patch a VM's status", http.MethodPatch, vms(ns) + "/vm-1/status", statusBody, nil, false},
			{"list Providers", http.MethodGet, provs(ns), "", readers, false},
			{"get a Provider", http.MethodGet, provs(ns) + "/p-1", "", readers, false},
			{"patch a Provider", http.MethodPatch, provs(ns) + "/p-1", `{"metadata":{"labels":{"by":"` + user + `"}}}`, []string{"ns-admin"}, false},
			{"patch a Provider's status", http.MethodPatch, provs(ns) + "/p-1/status", statusBody, nil, false},
			{"list VMClasses", http.MethodGet, "/apis/banlieue.io/v1alpha1/vmclasses", "", users, true},
			{"list VMImages", http.MethodGet, "/apis/banlieue.io/v1alpha1/vmimages", "", users, true},
			{"create a VMClass", http.MethodPost, "/apis/banlieue.io/v1alpha1/vmclasses",
				`{"apiVersion":"banlieue.io/v1alpha1","kind":"VMClass","metadata":{"name":"by-` + user + `"},"spec":{"hardware":{"cpus":1,"memoryMiB":512}}}`, nil, true},
		}
	}
	var answered count.Ops
	for _, user := range users {
		hc := userClient(t, user)
		for _, ns := range []string{mine, other} {
			for _, a := range actions(ns, user) {
				if a.cluster && ns == other {
					continue
				}
				want := false
				for _, u := range a.allowed {
					want = want || u == user && (ns == mine || a.cluster)
				}
				key := fmt.Sprintf("%s/%s/%s", user, ns, a.name)
				t.Run(key, func(t *testing.T) {
					var body io.Reader
					if a.body != "" {
						body = strings.NewReader(a.body)
					}
					req, err := http.NewRequestWithContext(ctx, a.method, env.KubeAPIServerURL+a.path, body)
					if err != nil {
						t.Fatal(err)
					}
					req.Header.Set("Content-Type", map[string]string{http.MethodPatch: "application/merge-patch+json"}[a.method])
					if a.method != http.MethodPatch {
						req.Header.Set("Content-Type", "application/json")
					}
					resp, err := hc.Do(req)
					if err != nil {
						t.Fatal(err)
					}
					msg, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					answered.Answered(key)
					got := resp.StatusCode < 300
					if got != want || !want && resp.StatusCode != http.StatusForbidden {
						t.Errorf("%s %s as %s: HTTP %d, allowed=%v wanted: %.300s", a.method, a.path, user, resp.StatusCode, want, msg)
					}
				})
			}
		}
	}
	record(t, row{Scenario: "RBAC matrix: view/edit/admin/unbound users x own/other namespace x VM, status, resolved, placement, Provider and catalogue verbs",
		Operations: answered.N(), Faults: "requests beyond each role"})
}

var netDialer = net.Dialer{Timeout: 5 * time.Second}

// TestTLSMinimumVersion: banlieue's port refuses TLS 1.0 and 1.1 and
// speaks 1.2 and 1.3.
func TestTLSMinimumVersion(t *testing.T) {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(env.BanlieueCA)
	u, err := url.Parse(env.BanlieueURL)
	if err != nil {
		t.Fatal(err)
	}
	var handshakes count.Ops
	for _, v := range []struct {
		version uint16
		name    string
		ok      bool
	}{{tls.VersionTLS10, "1.0", false}, {tls.VersionTLS11, "1.1", false}, {tls.VersionTLS12, "1.2", true}, {tls.VersionTLS13, "1.3", true}} {
		conn, err := tls.DialWithDialer(&netDialer, "tcp", u.Host, &tls.Config{RootCAs: pool, MinVersion: v.version, MaxVersion: v.version, ServerName: "127.0.0.1"})
		if err == nil {
			conn.Close()
		}
		// A refusal must be banlieue's (a TLS alert), not a dial failure.
		if !count.IsAnswer(err) {
			t.Errorf("TLS %s: no answer from banlieue: %v", v.name, err)
		}
		handshakes.Done("TLS "+v.name, err)
		if (err == nil) != v.ok {
			t.Errorf("TLS %s: handshake error %v, want success=%v", v.name, err, v.ok)
		}
	}
	record(t, row{Scenario: "TLS 1.0 and 1.1 refused, 1.2 and 1.3 served on banlieue's port", Operations: handshakes.N(), Faults: "old TLS versions"})
}

// TestEncryptionAtRest: with --encryption-provider-config, what banlieue
// writes to etcd is ciphertext (read etcd directly), and reads decrypt it.
func TestEncryptionAtRest(t *testing.T) {
	ctx := context.Background()
	const ns = "encrypted"
	namespace(t, ns)
	marker := fmt.Sprintf("plaintext-marker-%d", time.Now().UnixNano())
	vm := testVM(ns, "secret-vm")
	vm.Annotations = map[string]string{"note": marker}
	if _, err := client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := client.BanlieueV1alpha1().VirtualMachines(ns).Get(ctx, "secret-vm", metav1.GetOptions{})
	if err != nil || got.Annotations["note"] != marker {
		t.Fatalf("read back: %v %v", err, got.Annotations)
	}
	c, err := clientv3.New(clientv3.Config{Endpoints: []string{env.EtcdURL()}, DialTimeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	resp, err := c.Get(ctx, "/banlieue.io/registry/", clientv3.WithPrefix())
	if err != nil {
		t.Fatal(err)
	}
	found := 0
	var read count.Ops // every key of banlieue's read back from etcd and searched
	for _, kv := range resp.Kvs {
		read.Answered(string(kv.Key))
		if bytes.Contains(kv.Value, []byte(marker)) {
			t.Errorf("%s holds the plaintext", kv.Key)
		}
		if strings.HasSuffix(string(kv.Key), "/"+ns+"/secret-vm") {
			found++
			if !bytes.HasPrefix(kv.Value, []byte("k8s:enc:secretbox:v1:")) {
				t.Errorf("%s is not encrypted: %.40q", kv.Key, kv.Value)
			}
		}
	}
	if found != 1 {
		t.Errorf("the VM's key was found %d times in etcd", found)
	}
	record(t, row{Scenario: "encryption at rest: banlieue's objects in etcd are secretbox ciphertext, plaintext nowhere",
		Operations: read.N(), Faults: "direct etcd read"})
}

// catalogue creates the class and image testVM references, so the VMs
// resolve.
func catalogue(ctx context.Context) error {
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "small"},
		Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 1024}}}
	if _, err := client.BanlieueV1alpha1().VMClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	image := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu"}, Spec: v1alpha1.VMImageSpec{OSFamily: "linux",
		Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu"}}}}
	_, err := client.BanlieueV1alpha1().VMImages().Create(ctx, image, metav1.CreateOptions{})
	return err
}
