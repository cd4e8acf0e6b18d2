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
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/devenv"
)

const vmYAML = `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: %s, namespace: %s}
spec:
  classRef: {name: db-prod-large}
  imageRef: {name: ubuntu-22.04-cloudinit}
`

const providerYAML = `apiVersion: banlieue.io/v1alpha1
kind: Provider
metadata: {name: %s, namespace: %s}
spec:
  providerClassRef: {name: vsphere}
  connection:
    endpoint: https://vcenter.example.com/sdk
    credentialsRef: {name: creds}
`

// TestRBACThroughAggregator: banlieue authorizes every request it gets from
// kube-apiserver's proxy with a SubjectAccessReview, per verb, namespace and
// subresource.
func TestRBACThroughAggregator(t *testing.T) {
	mustKC(t, "apply", "-f", "artifacts/examples/vmclass.yaml", "-f", "artifacts/examples/vmimage.yaml")
	mustKC(t, "create", "namespace", "team-a")
	mustKC(t, "create", "namespace", "team-b")
	for _, ns := range []string{"team-a", "team-b"} {
		mustKCIn(t, fmt.Sprintf(vmYAML, "vm-1", ns), "apply", "-f", "-")
	}
	mustKC(t, "create", "rolebinding", "viewer", "-n", "team-a", "--clusterrole=banlieue-view", "--user=viewer")
	mustKC(t, "create", "role", "vm-getter", "-n", "team-a", "--verb=get", "--resource=virtualmachines.banlieue.io")
	mustKC(t, "create", "rolebinding", "getter", "-n", "team-a", "--role=vm-getter", "--user=getter")
	mustKC(t, "create", "rolebinding", "editor", "-n", "team-a", "--clusterrole=edit", "--user=editor")

	viewer, err := env.UserKubeconfig("viewer")
	if err != nil {
		t.Fatal(err)
	}
	getter, err := env.UserKubeconfig("getter")
	if err != nil {
		t.Fatal(err)
	}
	resolved := "/apis/banlieue.io/v1alpha1/namespaces/team-a/virtualmachines/vm-1/resolved"

	cases := []struct {
		name       string
		kubeconfig string
		args       []string
		stdin      string
		allowed    bool
		errWant    string
	}{
		{"viewer lists VMs in A", viewer, []string{"get", "vm", "-n", "team-a"}, "", true, ""},
		{"viewer gets a VM in A", viewer, []string{"get", "vm", "vm-1", "-n", "team-a"}, "", true, ""},
		{"viewer reads resolved in A", viewer, []string{"get", "--raw", resolved}, "", true, ""},
		{"viewer is forbidden in B", viewer, []string{"get", "vm", "-n", "team-b"}, "", false, "Forbidden"},
		{"viewer cannot create", viewer, []string{"create", "-f", "-"}, fmt.Sprintf(vmYAML, "vm-2", "team-a"), false, "Forbidden"},
		{"viewer cannot delete", viewer, []string{"delete", "vm", "vm-1", "-n", "team-a"}, "", false, "Forbidden"},
		{"get without resolved permission", getter, []string{"get", "vm", "vm-1", "-n", "team-a"}, "", true, ""},
		{"resolved needs its own permission", getter, []string{"get", "--raw", resolved}, "", false, "Forbidden"},
		// A console is a shell in the guest: edit (and admin) have it,
		// view does not.
		{"viewer may not attach a console", viewer, consoleCanI("get"), "", false, ""},
		{"editor may attach a console (websocket)", env.AdminKubeconfig, append(consoleCanI("get"), "--as=editor"), "", true, ""},
		{"editor may attach a console (SPDY)", env.AdminKubeconfig, append(consoleCanI("create"), "--as=editor"), "", true, ""},
		{"getter may not attach a console", env.AdminKubeconfig, append(consoleCanI("get"), "--as=getter"), "", false, ""},
		{"editor may restart a VM", env.AdminKubeconfig, []string{"auth", "can-i", "create", "virtualmachines.banlieue.io", "--subresource=restart", "-n", "team-a", "--as=editor"}, "", true, ""},
		{"viewer may not restart a VM", viewer, []string{"auth", "can-i", "create", "virtualmachines.banlieue.io", "--subresource=restart", "-n", "team-a"}, "", false, ""},
		// So is a web console URL, asked with a POST only.
		{"viewer may not ask for a web console", viewer, subresourceCanI("create", "webconsole"), "", false, ""},
		{"editor may ask for a web console", env.AdminKubeconfig, append(subresourceCanI("create", "webconsole"), "--as=editor"), "", true, ""},
		{"editor has no get on webconsole", env.AdminKubeconfig, append(subresourceCanI("get", "webconsole"), "--as=editor"), "", false, ""},
		{"getter may not ask for a web console", env.AdminKubeconfig, append(subresourceCanI("create", "webconsole"), "--as=getter"), "", false, ""},
		// Snapshots and restores change the VM's disks: edit has them,
		// view reads them, nobody but the controller writes their status.
		{"editor may snapshot a VM", env.AdminKubeconfig, []string{"auth", "can-i", "create", "virtualmachinesnapshots.banlieue.io", "-n", "team-a", "--as=editor"}, "", true, ""},
		{"editor may restore a VM", env.AdminKubeconfig, []string{"auth", "can-i", "create", "virtualmachinerestores.banlieue.io", "-n", "team-a", "--as=editor"}, "", true, ""},
		{"editor may delete a snapshot", env.AdminKubeconfig, []string{"auth", "can-i", "delete", "virtualmachinesnapshots.banlieue.io", "-n", "team-a", "--as=editor"}, "", true, ""},
		{"editor may not write a snapshot's status", env.AdminKubeconfig, []string{"auth", "can-i", "patch", "virtualmachinesnapshots.banlieue.io", "--subresource=status", "-n", "team-a", "--as=editor"}, "", false, ""},
		{"viewer may list snapshots", viewer, []string{"auth", "can-i", "list", "virtualmachinesnapshots.banlieue.io", "-n", "team-a"}, "", true, ""},
		{"viewer may not snapshot a VM", viewer, []string{"auth", "can-i", "create", "virtualmachinesnapshots.banlieue.io", "-n", "team-a"}, "", false, ""},
		{"viewer may not restore a VM", viewer, []string{"auth", "can-i", "create", "virtualmachinerestores.banlieue.io", "-n", "team-a"}, "", false, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errOut, err := kcIn(t, tc.stdin, append([]string{"--kubeconfig=" + tc.kubeconfig}, tc.args...)...)
			if tc.allowed && err != nil {
				t.Errorf("denied: %v %s", err, errOut)
			}
			if !tc.allowed {
				if err == nil {
					t.Errorf("allowed: %s", out)
				} else if !strings.Contains(errOut, tc.errWant) {
					t.Errorf("error %q lacks %q", errOut, tc.errWant)
				}
			}
		})
	}
	if _, _, err := kc(t, "get", "vm", "vm-2", "-n", "team-a"); err == nil {
		t.Error("the viewer's create went through")
	}

	// Anonymous requests: through the aggregator, and straight to banlieue.
	for name, url := range map[string]string{
		"through kube-apiserver": env.KubeAPIServerURL + "/apis/banlieue.io/v1alpha1/namespaces/team-a/virtualmachines",
		"direct to banlieue":     env.BanlieueURL + "/apis/banlieue.io/v1alpha1/namespaces/team-a/virtualmachines",
	} {
		code, body := anonymousGet(t, url)
		if code != http.StatusForbidden && code != http.StatusUnauthorized {
			t.Errorf("anonymous %s: HTTP %d %s", name, code, body)
		}
	}
}

// consoleCanI asks whether verb on virtualmachines/console in team-a is
// allowed.
func consoleCanI(verb string) []string { return subresourceCanI(verb, "console") }

// subresourceCanI asks whether verb on virtualmachines/SUBRESOURCE in
// team-a is allowed.
func subresourceCanI(verb, subresource string) []string {
	return []string{"auth", "can-i", verb, "virtualmachines.banlieue.io", "--subresource=" + subresource, "-n", "team-a"}
}

// anonymousGet GETs url without credentials, trusting both environment CAs.
func anonymousGet(t *testing.T, url string) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	ca, err := os.ReadFile(filepath.Join(env.Dir(), "pki", "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool.AppendCertsFromPEM(ca)
	pool.AppendCertsFromPEM(env.BanlieueCA)
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	resp, err := client.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// TestNamespaceDeletion: the namespace controller discovers banlieue's
// resources through the aggregator, deletes them, and the namespace goes.
func TestNamespaceDeletion(t *testing.T) {
	mustKC(t, "create", "namespace", "doomed")
	mustKCIn(t, fmt.Sprintf(vmYAML, "vm-1", "doomed")+"---\n"+fmt.Sprintf(vmYAML, "vm-2", "doomed")+"---\n"+fmt.Sprintf(providerYAML, "p-1", "doomed"), "apply", "-f", "-")
	mustKC(t, "delete", "namespace", "doomed", "--wait=false")
	eventually(t, 90*time.Second, func() error {
		out, errOut, err := kc(t, "get", "namespace", "doomed", "-o", "jsonpath={.status.conditions}")
		if err != nil && strings.Contains(errOut, "NotFound") {
			return nil
		}
		return fmt.Errorf("namespace still there: %s %s", out, errOut)
	})
	// And its objects are gone from banlieue's storage too.
	out := mustKC(t, "get", "vm,provider", "-A", "--field-selector=metadata.namespace=doomed", "-o", "name")
	if strings.TrimSpace(out) != "" {
		t.Errorf("objects left behind: %s", out)
	}
}

// TestAdmissionChain: the standard admission plugins run on banlieue.io in
// banlieue's own admission chain.
func TestAdmissionChain(t *testing.T) {
	t.Run("NamespaceLifecycle rejects objects in missing namespaces", func(t *testing.T) {
		_, errOut, err := kcIn(t, fmt.Sprintf(vmYAML, "vm-1", "no-such-namespace"), "create", "-f", "-")
		if err == nil || !strings.Contains(errOut, `namespaces "no-such-namespace" not found`) {
			t.Errorf("err=%v: %s", err, errOut)
		}
	})
	t.Run("ValidatingAdmissionPolicy applies to banlieue.io", func(t *testing.T) {
		mustKCIn(t, `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-suspended-vms}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - apiGroups: [banlieue.io]
        apiVersions: [v1alpha1]
        operations: [CREATE, UPDATE]
        resources: [virtualmachines]
  validations:
    - expression: "object.spec.desiredPowerState != 'Suspended'"
      message: "suspended VMs are not allowed here"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-suspended-vms}
spec:
  policyName: no-suspended-vms
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: policy-test}
`, "apply", "-f", "-")
		mustKC(t, "create", "namespace", "policy-test")
		suspended := fmt.Sprintf(vmYAML, "sleepy", "policy-test") + "  desiredPowerState: Suspended\n"
		// The policy reaches banlieue's informers asynchronously: retry until it bites.
		eventually(t, 60*time.Second, func() error {
			_, errOut, err := kcIn(t, suspended, "create", "-f", "-")
			if err == nil {
				mustKC(t, "delete", "vm", "sleepy", "-n", "policy-test")
				return fmt.Errorf("suspended VM accepted")
			}
			if !strings.Contains(errOut, "suspended VMs are not allowed here") {
				return fmt.Errorf("unexpected error: %s", errOut)
			}
			return nil
		})
		mustKCIn(t, fmt.Sprintf(vmYAML, "awake", "policy-test"), "create", "-f", "-")
	})
	t.Run("banlieue's own plugin warns about missing references", func(t *testing.T) {
		vm := strings.Replace(fmt.Sprintf(vmYAML, "early", "banlieue-system"), "db-prod-large", "not-yet-a-class", 1)
		_, errOut, err := kcIn(t, vm, "create", "-f", "-")
		if err != nil || !strings.Contains(errOut, `Warning: spec.classRef.name: VMClass "not-yet-a-class" does not exist yet`) {
			t.Errorf("err=%v stderr=%s", err, errOut)
		}
	})
}

// TestInstallArtifacts: the kustomize install is accepted by a real
// kube-apiserver, and the server's ServiceAccount may do what it needs and
// no more.
func TestInstallArtifacts(t *testing.T) {
	out := mustKC(t, "apply", "--dry-run=server", "-k", "artifacts/deploy")
	for _, want := range []string{"deployment.apps/banlieue-apiserver", "apiservice.apiregistration.k8s.io/v1alpha1.banlieue.io",
		"statefulset.apps/banlieue-etcd", "poddisruptionbudget.policy/banlieue-apiserver", "clusterrole.rbac.authorization.k8s.io/banlieue-view",
		"deployment.apps/banlieue-controller", "service/banlieue-controller-metrics", "clusterrole.rbac.authorization.k8s.io/banlieue-metrics-reader",
		"deployment.apps/banlieue-provider-vsphere", "configmap/banlieue-provider-vsphere-config", "service/banlieue-provider-vsphere-metrics",
		"deployment.apps/banlieue-provider-libvirt", "configmap/banlieue-provider-libvirt-config", "service/banlieue-provider-libvirt-metrics"} {
		if !strings.Contains(out, want) {
			t.Errorf("dry run output lacks %s:\n%s", want, out)
		}
	}
	checkInstallGrants(t, env.AdminKubeconfig)
}

// checkInstallGrants asks, as the API server's ServiceAccount of an install
// (artifacts/deploy applied, or banlieue bootstrap's), what it may do: what
// it needs and no more.
func checkInstallGrants(t *testing.T, kubeconfig string) {
	t.Helper()
	sa := "--as=" + devenv.BanlieueUser
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"create", "tokenreviews.authentication.k8s.io"}, "yes"},
		{[]string{"create", "subjectaccessreviews.authorization.k8s.io"}, "yes"},
		{[]string{"get", "configmaps/extension-apiserver-authentication", "-n", "kube-system"}, "yes"},
		{[]string{"watch", "namespaces"}, "yes"},
		{[]string{"list", "validatingadmissionpolicies.admissionregistration.k8s.io"}, "yes"},
		{[]string{"list", "mutatingwebhookconfigurations.admissionregistration.k8s.io"}, "yes"},
		{[]string{"get", "secrets", "-n", "banlieue-system"}, "no"},
		{[]string{"get", "secrets", "-n", "kube-system"}, "no"},
		{[]string{"list", "secrets", "-A"}, "no"},
		{[]string{"get", "configmaps", "-n", "default"}, "no"},
		{[]string{"create", "namespaces"}, "no"},
		{[]string{"delete", "validatingadmissionpolicies.admissionregistration.k8s.io"}, "no"},
		{[]string{"create", "pods", "-n", "banlieue-system"}, "no"},
	} {
		args := append([]string{"auth", "can-i", sa, "--as-group=system:serviceaccounts"}, tc.args...)
		got, _, _ := kc(t, append([]string{"--kubeconfig=" + kubeconfig}, args...)...)
		if strings.TrimSpace(got) != tc.want {
			t.Errorf("can-i %v = %q, want %q", tc.args, strings.TrimSpace(got), tc.want)
		}
	}
	// The operator grants only what it holds: no escalate, no bind, and no
	// Secret listed; the controller reads no Secret.
	for _, tc := range []struct {
		as   string
		args []string
	}{
		{devenv.OperatorUser, []string{"escalate", "clusterroles"}},
		{devenv.OperatorUser, []string{"bind", "clusterroles"}},
		{devenv.OperatorUser, []string{"list", "secrets", "-n", devenv.Namespace}},
		{devenv.OperatorUser, []string{"get", "secrets", "-n", devenv.APIServerNamespace}},
		{devenv.ControllerUser, []string{"get", "secrets", "-n", devenv.Namespace}},
	} {
		args := append([]string{"--kubeconfig=" + kubeconfig, "auth", "can-i", "--as=" + tc.as, "--as-group=system:serviceaccounts"}, tc.args...)
		if got, _, _ := kc(t, args...); strings.TrimSpace(got) != "no" {
			t.Errorf("%s: can-i %v = %q, want no", tc.as, tc.args, strings.TrimSpace(got))
		}
	}
}
