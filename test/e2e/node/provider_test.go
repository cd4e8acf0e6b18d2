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
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/test/grants"
)

// TestProxmoxProviderRunsAsPods: the shipped Proxmox VE provider
// Deployment and its configuration, applied as they are, run the release
// image as pods that reach the simulator from the pod network (its port
// exposed to pods on the bridge's gateway, its certificate naming that
// address), read the credentials Secret the static Role names with their
// projected token, and report the Provider Ready; kubectl rollout status
// and logs work as the install guide says; the pod's own token is asked
// the least-privilege matrix (test/grants).
func TestProxmoxProviderRunsAsPods(t *testing.T) {
	ctx := context.Background()
	c, err := env.ServedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// lab-proxmox-token is the Secret the shipped credentials Role names.
	p := podProxmoxProvider(t, ctx, c, "pod-proxmox", "lab-proxmox-token")

	runStaticProvider(t, ctx, c, p, "proxmox", nil)
}

// runStaticProvider applies the shipped provider Deployment of backend and
// its configuration as they are, but for settings: edits of the
// configuration's keys, made as its own comment tells an administrator
// (kubectl patch) before the Deployment starts. It checks what the install
// guide says of it (kubectl rollout status and logs) and that it reports p
// Ready; the pod's own token is asked the least-privilege matrix
// (test/grants). p goes first when the test ends, while a provider pod is
// there to release it, then the Deployment.
func runStaticProvider(t *testing.T, ctx context.Context, c client.Client, p *v1alpha1.Provider, backend string, settings map[string]string) {
	t.Helper()
	dir := filepath.Join(root, "artifacts", "deploy", "providers", backend)
	config, deployment := filepath.Join(dir, "config.yaml"), filepath.Join(dir, "deployment.yaml")
	t.Cleanup(func() {
		devenv.DeleteProvider(ctx, c, p)
		_, _ = env.Kubectl("", "delete", "--wait=true", "--timeout=60s", "--ignore-not-found", "-f", config, "-f", deployment)
	})
	if out, err := env.Kubectl("", "apply", "-f", config); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	if len(settings) > 0 {
		patch, err := json.Marshal(map[string]any{"data": settings})
		if err != nil {
			t.Fatal(err)
		}
		if out, err := env.Kubectl("", "-n", devenv.Namespace, "patch", "configmap", "banlieue-provider-"+backend+"-config",
			"--type=merge", "-p", string(patch)); err != nil {
			t.Fatalf("kubectl patch: %v\n%s", err, out)
		}
	}
	if out, err := env.Kubectl("", "apply", "-f", deployment); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	deploy := "deploy/banlieue-provider-" + backend
	if out, err := env.Kubectl("", "-n", devenv.Namespace, "rollout", "status", deploy, "--timeout=120s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s\n%s", err, out, env.PodsSummary(ctx))
	}
	if err := env.WaitProviderReady(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	logs, err := env.Kubectl("", "-n", devenv.Namespace, "logs", deploy)
	if err != nil || !strings.Contains(logs, "Starting the provider") {
		t.Errorf("kubectl logs %s: %v\n%s", deploy, err, logs)
	}
	grants.CheckPod(t, ctx, env, devenv.Namespace, "provider-"+backend, devenv.ProviderUserOf(backend))
}

// podProxmoxProvider starts a Proxmox VE simulator that pods of the node
// reach (its port exposed on the bridge's gateway, its certificate naming
// that address), and creates in banlieue-system its credentials Secret
// (named secretName) and a Provider of class proxmox pointing at that
// address; the simulator goes when the test ends.
func podProxmoxProvider(t *testing.T, ctx context.Context, c client.Client, name, secretName string) *v1alpha1.Provider {
	t.Helper()
	sim, endpoint, err := env.PodsProxmoxSimulator()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	// No grant: the shipped Role names lab-proxmox-token, and the
	// operator's workload reads its Provider's Secret by its own RBAC.
	p, err := env.NewProxmoxProvider(ctx, c, devenv.ProxmoxProvider{Name: name,
		Endpoint: endpoint, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: sim.Secret, Secret: secretName})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: devenv.Namespace}})
	})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}
