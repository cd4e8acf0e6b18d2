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
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/test/grants"
)

// TestControllerRunsAsPods: the shipped controller Deployment, applied as
// it is, runs the release image as two pods on the node: kubectl rollout
// status and kubectl logs work as the install guide says, each container
// runs as uid 65532 with no capabilities and the memory limit in its
// cgroup, its readiness probe passes, and one replica leads through the
// Lease with its projected ServiceAccount token (kube-apiserver
// authenticated it; the holder is a pod of the Deployment). A container
// whose process is SIGKILLed (devenv.KillContainer, how tests crash a
// component in pod mode) is running and ready again.
func TestControllerRunsAsPods(t *testing.T) {
	ctx := context.Background()
	installController(t)
	logs, err := env.Kubectl("", "-n", "banlieue-system", "logs", "deploy/banlieue-controller")
	if err != nil || !strings.Contains(logs, "leader") {
		t.Errorf("kubectl logs deploy/banlieue-controller: %v\n%s", err, logs)
	}

	pods, err := cs.CoreV1().Pods("banlieue-system").List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=controller"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 2 {
		t.Fatalf("%d controller pods, want the Deployment's 2", len(pods.Items))
	}
	names := map[string]bool{}
	for _, p := range pods.Items {
		names[p.Name] = true
		if p.Spec.NodeName != env.NodeName() || !devenv.PodReady(&p) {
			t.Errorf("pod %s on node %q, Ready %v", p.Name, p.Spec.NodeName, devenv.PodReady(&p))
		}
		proc, err := devenv.ContainerProcess(&p, 0)
		if err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
			continue
		}
		if proc.UID != "65532" || proc.CapEff != "0000000000000000" {
			t.Errorf("pod %s runs as uid %s with capabilities %s, want 65532 and none", p.Name, proc.UID, proc.CapEff)
		}
		if proc.MemoryLimit != 512<<20 {
			t.Errorf("pod %s: memory limit %d in its cgroup, want 512Mi", p.Name, proc.MemoryLimit)
		}
	}

	// The pod's own projected token is the controller's identity, and
	// holds what the shipped matrix says it holds, no more (test/grants),
	// and what it works with: the VMs.
	grants.CheckPod(t, ctx, env, devenv.Namespace, "controller", devenv.ControllerUser)
	token, err := env.PodToken(&pods.Items[0])
	if err != nil {
		t.Fatal(err)
	}
	as, err := env.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	vms := authorizationv1.ResourceAttributes{Group: "banlieue.io", Resource: "virtualmachines", Verb: "list"}
	if ok, err := devenv.MayDo(ctx, as, vms); err != nil || !ok {
		t.Errorf("with the pod's token, list virtualmachines.banlieue.io: %v (%v), want true", ok, err)
	}

	// One replica leads with its own (projected token) identity.
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		leases, err := cs.CoordinationV1().Leases("banlieue-system").List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, nil
		}
		for _, l := range leases.Items {
			if h := l.Spec.HolderIdentity; h != nil {
				for name := range names {
					if strings.HasPrefix(*h, name) {
						return true, nil
					}
				}
			}
		}
		return false, nil
	}); err != nil {
		t.Errorf("no Lease held by a controller pod of %v", names)
	}

	// A crash as a test makes one: the container's process SIGKILLed,
	// the kubelet starts it again and it is ready once more.
	victim := pods.Items[0]
	took, err := env.CrashContainer(ctx, &victim, 0, time.Minute)
	if err != nil {
		t.Error(err)
	}
	t.Logf("pod %s: killed container running and ready again after %s", victim.Name, took.Round(100*time.Millisecond))
}

// installController applies the shipped controller Deployment and waits
// for its rollout; it goes when the test ends.
func installController(t *testing.T) {
	t.Helper()
	manifest := filepath.Join(root, "artifacts", "deploy", "base", "deployment-controller.yaml")
	if out, err := env.Kubectl("", "apply", "-f", manifest); err != nil {
		t.Fatalf("kubectl apply: %v\n%s", err, out)
	}
	t.Cleanup(func() { _, _ = env.Kubectl("", "delete", "-f", manifest, "--wait=true", "--timeout=60s") })
	if out, err := env.Kubectl("", "-n", devenv.Namespace, "rollout", "status", "deploy/banlieue-controller", "--timeout=120s"); err != nil {
		t.Fatalf("kubectl rollout status: %v\n%s\n%s", err, out, env.PodsSummary(context.Background()))
	}
}
