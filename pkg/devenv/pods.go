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

package devenv

// What tests of a real node read of its pods: readiness, what the kernel
// says of a container, the projected ServiceAccount token the kubelet
// wrote, and what kube-apiserver says that token may do.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// PodReady says whether p's Ready condition is True.
func PodReady(p *corev1.Pod) bool {
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// ContainerCheck is what the kernel says of a container's main process.
type ContainerCheck struct {
	PID         int
	UID, CapEff string
	MemoryLimit int64
}

// ContainerProcess reads container i of pod p from its cgroup (v1, the
// kubelet's cgroupfs layout below its slot's root): its memory limit, and its first process's
// uid and effective capabilities.
func ContainerProcess(p *corev1.Pod, i int) (ContainerCheck, error) {
	var c ContainerCheck
	if len(p.Status.ContainerStatuses) <= i {
		return c, fmt.Errorf("no status for container %d", i)
	}
	id := strings.TrimPrefix(p.Status.ContainerStatuses[i].ContainerID, "containerd://")
	// Under its node's slot's cgroup, in a QoS class's or (Guaranteed) not.
	matches, _ := filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/banlieue-node-*/kubepods*", "*", "pod"+string(p.UID), id))
	if len(matches) == 0 {
		matches, _ = filepath.Glob(filepath.Join("/sys/fs/cgroup/memory/banlieue-node-*/kubepods*", "pod"+string(p.UID), id))
	}
	if len(matches) != 1 {
		return c, fmt.Errorf("container %s: %d memory cgroups", id, len(matches))
	}
	limit, err := os.ReadFile(filepath.Join(matches[0], "memory.limit_in_bytes"))
	if err != nil {
		return c, err
	}
	if c.MemoryLimit, err = strconv.ParseInt(strings.TrimSpace(string(limit)), 10, 64); err != nil {
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
	if c.PID, err = strconv.Atoi(pid[0]); err != nil {
		return c, err
	}
	status, err := os.ReadFile(filepath.Join("/proc", pid[0], "status"))
	if err != nil {
		return c, err
	}
	for _, line := range strings.Split(string(status), "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 2 && f[0] == "Uid:":
			c.UID = f[2] // effective
		case len(f) >= 2 && f[0] == "CapEff:":
			c.CapEff = f[1]
		}
	}
	return c, nil
}

// KillContainer SIGKILLs the main process of container i of pod p, as
// the kernel's OOM killer or a node's crash would end it, and returns its
// restart count before: the kubelet starts it again (within a second on
// this node: kubeletConfig), and RestartedSince tells when it has.
func KillContainer(p *corev1.Pod, i int) (int32, error) {
	proc, err := ContainerProcess(p, i)
	if err != nil {
		return 0, err
	}
	if err := syscall.Kill(proc.PID, syscall.SIGKILL); err != nil {
		return 0, fmt.Errorf("pod %s: killing pid %d: %w", p.Name, proc.PID, err)
	}
	return p.Status.ContainerStatuses[i].RestartCount, nil
}

// RestartedSince tells whether container i of p has been started again
// since restarts, and is running and ready.
func RestartedSince(p *corev1.Pod, i int, restarts int32) bool {
	if len(p.Status.ContainerStatuses) <= i {
		return false
	}
	s := p.Status.ContainerStatuses[i]
	return s.RestartCount > restarts && s.State.Running != nil && s.Ready
}

// PodsSummary says where each pod is and what it waits for: what a test
// that timed out waiting for a rollout prints.
func (e *Env) PodsSummary(ctx context.Context) string {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err.Error()
	}
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

// PodToken reads the projected ServiceAccount token the kubelet wrote for
// pod p (its kube-api-access volume, under the node's kubelet root).
func (e *Env) PodToken(p *corev1.Pod) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(e.cfg.Dir, "node", "kubelet", "pods", string(p.UID),
		"volumes", "kubernetes.io~projected", "kube-api-access-*", "token"))
	if len(matches) != 1 {
		return "", fmt.Errorf("pod %s: %d projected tokens", p.Name, len(matches))
	}
	data, err := os.ReadFile(matches[0])
	return strings.TrimSpace(string(data)), err
}

// TokenClient is a clientset of kube-apiserver authenticated by token alone.
func (e *Env) TokenClient(token string) (*kubernetes.Clientset, error) {
	cfg := rest.AnonymousClientConfig(e.Admin)
	cfg.BearerToken = token
	// A test asks a whole matrix of reviews in a row: client-go's default
	// 5 per second would make it wait, not the server.
	cfg.QPS, cfg.Burst = 100, 200
	return kubernetes.NewForConfig(cfg)
}

// WhoAmI is the user kube-apiserver authenticates c as.
func WhoAmI(ctx context.Context, c *kubernetes.Clientset) (string, error) {
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// MayDo asks kube-apiserver, as c, whether c may do verb on the resource
// (group/resource, optionally a name, in a namespace).
func MayDo(ctx context.Context, c *kubernetes.Clientset, attrs authorizationv1.ResourceAttributes) (bool, error) {
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}

// Kubectl runs kubectl (BinDir's) as the administrator, with stdin when it
// is not empty; its combined output.
func (e *Env) Kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(e.cfg.BinDir, "kubectl"), append([]string{"--kubeconfig", e.AdminKubeconfig}, args...)...)
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// MetricsReaderToken makes the ServiceAccount namespace/name, binds it to
// the shipped banlieue-metrics-reader (as docs/metrics.md has a
// Prometheus's bound) and returns a token of it, and what removes both.
func (e *Env) MetricsReaderToken(namespace, name string) (token string, remove func(), err error) {
	binding := "metrics-reader:" + namespace + ":" + name
	remove = func() {
		_, _ = e.Kubectl("", "delete", "clusterrolebinding", binding, "--ignore-not-found")
		_, _ = e.Kubectl("", "-n", namespace, "delete", "serviceaccount", name, "--ignore-not-found")
	}
	for _, args := range [][]string{
		{"-n", namespace, "create", "serviceaccount", name},
		{"create", "clusterrolebinding", binding, "--clusterrole=banlieue-metrics-reader", "--serviceaccount=" + namespace + ":" + name},
	} {
		if out, err := e.Kubectl("", args...); err != nil {
			remove()
			return "", nil, fmt.Errorf("kubectl %s: %v: %s", strings.Join(args, " "), err, out)
		}
	}
	out, err := e.Kubectl("", "-n", namespace, "create", "token", name)
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("kubectl create token: %v: %s", err, out)
	}
	return strings.TrimSpace(out), remove, nil
}
