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
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/bootstrap"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/test/grants"
)

// installWorkload is one of the install's Deployments or StatefulSets, by its
// pods' component label.
type installWorkload struct {
	namespace, component, image string
	replicas                    int
}

var installed = []installWorkload{
	{bootstrap.APIServerNamespace, "apiserver", devenv.ReleaseImage, 2},
	{bootstrap.APIServerNamespace, "etcd", "registry.k8s.io/etcd:3.7.0-0", 3},
	{devenv.Namespace, "controller", devenv.ReleaseImage, 2},
	{devenv.Namespace, "operator", devenv.ReleaseImage, 2},
}

// TestBootstrapRunsEverythingAsPods: after banlieue bootstrap operator
// --wait, every workload of the install runs its shipped replicas as
// ready pods on the node, of the image its manifest names, as uid 65532
// without capabilities; the aggregated API answers from the API server's
// pods (the ProviderClasses bootstrap applied through it), and what is
// written through it is read back (stored in the etcd pods: the API
// server has no other storage).
func TestBootstrapRunsEverythingAsPods(t *testing.T) {
	ctx := context.Background()
	for _, want := range []string{"deployment/banlieue-apiserver/banlieue-apiserver", "apiservice/v1alpha1.banlieue.io"} {
		if !strings.Contains(bootstrapOutput, want) {
			t.Errorf("bootstrap --wait said nothing of %s:\n%s", want, bootstrapOutput)
		}
	}
	for _, w := range installed {
		pods, err := cs.CoreV1().Pods(w.namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + w.component})
		if err != nil {
			t.Fatal(err)
		}
		ready := 0
		for _, p := range pods.Items {
			if !devenv.PodReady(&p) || p.Spec.NodeName != env.NodeName() {
				t.Errorf("%s pod %s: Ready %v on node %q", w.component, p.Name, devenv.PodReady(&p), p.Spec.NodeName)
				continue
			}
			ready++
			if img := p.Spec.Containers[0].Image; img != w.image {
				t.Errorf("%s pod %s runs %s, want %s", w.component, p.Name, img, w.image)
			}
			proc, err := devenv.ContainerProcess(&p, 0)
			if err != nil {
				t.Errorf("%s pod %s: %v", w.component, p.Name, err)
				continue
			}
			if proc.UID != "65532" || proc.CapEff != "0000000000000000" {
				t.Errorf("%s pod %s runs as uid %s with capabilities %s, want 65532 and none", w.component, p.Name, proc.UID, proc.CapEff)
			}
		}
		if ready != w.replicas {
			t.Errorf("%s: %d ready pods, want %d\n%s", w.component, ready, w.replicas, env.PodsSummary(ctx))
		}
	}

	out, err := env.Kubectl("", "get", "providerclasses", "-o", "name")
	if err != nil || !strings.Contains(out, "providerclass.banlieue.io/vsphere") || !strings.Contains(out, "providerclass.banlieue.io/proxmox") {
		t.Errorf("kubectl get providerclasses: %v\n%s", err, out)
	}
	class := `{"apiVersion":"banlieue.io/v1alpha1","kind":"VMClass","metadata":{"name":"on-pods"},"spec":{"hardware":{"cpus":2,"memoryMiB":2048}}}`
	if out, err := env.Kubectl(class, "apply", "-f", "-"); err != nil {
		t.Fatalf("kubectl apply a VMClass: %v\n%s", err, out)
	}
	defer func() { _, _ = env.Kubectl("", "delete", "vmclass", "on-pods") }()
	if out, err := env.Kubectl("", "get", "vmclass", "on-pods", "-o", "jsonpath={.spec.hardware.cpus}"); err != nil || out != "2" {
		t.Errorf("the VMClass read back: %v %q", err, out)
	}
}

// TestPodTokensHoldTheMatrix: the API server's, the controller's and the
// operator's pods, as bootstrap installed them, are asked the whole
// least-privilege matrix (test/grants) with their own projected tokens:
// each holds exactly the yeses granted on purpose. (The static vSphere,
// libvirt and Proxmox VE providers' pods are asked it in test/e2e/node.)
func TestPodTokensHoldTheMatrix(t *testing.T) {
	ctx := context.Background()
	for _, id := range []struct{ namespace, component, user string }{
		{bootstrap.APIServerNamespace, "apiserver", devenv.BanlieueUser},
		{devenv.Namespace, "controller", devenv.ControllerUser},
		{devenv.Namespace, "operator", devenv.OperatorUser},
	} {
		grants.CheckPod(t, ctx, env, id.namespace, id.component, id.user)
	}
}
