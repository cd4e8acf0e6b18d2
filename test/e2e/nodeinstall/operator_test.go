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

package nodeinstall

import (
	"context"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/bootstrap"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/workload"
)

// TestOperatorWorkloadRunsAsPods: the operator bootstrap installed runs
// as a pod, and for a Provider of the proxmox ProviderClass bootstrap
// applied it renders a workload whose Deployment runs as a pod of the
// release image with the ServiceAccount the operator made for it, reaches
// the simulator and reports its Provider Ready; the workload's own token
// reads its Provider's Secret by name and no other; deleting the Provider
// removes the workload and its pod.
func TestOperatorWorkloadRunsAsPods(t *testing.T) {
	ctx := context.Background()
	c, err := env.ServedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	sim, endpoint, err := env.PodsProxmoxSimulator()
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	p, err := env.NewProxmoxProvider(ctx, c, devenv.ProxmoxProvider{Name: "op-proxmox",
		Endpoint: endpoint, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: sim.Secret, Secret: "op-proxmox-token"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	name := workload.Name("proxmox", p.Name)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the operator rendered no Deployment %s", name)
	}
	if out, err := env.Kubectl("", "-n", devenv.Namespace, "rollout", "status", "deploy/"+name, "--timeout=120s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s\n%s", err, out, env.PodsSummary(ctx))
	}
	if err := env.WaitProviderReady(ctx, c, p); err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=provider-proxmox"})
	if err != nil {
		t.Fatal(err)
	}
	sa := workload.ServiceAccountName("proxmox", p.Name)
	running := 0
	for _, pod := range pods.Items {
		if pod.Spec.ServiceAccountName == sa && devenv.PodReady(&pod) && pod.Spec.NodeName == env.NodeName() {
			running++
			checkWorkloadToken(t, ctx, &pod, p.Spec.Connection.CredentialsRef.Name)
		}
	}
	if running != 1 {
		t.Errorf("%d Ready pods of the workload as %s on the node, want the class's 1 replica\n%s", running, sa, env.PodsSummary(ctx))
	}

	devenv.DeleteProvider(ctx, c, p)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
		if !apierrors.IsNotFound(err) {
			return false, nil
		}
		pods, err := cs.CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=provider-proxmox"})
		return err == nil && len(pods.Items) == 0, nil
	}); err != nil {
		t.Errorf("the workload or its pod outlived its Provider:\n%s", env.PodsSummary(ctx))
	}
}

// checkWorkloadToken: with the workload pod's projected token, its
// Provider's Secret (secret) is readable by name, another Provider's and
// the API server's are not, and no Secret is listed.
func checkWorkloadToken(t *testing.T, ctx context.Context, pod *corev1.Pod, secret string) {
	t.Helper()
	token, err := env.PodToken(pod)
	if err != nil {
		t.Fatal(err)
	}
	as, err := env.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: devenv.Namespace, Name: secret}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: devenv.Namespace, Name: "lab-proxmox-token"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list", Namespace: devenv.Namespace}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: bootstrap.APIServerNamespace, Name: bootstrap.ServingSecret}, false},
		{authorizationv1.ResourceAttributes{Group: "banlieue.io", Resource: "providers", Verb: "update", Namespace: devenv.Namespace, Name: "op-proxmox"}, false},
	} {
		got, err := devenv.MayDo(ctx, as, q.attrs)
		if err != nil || got != q.want {
			t.Errorf("with the workload pod's token, %s %s %s in %q: %v (%v), want %v", q.attrs.Verb, q.attrs.Resource, q.attrs.Name, q.attrs.Namespace, got, err, q.want)
		}
	}
}
