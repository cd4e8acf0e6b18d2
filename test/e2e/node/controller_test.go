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
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
)

// TestControllerRunsAsPods: the shipped controller Deployment, applied as
// it is, runs the release image as two pods on the node: kubectl rollout
// status and kubectl logs work as the install guide says, each container
// runs as uid 65532 with no capabilities and the memory limit in its
// cgroup, its readiness probe passes, and one replica leads through the
// Lease with its projected ServiceAccount token (kube-apiserver
// authenticated it; the holder is a pod of the Deployment).
func TestControllerRunsAsPods(t *testing.T) {
	ctx := context.Background()
	installController(t)
	logs, err := kubectl("-n", "banlieue-system", "logs", "deploy/banlieue-controller")
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
		if p.Spec.NodeName != env.NodeName() || !podReady(&p) {
			t.Errorf("pod %s on node %q, Ready %v", p.Name, p.Spec.NodeName, podReady(&p))
		}
		proc, err := containerProcess(&p, 0)
		if err != nil {
			t.Errorf("pod %s: %v", p.Name, err)
			continue
		}
		if proc.uid != "65532" || proc.capEff != "0000000000000000" {
			t.Errorf("pod %s runs as uid %s with capabilities %s, want 65532 and none", p.Name, proc.uid, proc.capEff)
		}
		if proc.memoryLimit != 512<<20 {
			t.Errorf("pod %s: memory limit %d in its cgroup, want 512Mi", p.Name, proc.memoryLimit)
		}
	}

	// The pod's own projected token is the controller's identity, and
	// holds what the shipped matrix says it holds, no more.
	token, err := podToken(&pods.Items[0])
	if err != nil {
		t.Fatal(err)
	}
	as, err := asToken(token)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := whoAmI(ctx, as); err != nil || who != "system:serviceaccount:banlieue-system:banlieue-controller" {
		t.Errorf("the pod's token is %q (%v), want the controller's ServiceAccount", who, err)
	}
	for _, q := range []struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}{
		{authorizationv1.ResourceAttributes{Group: "banlieue.io", Resource: "virtualmachines", Verb: "list"}, true},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "list"}, false},
		{authorizationv1.ResourceAttributes{Resource: "secrets", Verb: "get", Namespace: "banlieue-apiserver", Name: "banlieue-apiserver-tls"}, false},
		{authorizationv1.ResourceAttributes{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings", Verb: "create"}, false},
	} {
		got, err := mayDo(ctx, as, q.attrs)
		if err != nil || got != q.want {
			t.Errorf("with the pod's token, %s %s/%s %s in %q: %v (%v), want %v", q.attrs.Verb, q.attrs.Group, q.attrs.Resource, q.attrs.Name, q.attrs.Namespace, got, err, q.want)
		}
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
}

func podReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerCheck is what the kernel says of a container's main process.
type containerCheck struct {
	uid, capEff string
	memoryLimit int64
}

// containerProcess reads container i of pod p from its cgroup (v1, the
// kubelet's cgroupfs layout): its memory limit, and its first process's
// uid and effective capabilities.
func containerProcess(p *corev1.Pod, i int) (containerCheck, error) {
	var c containerCheck
	if len(p.Status.ContainerStatuses) <= i {
		return c, fmt.Errorf("no status for container %d", i)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[i].ContainerID, "containerd://")
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/kubepods*", "*", "pod"+string(p.UID), id))
	if len(matches) == 0 {
		matches, _ = filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/kubepods*", "pod"+string(p.UID), id))
	}
	if len(matches) != 1 {
		return c, fmt.Errorf("container %s: %d memory cgroups", id, len(matches))
	}
	limit, err := os.ReadFile(filepath.Join(matches[0], "memory.limit_in_bytes"))
	if err != nil {
		return c, err
	}
	if c.memoryLimit, err = strconv.ParseInt(strings.TrimSpace(string(limit)), 10, 64); err != nil {
		return c, err
	}
	procs, err := os.ReadFile(filepath.Join(matches[0], "cgroup.procs"))
	if err != nil {
		return c, err
	}
	pid := strings.Fields(string(procs))
	if len(pid) == 0 {
		return c, fmt.Errorf("container %s has no process", id)
	}
	status, err := os.ReadFile(filepath.Join("/proc", pid[0], "status"))
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "Uid:":
			c.uid = f[2] // effective
		case len(f) >= 2 && f[0] == "CapEff:":
			c.capEff = f[1]
		}
	}
	return c, nil
}

// podsSummary says where each pod of banlieue-system is, for a timeout.
func podsSummary(ctx context.Context) string {
	pods, err := cs.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "%s/%s: %s on %q", p.Namespace, p.Name, p.Status.Phase, p.Spec.NodeName)
		for _, c := range p.Status.Conditions {
			if c.Status != corev1.ConditionTrue {
				fmt.Fprintf(&b, " %s=%s(%s)", c.Type, c.Status, c.Message)
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Waiting != nil {
				fmt.Fprintf(&b, " %s waiting: %s %s", s.Name, s.State.Waiting.Reason, s.State.Waiting.Message)
			}
		}
		b.WriteString("\n")
	}
	return b.String()
}
