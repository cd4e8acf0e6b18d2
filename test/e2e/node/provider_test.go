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
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// TestProxmoxProviderRunsAsPods: the shipped Proxmox VE provider
// Deployment and its configuration, applied as they are, run the release
// image as pods that reach the simulator from the pod network (its port
// exposed to pods on the bridge's gateway, its certificate naming that
// address), read the credentials Secret the static Role names with their
// projected token, and report the Provider Ready; kubectl rollout status
// and logs work as the install guide says.
func TestProxmoxProviderRunsAsPods(t *testing.T) {
	ctx := context.Background()
	c, err := env.ServedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// lab-proxmox-token is the Secret the shipped credentials Role names.
	p := podProxmoxProvider(t, ctx, c, "pod-proxmox", "lab-proxmox-token")

	dir := filepath.Join(root, "artifacts", "deploy", "providers", "proxmox")
	manifests := []string{"-f", filepath.Join(dir, "config.yaml"), "-f", filepath.Join(dir, "deployment.yaml")}
	if out, err := kubectl(append([]string{"apply"}, manifests...)...); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	defer func() {
		// The Provider first, while a provider pod is there to release it.
		deleteProvider(ctx, c, p)
		_, _ = kubectl(append([]string{"delete", "--wait=true", "--timeout=60s"}, manifests...)...)
	}()
	if out, err := kubectl("-n", devenv.Namespace, "rollout", "status", "deploy/banlieue-provider-proxmox", "--timeout=120s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s\n%s", err, out, env.PodsSummary(ctx))
	}
	waitProviderReady(t, ctx, c, p)
	logs, err := kubectl("-n", devenv.Namespace, "logs", "deploy/banlieue-provider-proxmox")
	if err != nil || !strings.Contains(logs, "Starting the provider") {
		t.Errorf("kubectl logs deploy/banlieue-provider-proxmox: %v\n%s", err, logs)
	}
}

func conditions(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, ", ")
}

// podProxmoxProvider starts a Proxmox VE simulator that pods of the node
// reach (its port exposed on the bridge's gateway, its certificate naming
// that address), and creates in banlieue-system its credentials Secret
// (named secretName) and a Provider of class proxmox pointing at that
// address; the simulator goes when the test ends.
func podProxmoxProvider(t *testing.T, ctx context.Context, c client.Client, name, secretName string) *v1alpha1.Provider {
	t.Helper()
	sim := pvesim.New(pvesim.Options{ServingIPs: []net.IP{net.ParseIP(devenv.NodeGateway)}})
	t.Cleanup(sim.Close)
	u, err := url.Parse(sim.URL)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(u.Port())
	addr, err := env.ExposeToPods(port)
	if err != nil {
		t.Fatal(err)
	}
	// No grant: the shipped Role names lab-proxmox-token, and the
	// operator's workload reads its Provider's Secret by its own RBAC.
	p, err := env.NewProxmoxProvider(ctx, c, devenv.ProxmoxProvider{Name: name,
		Endpoint: "https://" + addr + "/api2/json", CA: sim.CA, TokenID: sim.TokenID, TokenSecret: sim.Secret, Secret: secretName})
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

// waitProviderReady waits until a provider reports p Ready.
func waitProviderReady(t *testing.T, ctx context.Context, c client.Client, p *v1alpha1.Provider) {
	t.Helper()
	var last []metav1.Condition
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.Provider{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return false, nil
		}
		last = got.Status.Conditions
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ProviderReady), nil
	}); err != nil {
		t.Fatalf("no provider pod reported Provider %s Ready: %s\n%s", p.Name, conditions(last), env.PodsSummary(ctx))
	}
}

// deleteProvider deletes p and waits until it is gone (a provider still
// running releases its finalizer).
func deleteProvider(ctx context.Context, c client.Client, p *v1alpha1.Provider) {
	_ = c.Delete(ctx, p)
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.Provider{})), nil
	})
}
