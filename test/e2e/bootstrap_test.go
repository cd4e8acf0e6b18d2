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
package e2e

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firestoned/banlieue/pkg/bootstrap"
	"github.com/firestoned/banlieue/pkg/devenv"
)

// TestBootstrap: "banlieue bootstrap operator" installs into an empty
// cluster (a control plane without banlieue) what artifacts/deploy does,
// passing the same RBAC checks, with an APIService whose caBundle verifies
// the API server's certificate; --dry-run prints and changes nothing; a
// second run keeps the certificates; --wait reports progress and fails
// clearly when nothing can run (the test cluster has no nodes); bootstrap
// provider waits for banlieue.io and says why it is not served.
func TestBootstrap(t *testing.T) {
	cp, err := devenv.Start(context.Background(), devenv.Config{Dir: t.TempDir(), BinDir: binDir, ControlPlaneOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer cp.Stop()
	kcfg := "--kubeconfig=" + cp.AdminKubeconfig
	banlieue := func(args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(binDir, "banlieue"), append(args, kcfg)...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		return out.String(), err
	}

	out, err := banlieue("bootstrap", "operator", "--dry-run")
	if err != nil {
		t.Fatalf("--dry-run: %v\n%s", err, out)
	}
	for _, want := range []string{"kind: APIService", "kind: CustomResourceDefinition", "name: banlieue-operator", "image: ghcr.io/firestoned/banlieue:"} {
		if !strings.Contains(out, want) {
			t.Errorf("--dry-run output lacks %q", want)
		}
	}
	if _, _, err := kc(t, kcfg, "get", "namespace", devenv.Namespace); err == nil {
		t.Fatal("--dry-run created the namespace")
	}
	// Refused before anything is applied: no APIService, no CRD.
	for _, ns := range []string{"kube-system", bootstrap.APIServerNamespace} {
		out, err := banlieue("bootstrap", "operator", "-n", ns)
		if err == nil || !strings.Contains(out, "-n/--namespace: banlieue may not be installed in "+ns) {
			t.Errorf("bootstrap operator -n %s: %v\n%s", ns, err, out)
		}
	}
	if _, _, err := kc(t, kcfg, "get", "apiservice", "v1alpha1.banlieue.io"); err == nil {
		t.Fatal("a refused namespace installed the APIService")
	}

	out, err = banlieue("bootstrap", "operator", "--version=v0.1.0-e2e")
	if err != nil {
		t.Fatalf("bootstrap operator: %v\n%s", err, out)
	}
	for _, want := range []string{"deployment/banlieue-system/banlieue-operator serverside-applied", "apiservice/v1alpha1.banlieue.io serverside-applied",
		"customresourcedefinition/vspheremachines.infrastructure.banlieue.io serverside-applied"} {
		if !strings.Contains(out, want) {
			t.Errorf("bootstrap output lacks %q:\n%s", want, out)
		}
	}
	t.Run("the install", func(t *testing.T) {
		for _, d := range []string{"banlieue-system/banlieue-controller", "banlieue-system/banlieue-operator", "banlieue-apiserver/banlieue-apiserver"} {
			ns, name, _ := strings.Cut(d, "/")
			img := mustKC(t, kcfg, "-n", ns, "get", "deployment", name, "-o", "jsonpath={.spec.template.spec.containers[0].image}")
			if img != "ghcr.io/firestoned/banlieue:v0.1.0-e2e" {
				t.Errorf("%s runs %q", d, img)
			}
			args := mustKC(t, kcfg, "-n", ns, "get", "deployment", name, "-o", "jsonpath={.spec.template.spec.containers[0].args}")
			if shares := strings.Contains(args, `"--shared-provider-namespace=banlieue-system"`); !shares {
				t.Errorf("%s args %s: sharing the install namespace's Providers is %v", d, args, shares)
			}
			managers := mustKC(t, kcfg, "-n", ns, "get", "deployment", name, "--show-managed-fields", "-o", "jsonpath={.metadata.managedFields[*].manager}")
			if !strings.Contains(managers, bootstrap.FieldManager) {
				t.Errorf("%s is not managed by %s: %s", d, bootstrap.FieldManager, managers)
			}
		}
		checkInstallGrants(t, cp.AdminKubeconfig)
		checkAPIService(t, kcfg)
	})

	t.Run("a second run keeps the certificates", func(t *testing.T) {
		before := mustKC(t, kcfg, "-n", bootstrap.APIServerNamespace, "get", "secret", bootstrap.ServingSecret, "-o", "jsonpath={.data.tls\\.crt}")
		out, err := banlieue("bootstrap", "operator", "--version=v0.1.0-e2e")
		if err != nil || !strings.Contains(out, "Keeping the certificates") {
			t.Fatalf("second run: %v\n%s", err, out)
		}
		if after := mustKC(t, kcfg, "-n", bootstrap.APIServerNamespace, "get", "secret", bootstrap.ServingSecret, "-o", "jsonpath={.data.tls\\.crt}"); after != before {
			t.Error("the serving certificate changed")
		}
		checkAPIService(t, kcfg)
		out, err = banlieue("bootstrap", "operator", "--version=v0.1.0-e2e", "--dry-run=server")
		if err != nil || !strings.Contains(out, "deployment/banlieue-system/banlieue-operator serverside-applied (server dry run)") {
			t.Errorf("--dry-run=server: %v\n%s", err, out)
		}
	})

	t.Run("--wait reports progress", func(t *testing.T) {
		out, err := banlieue("bootstrap", "operator", "--version=v0.1.0-e2e", "--wait", "--timeout=5s")
		if err == nil {
			t.Fatalf("--wait succeeded on a cluster without nodes:\n%s", out)
		}
		for _, want := range []string{"deployment/banlieue-apiserver/banlieue-apiserver: 0 of 2 replicas updated, 0 available",
			"deployment/banlieue-apiserver/banlieue-apiserver not ready within 5s"} {
			if !strings.Contains(out, want) {
				t.Errorf("--wait output lacks %q:\n%s", want, out)
			}
		}
		out, err = banlieue("bootstrap", "provider", "vsphere", "--timeout=5s")
		if err == nil || !strings.Contains(out, "apiservice/v1alpha1.banlieue.io: Available=False") {
			t.Errorf("bootstrap provider without a running API server: %v\n%s", err, out)
		}
	})
}

// checkAPIService: the APIService points at the API server's Service and
// verifies it with a caBundle that signed the serving certificate, for the
// Service's DNS name.
func checkAPIService(t *testing.T, kcfg string) {
	t.Helper()
	svc := mustKC(t, kcfg, "get", "apiservice", "v1alpha1.banlieue.io", "-o", "jsonpath={.spec.service.namespace}/{.spec.service.name}:{.spec.service.port} {.spec.insecureSkipTLSVerify}")
	if svc != "banlieue-apiserver/banlieue-apiserver:443 " {
		t.Errorf("APIService service and insecureSkipTLSVerify: %q", svc)
	}
	b64 := mustKC(t, kcfg, "get", "apiservice", "v1alpha1.banlieue.io", "-o", "jsonpath={.spec.caBundle}")
	caPEM, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatalf("the caBundle holds no certificate: %q", b64)
	}
	crt := mustKC(t, kcfg, "-n", bootstrap.APIServerNamespace, "get", "secret", bootstrap.ServingSecret, "-o", "jsonpath={.data.tls\\.crt}")
	der, _ := base64.StdEncoding.DecodeString(crt)
	block, _ := pem.Decode(der)
	if block == nil {
		t.Fatal("the serving Secret holds no certificate")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "banlieue-apiserver.banlieue-apiserver.svc", KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err != nil {
		t.Errorf("the APIService's caBundle does not verify the serving certificate: %v", err)
	}
}
