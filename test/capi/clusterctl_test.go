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

package capi

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/firestoned/banlieue/pkg/bootstrap"
	"github.com/firestoned/banlieue/pkg/devenv"
)

// clusterctlEnv is what every clusterctl run of these tests is given: no
// look-up of newer releases on GitHub (no network here), and a HOME of
// its own for clusterctl's cache and logs.
func clusterctlEnv(t *testing.T) []string {
	return append(os.Environ(), "CLUSTERCTL_DISABLE_VERSIONCHECK=true", "HOME="+t.TempDir())
}

// clusterctlRepositories writes the clusterctl configuration a user of
// banlieue writes (banlieue's provider found at a file:// URL, here the
// repository make generate wrote to artifacts/clusterctl) and returns its
// path. Cluster API's own core provider is found in a local repository
// too, holding the metadata.yaml of its module (the release's): clusterctl
// reads the core's contract from it before installing anything.
func clusterctlRepositories(t *testing.T) string {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", ".."))
	dir := t.TempDir()
	capiDir, version := capiModule(t)
	core := filepath.Join(dir, "cluster-api", version)
	if err := os.MkdirAll(core, 0o755); err != nil {
		t.Fatal(err)
	}
	meta, err := os.ReadFile(filepath.Join(capiDir, "metadata.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(core, "metadata.yaml"), meta, 0o644); err != nil {
		t.Fatal(err)
	}
	components := filepath.Join(root, "artifacts", "clusterctl", bootstrap.ClusterctlLabel, bootstrap.ClusterctlVersion, "infrastructure-components.yaml")
	cfg := fmt.Sprintf(`providers:
  - name: %s
    url: file://%s
    type: InfrastructureProvider
  - name: cluster-api
    url: file://%s
    type: CoreProvider
`, bootstrap.ClusterctlProvider, components, filepath.Join(core, "core-components.yaml"))
	path := filepath.Join(dir, "clusterctl.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// capiModule is the directory and version of the Cluster API module the
// in-process reconcilers (and bin/clusterctl) come from.
func capiModule(t *testing.T) (dir, version string) {
	t.Helper()
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}} {{.Version}}", "sigs.k8s.io/cluster-api").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir, version, _ = strings.Cut(strings.TrimSpace(string(out)), " ")
	return dir, version
}

// runClusterctl runs bin/clusterctl against the test control plane with
// the configuration cfg and extra environment; it returns stdout, and
// fails the test with stderr when clusterctl fails.
func runClusterctl(t *testing.T, cfg string, extra []string, args ...string) string {
	t.Helper()
	out, stderr, err := clusterctl(t, cfg, extra, args...)
	if err != nil {
		t.Fatalf("clusterctl %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func clusterctl(t *testing.T, cfg string, extra []string, args ...string) (string, string, error) {
	t.Helper()
	args = append(args, "--config", cfg)
	if !(len(args) > 1 && args[0] == "generate" && args[1] == "provider") { // the one command without a cluster
		args = append(args, "--kubeconfig", env.AdminKubeconfig)
	}
	cmd := exec.Command(filepath.Join(binDir(), "clusterctl"), args...)
	cmd.Env = append(clusterctlEnv(t), extra...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// kubectlStdin runs bin/kubectl as the administrator with stdin.
func kubectlStdin(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(binDir(), "kubectl"), append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// templateVariables are the values a user gives clusterctl generate
// cluster for each flavor: those the templates require, and the
// provider-specific ones given too.
var templateVariables = map[string][]string{
	"libvirt": {"LIBVIRT_IMAGE=default/debian-12.qcow2"},
	"proxmox": {"PROXMOX_TEMPLATE=debian-12-cloud"},
	"vsphere": {"VSPHERE_TEMPLATE=ubuntu-22.04-cloudinit"},
}

var commonVariables = []string{
	"CONTROL_PLANE_ENDPOINT_IP=192.0.2.40",
	"CONTROL_PLANE_BOOTSTRAP_DATA_BASE64=I2Nsb3VkLWNvbmZpZwo=",
	"WORKER_BOOTSTRAP_DATA_BASE64=I2Nsb3VkLWNvbmZpZwo=",
}

// TestClusterctlGenerateCluster: "clusterctl generate cluster
// --infrastructure banlieue --flavor F" renders, for each backend, a
// Cluster, its InfraCluster, and a control-plane and a worker
// MachineDeployment with their machine templates and bootstrap Secrets,
// which kube-apiserver accepts in a server-side dry run with strict
// field validation (an unknown or misplaced field in a template fails);
// nothing is stored. A required variable left out is named by clusterctl.
func TestClusterctlGenerateCluster(t *testing.T) {
	ctx := context.Background()
	cfg := clusterctlRepositories(t)
	backends, err := bootstrap.Backends()
	if err != nil {
		t.Fatal(err)
	}
	for _, flavor := range backends {
		t.Run(flavor, func(t *testing.T) {
			ns := newNamespace(t, "clusterctl-"+flavor)
			kind := map[string]string{"libvirt": "Libvirt", "proxmox": "Proxmox", "vsphere": "VSphere"}[flavor]
			vars := append(append([]string{}, commonVariables...), templateVariables[flavor]...)
			out := runClusterctl(t, cfg, vars, "generate", "cluster", "demo", "-n", ns,
				"--infrastructure", bootstrap.ClusterctlProvider+":"+bootstrap.ClusterctlVersion, "--flavor", flavor,
				"--kubernetes-version", "v1.37.2", "--worker-machine-count", "2")
			applied, err := kubectlStdin(t, out, "apply", "--dry-run=server", "--validate=strict", "-f", "-")
			if err != nil {
				t.Fatalf("kube-apiserver refuses the %s flavor: %v\n%s\n--- rendered:\n%s", flavor, err, applied, out)
			}
			for _, want := range []string{
				"cluster.cluster.x-k8s.io/demo created (server dry run)",
				strings.ToLower(kind) + "cluster.infrastructure.banlieue.io/demo created (server dry run)",
				"secret/demo-control-plane-bootstrap created (server dry run)",
				"secret/demo-worker-bootstrap created (server dry run)",
				strings.ToLower(kind) + "machinetemplate.infrastructure.banlieue.io/demo-control-plane created (server dry run)",
				strings.ToLower(kind) + "machinetemplate.infrastructure.banlieue.io/demo-worker created (server dry run)",
				"machinedeployment.cluster.x-k8s.io/demo-control-plane created (server dry run)",
				"machinedeployment.cluster.x-k8s.io/demo-worker created (server dry run)",
			} {
				if !strings.Contains(applied, want) {
					t.Errorf("kubectl apply --dry-run=server does not say %q:\n%s", want, applied)
				}
			}
			if !strings.Contains(out, "replicas: 2") || !strings.Contains(out, "version: v1.37.2") {
				t.Errorf("the worker count or Kubernetes version given is not in the rendered cluster:\n%s", out)
			}
			// A dry run stores nothing.
			var secret corev1.Secret
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "demo-worker-bootstrap"}, &secret); !apierrors.IsNotFound(err) {
				t.Errorf("the dry run stored the bootstrap Secret: %v", err)
			}
		})
	}

	t.Run("a required variable left out", func(t *testing.T) {
		_, stderr, err := clusterctl(t, cfg, commonVariables, "generate", "cluster", "demo", "-n", "default",
			"--infrastructure", bootstrap.ClusterctlProvider+":"+bootstrap.ClusterctlVersion, "--flavor", "proxmox",
			"--kubernetes-version", "v1.37.2")
		if err == nil || !strings.Contains(stderr, "PROXMOX_TEMPLATE") {
			t.Errorf("clusterctl without PROXMOX_TEMPLATE: err %v, stderr %q; want a refusal naming it", err, stderr)
		}
	})
}

// TestClusterctlInit: "clusterctl init --infrastructure banlieue" from the
// file:// repository installs banlieue's components into the control
// plane, recorded in clusterctl's inventory: the CRDs and the three
// providers' Deployments, labelled as clusterctl labels its providers,
// with the least-privilege RBAC the static install has (each provider
// gets its own backend's credentials by name, nothing else, as kubectl
// auth can-i answers). "clusterctl generate provider" substitutes the
// credentials' names from the variables.
//
// Where the test steps in, and why: Cluster API's core runs in-process
// here (its reconcilers from the module, not a Deployment clusterctl
// installed), so the test records it in clusterctl's inventory as
// clusterctl would have, and init installs banlieue alone instead of
// fetching the core from GitHub. cert-manager is not served by the Go
// module proxy and its image is not on the node; clusterctl checks its
// API by creating an Issuer and a Certificate, so the test installs those
// two kinds as schemaless CRDs (banlieue's components use neither). The
// package's static install already runs here (its pods serve the other
// tests): init updates its objects in place, so what proves init wrote
// them is clusterctl's label on them; its configuration, which init puts
// back to the shipped defaults, is the package's again when the test ends
// (keepProviderSettings).
func TestClusterctlInit(t *testing.T) {
	ctx := context.Background()
	cfg := clusterctlRepositories(t)
	recordCoreProvider(t, ctx)
	installCertManagerKinds(t, ctx)
	keepProviderSettings(t, ctx)

	_, log, err := clusterctl(t, cfg, nil, "init", "--infrastructure", bootstrap.ClusterctlProvider+":"+bootstrap.ClusterctlVersion)
	if err != nil {
		t.Fatalf("clusterctl init: %v\n%s", err, log)
	}
	if !strings.Contains(log, `Installing provider="`+bootstrap.ClusterctlLabel+`"`) {
		t.Errorf("clusterctl init does not say it installs %s:\n%s", bootstrap.ClusterctlLabel, log)
	}
	t.Logf("clusterctl init:\n%s", log)

	inventory := &unstructured.Unstructured{}
	inventory.SetGroupVersionKind(schema.GroupVersionKind{Group: "clusterctl.cluster.x-k8s.io", Version: "v1alpha3", Kind: "Provider"})
	if err := c.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: bootstrap.ClusterctlLabel}, inventory); err != nil {
		t.Fatalf("clusterctl's inventory has no %s: %v", bootstrap.ClusterctlLabel, err)
	}
	if v, _, _ := unstructured.NestedString(inventory.Object, "version"); v != bootstrap.ClusterctlVersion {
		t.Errorf("inventory version %q, want %s", v, bootstrap.ClusterctlVersion)
	}
	backends, err := bootstrap.Backends()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		dep := &unstructured.Unstructured{}
		dep.SetGroupVersionKind(schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"})
		if err := c.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: "banlieue-provider-" + b}, dep); err != nil {
			t.Errorf("no Deployment of the %s provider: %v", b, err)
			continue
		}
		if got := dep.GetLabels()["cluster.x-k8s.io/provider"]; got != bootstrap.ClusterctlLabel {
			t.Errorf("Deployment banlieue-provider-%s labelled cluster.x-k8s.io/provider=%q", b, got)
		}
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "libvirtmachines.infrastructure.banlieue.io"}, crd); err != nil {
		t.Fatal(err)
	}
	if crd.Labels["cluster.x-k8s.io/provider"] != bootstrap.ClusterctlLabel || crd.Labels["cluster.x-k8s.io/v1beta2"] == "" {
		t.Errorf("LibvirtMachine CRD labels %v: want clusterctl's provider label and the v1beta2 contract label", crd.Labels)
	}

	// Each provider may get its own credentials, by name, and nothing else.
	sa := func(b string) string { return "system:serviceaccount:" + devenv.Namespace + ":banlieue-provider-" + b }
	for _, q := range []struct {
		as, verb, resource string
		want               string
	}{
		{sa("vsphere"), "get", "secret/vsphere-creds", "yes"},
		{sa("vsphere"), "get", "secret/lab-proxmox-token", "no"},
		{sa("vsphere"), "list", "secrets", "no"},
		{sa("proxmox"), "get", "secret/lab-proxmox-token", "yes"},
		{sa("proxmox"), "get", "secret/libvirt-creds", "no"},
		{sa("libvirt"), "get", "secret/libvirt-creds", "yes"},
		{sa("libvirt"), "get", "secret/vsphere-creds", "no"},
	} {
		got, _ := kubectlStdin(t, "", "auth", "can-i", q.verb, q.resource, "-n", devenv.Namespace, "--as", q.as)
		if strings.TrimSpace(got) != q.want {
			t.Errorf("can-i %s %s as %s: %q, want %s", q.verb, q.resource, q.as, strings.TrimSpace(got), q.want)
		}
	}

	// The names are clusterctl variables, defaulting to the static install's.
	rendered := runClusterctl(t, cfg, []string{"BANLIEUE_VSPHERE_CREDS=prod-vcenter"}, "generate", "provider",
		"--infrastructure", bootstrap.ClusterctlProvider+":"+bootstrap.ClusterctlVersion, "--target-namespace", devenv.Namespace)
	for _, want := range []string{"- prod-vcenter", "- vcenter-ca", "- lab-proxmox-token"} {
		if !strings.Contains(rendered, want) {
			t.Errorf("clusterctl generate provider with BANLIEUE_VSPHERE_CREDS=prod-vcenter renders no %q", want)
		}
	}
	if strings.Contains(rendered, "- vsphere-creds") {
		t.Errorf("the vsphere-creds default stayed although BANLIEUE_VSPHERE_CREDS was given")
	}
}

// keepProviderSettings makes each provider's configuration the package's
// again when the test ends (env.ApplyProvider), after clusterctl init wrote
// the shipped one over it; a provider Deployment whose pod template init
// changed (its generation moved), and whose pods so started with the
// shipped settings, is restarted and waited for.
func keepProviderSettings(t *testing.T, ctx context.Context) {
	t.Helper()
	generation := func(backend string) (int64, error) {
		dep := &appsv1.Deployment{}
		err := c.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: "banlieue-provider-" + backend}, dep)
		return dep.Generation, err
	}
	before := map[string]int64{}
	for backend := range providerSettings {
		g, err := generation(backend)
		if err != nil {
			t.Fatal(err)
		}
		before[backend] = g
	}
	t.Cleanup(func() {
		for backend, g := range before {
			after, err := generation(backend)
			if err == nil {
				err = env.ApplyProvider(root, backend, providerSettings[backend])
			}
			if err == nil && after != g {
				_, err = env.Kubectl("", "-n", devenv.Namespace, "rollout", "restart", "deploy/banlieue-provider-"+backend)
			}
			if err == nil {
				err = env.RolloutStatus(ctx, devenv.Namespace, "banlieue-provider-"+backend, 2*time.Minute)
			}
			if err != nil {
				t.Errorf("restoring the %s provider's settings: %v", backend, err)
			}
		}
	})
}

// recordCoreProvider writes the inventory entry clusterctl writes when it
// installs Cluster API's core (see TestClusterctlInit for why).
func recordCoreProvider(t *testing.T, ctx context.Context) {
	t.Helper()
	capiDir, version := capiModule(t)
	const manifest = "cmd/clusterctl/config/manifest/clusterctl-api.yaml"
	if out, err := exec.Command(filepath.Join(binDir(), "kubectl"), "--kubeconfig", env.AdminKubeconfig,
		"apply", "--server-side", "-f", filepath.Join(capiDir, manifest)).CombinedOutput(); err != nil {
		t.Fatalf("clusterctl's inventory CRD: %v\n%s", err, out)
	}
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "capi-system"}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	core := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "clusterctl.cluster.x-k8s.io/v1alpha3", "kind": "Provider",
		"metadata": map[string]any{"name": "cluster-api", "namespace": "capi-system",
			"labels": map[string]any{"clusterctl.cluster.x-k8s.io": "", "cluster.x-k8s.io/provider": "cluster-api"}},
		"providerName": "cluster-api", "type": "CoreProvider", "version": version,
	}}
	eventually(t, time.Minute, func() error { return c.Create(ctx, core) })
}

// installCertManagerKinds installs cert-manager.io's Issuer and
// Certificate as schemaless CRDs (see TestClusterctlInit for why).
func installCertManagerKinds(t *testing.T, ctx context.Context) {
	t.Helper()
	yes := true
	for _, k := range []struct{ kind, plural string }{{"Issuer", "issuers"}, {"Certificate", "certificates"}} {
		crd := &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: k.plural + ".cert-manager.io"},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: "cert-manager.io", Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: k.kind, Plural: k.plural, ListKind: k.kind + "List", Singular: strings.ToLower(k.kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
					Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{
						Type: "object", XPreserveUnknownFields: &yes}}}},
			},
		}
		if err := c.Create(ctx, crd); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, func() error {
		var issuers unstructured.UnstructuredList
		issuers.SetGroupVersionKind(schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "IssuerList"})
		return c.List(ctx, &issuers)
	})
}

// binDir is the repository's bin/ (make tools builds clusterctl there).
func binDir() string {
	root, _ := filepath.Abs(filepath.Join("..", "..", "bin"))
	return root
}

// TestClusterctlDescribeCluster: the proxmox flavor rendered by
// "clusterctl generate cluster" and applied as it is builds a cluster
// whose two Machines (the control plane's and a worker's) banlieue's
// Proxmox provider builds on the simulator, and "clusterctl describe
// cluster" shows both Ready; deleting the Cluster destroys both VMs.
//
// Where the test steps in, and why: the simulator runs no guest, so no
// kubelet registers a Node. The test plays each guest's kubelet: the
// workload cluster's kubeconfig Secret points at this control plane, where
// the test registers a Node per Machine with the Machine's providerID and
// the conditions a healthy kubelet reports, and renews each Node's Lease as
// a kubelet does (the environment's node lifecycle controller, there for
// the real node, would otherwise mark them NotReady). Cluster API's own
// Machine reconciler matches them (nodeRef, NodeHealthy) and sets Ready;
// the test writes no Machine, infrastructure machine or cluster status.
func TestClusterctlDescribeCluster(t *testing.T) {
	ctx := context.Background()
	cfg := clusterctlRepositories(t)
	sim, _ := startProxmoxProvider(t, ctx, "clusterctl-proxmox", map[string]string{"banlieue.io/provider-set": "clusterctl-describe"})
	ns := newNamespace(t, "clusterctl-describe")
	bindUserData(t, ctx, ns, "proxmox")

	vars := append(append([]string{}, commonVariables...), "PROXMOX_TEMPLATE=debian-12-cloud", "BANLIEUE_PROVIDER_SET=clusterctl-describe")
	rendered := runClusterctl(t, cfg, vars, "generate", "cluster", "cc", "-n", ns,
		"--infrastructure", bootstrap.ClusterctlProvider+":"+bootstrap.ClusterctlVersion, "--flavor", "proxmox",
		"--kubernetes-version", "v1.37.2", "--control-plane-machine-count", "1", "--worker-machine-count", "1")
	if out, err := kubectlStdin(t, rendered, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply of the rendered cluster: %v\n%s", err, out)
	}

	// Both Machines built: a providerID each.
	var machines clusterv1.MachineList
	eventually(t, 3*time.Minute, func() error {
		if err := c.List(ctx, &machines, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(machines.Items) != 2 {
			return fmt.Errorf("%d Machines; %s; %s", len(machines.Items), describeMD(ctx, ns, "cc-control-plane"), describeMD(ctx, ns, "cc-worker"))
		}
		for _, m := range machines.Items {
			if m.Spec.ProviderID == "" {
				return fmt.Errorf("Machine %s: no providerID yet (phase %q, %s)", m.Name, m.Status.Phase, conditionSummary(m.Status.Conditions))
			}
		}
		return nil
	})

	playKubelets(t, ctx, ns, "cc", machines.Items)
	eventually(t, 2*time.Minute, func() error {
		if err := c.List(ctx, &machines, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, m := range machines.Items {
			if !meta.IsStatusConditionTrue(m.Status.Conditions, clusterv1.ReadyCondition) {
				return fmt.Errorf("Machine %s not Ready: %s", m.Name, conditionSummary(m.Status.Conditions))
			}
		}
		return nil
	})

	out := runClusterctl(t, cfg, nil, "describe", "cluster", "cc", "-n", ns, "--grouping=false")
	t.Logf("clusterctl describe cluster cc:\n%s", out)
	for _, m := range machines.Items {
		line := strings.Fields(lineNaming(out, "Machine "+ns+"/"+m.Name))
		if !slices.Contains(line, "True") || !slices.Contains(line, "Ready") {
			t.Errorf("clusterctl describe shows Machine %s as %q, want it True, Ready", m.Name, line)
		}
	}
	for _, want := range []string{"Cluster " + ns + "/cc", "ProxmoxCluster " + ns + "/cc", "MachineDeployment " + ns + "/cc-control-plane", "MachineDeployment " + ns + "/cc-worker"} {
		if !strings.Contains(out, want) {
			t.Errorf("clusterctl describe shows no %s", want)
		}
	}

	// Deleting the Cluster destroys the VMs the provider built.
	if err := c.Delete(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "cc", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		for _, v := range sim.VMs() {
			if strings.HasPrefix(v.Name, ns+"-") {
				return fmt.Errorf("the simulator still has %s", v.Name)
			}
		}
		return nil
	})
}

// playKubelets stands in for the kubelet of each Machine's guest (see
// TestClusterctlDescribeCluster for why): the workload cluster's
// kubeconfig Secret names this control plane, and each Machine gets a Node
// with its providerID, Ready and without pressure, as a kubelet reports,
// its Lease renewed (heartbeat); the Nodes go when the test ends.
func playKubelets(t *testing.T, ctx context.Context, ns, cluster string, machines []clusterv1.Machine) {
	t.Helper()
	kubeconfig, err := os.ReadFile(env.AdminKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: cluster + "-kubeconfig", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: cluster}},
		Type:       clusterv1.ClusterSecretType, Data: map[string][]byte{"value": kubeconfig},
	}); err != nil {
		t.Fatal(err)
	}
	now := metav1.Now()
	for _, m := range machines {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + m.Name}, Spec: corev1.NodeSpec{ProviderID: m.Spec.ProviderID}}
		if err := c.Create(ctx, node); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), node) })
		// A patch, not an update: the node lifecycle controller (taints)
		// and Cluster API (annotations) write a new Node too.
		patch := client.MergeFrom(node.DeepCopy())
		node.Status.Conditions = []corev1.NodeCondition{
			{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientMemory", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasNoDiskPressure", LastHeartbeatTime: now, LastTransitionTime: now},
			{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse, Reason: "KubeletHasSufficientPID", LastHeartbeatTime: now, LastTransitionTime: now},
		}
		if err := c.Status().Patch(ctx, node, patch); err != nil {
			t.Fatal(err)
		}
		heartbeat(t, node)
	}
}

// heartbeat creates node's Lease in kube-node-lease, owned by the Node as
// a kubelet's is, and renews it every 10s, a kubelet's interval, until the
// test ends.
func heartbeat(t *testing.T, node *corev1.Node) {
	t.Helper()
	ctx := context.Background()
	lease := &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: node.Name, Namespace: corev1.NamespaceNodeLease,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: node.Name, UID: node.UID}}},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(node.Name), LeaseDurationSeconds: ptr.To[int32](40),
			RenewTime: &metav1.MicroTime{Time: time.Now()}},
	}
	if err := c.Create(ctx, lease); err != nil {
		t.Fatal(err)
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(10 * time.Second)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				lease.Spec.RenewTime = &metav1.MicroTime{Time: now}
				if err := c.Update(ctx, lease); err != nil {
					t.Logf("renewing the Lease of Node %s: %v", node.Name, err)
				}
			}
		}
	}()
	t.Cleanup(func() {
		close(stop)
		<-done
	})
}

// lineNaming is the first line of out that contains name.
func lineNaming(out, name string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.Contains(l, name) {
			return l
		}
	}
	return ""
}
