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
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/workload"
)

// TestOperatorWorkloadRunsAsPods: with the shipped proxmox ProviderClass
// applied as it is, the operator renders a workload for a Provider, and
// that Deployment runs on the node as a pod of the release image, with
// the ServiceAccount the operator made for it, reaching the simulator and
// reporting its Provider Ready; deleting the Provider removes the
// workload and its pod. (The operator itself runs as a process here: what
// this test follows is what it renders.)
func TestOperatorWorkloadRunsAsPods(t *testing.T) {
	ctx := context.Background()
	c, err := env.ServedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	class := filepath.Join(root, "artifacts", "deploy", "providerclasses", "proxmox.yaml")
	if out, err := kubectl("apply", "-f", class); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	defer func() { _, _ = kubectl("delete", "-f", class) }()
	op, err := env.StartOperator("operator", []string{devenv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	defer op.Stop()

	p := podProxmoxProvider(t, ctx, c, "op-proxmox", "op-proxmox-token")
	name := workload.Name("proxmox", p.Name)
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := cs.AppsV1().Deployments(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
		return err == nil, nil
	}); err != nil {
		t.Fatalf("the operator rendered no Deployment %s", name)
	}
	if out, err := kubectl("-n", devenv.Namespace, "rollout", "status", "deploy/"+name, "--timeout=120s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s\n%s", err, out, env.PodsSummary(ctx))
	}
	waitProviderReady(t, ctx, c, p)
	pods, err := cs.CoreV1().Pods(devenv.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=provider-proxmox"})
	if err != nil {
		t.Fatal(err)
	}
	sa := workload.ServiceAccountName("proxmox", p.Name)
	running := 0
	for _, pod := range pods.Items {
		if pod.Spec.ServiceAccountName == sa && devenv.PodReady(&pod) && pod.Spec.NodeName == env.NodeName() {
			running++
		}
	}
	if running != 1 {
		t.Errorf("%d Ready pods of the workload as %s on the node, want the class's 1 replica\n%s", running, sa, env.PodsSummary(ctx))
	}

	deleteProvider(ctx, c, p)
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
