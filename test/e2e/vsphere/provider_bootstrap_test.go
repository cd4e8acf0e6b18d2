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
package vsphere

import (
	"context"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestBootstrapFromGovc: "banlieue bootstrap provider vsphere --from-govc"
// turns govc's environment (a bare host:port, as govc users write it) into
// the credentials Secret and a Provider with the endpoint normalised to
// https://HOST:PORT/sdk, installs the vsphere ProviderClass, and with --wait
// returns once the Provider is Ready on vcsim.
func TestBootstrapFromGovc(t *testing.T) {
	ctx := context.Background()
	u, err := url.Parse(endpoint)
	if err != nil {
		t.Fatal(err)
	}
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	cmd := exec.Command(filepath.Join(root, "bin", "banlieue"), "bootstrap", "provider", "vsphere", "--from-govc", "--name=govc-vc",
		"--wait", "--timeout=90s", "--kubeconfig="+env.AdminKubeconfig)
	cmd.Env = append(os.Environ(), "GOVC_URL="+u.Host, "GOVC_USERNAME="+user, "GOVC_PASSWORD="+password, "GOVC_INSECURE=1")
	out, err := cmd.CombinedOutput()
	t.Cleanup(func() {
		c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "govc-vc"}})
		c.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "govc-vc-credentials"}})
		c.Delete(ctx, &v1alpha1.ProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "vsphere"}})
	})
	if err != nil {
		t.Fatalf("bootstrap provider: %v\n%s", err, out)
	}
	for _, want := range []string{"providerclass/vsphere serverside-applied", "secret/banlieue-system/govc-vc-credentials serverside-applied",
		"provider/banlieue-system/govc-vc serverside-applied",
		// The static provider reads Secrets by name: bootstrap names it.
		"role/banlieue-system/banlieue-provider-vsphere-credentials: names secret govc-vc-credentials",
		"provider/banlieue-system/govc-vc: Ready=True"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	p := &v1alpha1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "govc-vc"}, p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Connection.Endpoint != "https://"+u.Host+"/sdk" || !p.Spec.Connection.InsecureSkipTLSVerify || p.Spec.Connection.CredentialsRef.Name != "govc-vc-credentials" {
		t.Errorf("Provider connection %+v", p.Spec.Connection)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "govc-vc-credentials"}, s); err != nil {
		t.Fatal(err)
	}
	if string(s.Data["username"]) != user || string(s.Data["password"]) != password {
		t.Errorf("the Secret holds %q/%q", s.Data["username"], s.Data["password"])
	}
	if len(p.Status.FailureDomains) != 6 {
		t.Errorf("%d failure domains, want vcsim's 6", len(p.Status.FailureDomains))
	}
}
