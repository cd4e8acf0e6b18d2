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

// What tests do to a shipped Deployment on the real node: apply its
// manifest edited as an administrator edits it, wait for its rollout,
// find the replica that leads, and crash that replica's container the way
// the kernel would, waiting for the kubelet to start it again.

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// ApplyPatched applies the manifest file changed by patch (kubectl patch
// --local, of type json, merge or strategic), as an administrator who
// edits a shipped manifest before applying it: the objects are created as
// patched, never as shipped first (a Deployment rolls out once).
func (e *Env) ApplyPatched(file, patchType, patch string) error {
	kubectl := filepath.Join(e.cfg.BinDir, "kubectl")
	cmd := exec.Command(kubectl, "--kubeconfig", e.AdminKubeconfig, "patch", "--local", "-f", file, "--type="+patchType, "-p", patch, "-o", "yaml")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	patched, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("kubectl patch --local -f %s: %v: %s", file, err, stderr.String())
	}
	if out, err := e.Kubectl(string(patched), "apply", "-f", "-"); err != nil {
		return fmt.Errorf("kubectl apply of %s as patched: %v: %s", file, err, out)
	}
	return nil
}

// ApplyProvider applies backend's shipped provider configuration (of the
// repository at root) edited by settings, a merge patch of its ConfigMap
// as an administrator edits the manifest before applying it, and then its
// Deployment: one rollout, of the edited configuration. Its RBAC is the
// environment's (Config.Setup).
func (e *Env) ApplyProvider(root, backend, settings string) error {
	dir := filepath.Join(root, "artifacts", "deploy", "providers", backend)
	if err := e.ApplyPatched(filepath.Join(dir, "config.yaml"), "merge", settings); err != nil {
		return err
	}
	if out, err := e.Kubectl("", "apply", "-f", filepath.Join(dir, "deployment.yaml")); err != nil {
		return fmt.Errorf("kubectl apply of the %s provider's Deployment: %v\n%s", backend, err, out)
	}
	return nil
}

// RolledOut waits for the rollout of each Deployment of namespace named
// (RolloutStatus, at most timeout each).
func (e *Env) RolledOut(ctx context.Context, namespace string, timeout time.Duration, deployments ...string) error {
	for _, d := range deployments {
		if err := e.RolloutStatus(ctx, namespace, d, timeout); err != nil {
			return err
		}
	}
	return nil
}

// ProviderLeader is the pod of class's shipped provider Deployment that
// holds its Lease, and so does the work (the other replica waits for the
// Lease); at most a minute.
func (e *Env) ProviderLeader(ctx context.Context, class string) (*corev1.Pod, error) {
	return e.LeadingPod(ctx, Namespace, "app.kubernetes.io/component=provider-"+class, "banlieue-provider-"+class, time.Minute)
}

// RolloutStatus waits, as kubectl rollout status does, until the
// Deployment namespace/name runs its replicas of its latest template, at
// most timeout; the error says where each pod is.
func (e *Env) RolloutStatus(ctx context.Context, namespace, name string, timeout time.Duration) error {
	out, err := e.Kubectl("", "-n", namespace, "rollout", "status", "deploy/"+name, "--timeout="+timeout.String())
	if err != nil {
		return fmt.Errorf("kubectl rollout status deploy/%s: %v\n%s\n%s", name, err, out, e.PodsSummary(ctx))
	}
	return nil
}

// LeadingPod waits, at most timeout, until a pod among those selector
// picks in namespace holds the Lease namespace/lease, and returns it. A
// replica's holder identity is its host name, the pod's name, then "_"
// and a UUID (controller-runtime's); a Lease not renewed within its
// duration is held by no one (its holder crashed).
func (e *Env) LeadingPod(ctx context.Context, namespace, selector, lease string, timeout time.Duration) (*corev1.Pod, error) {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return nil, err
	}
	var leader *corev1.Pod
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		l, err := cs.CoordinationV1().Leases(namespace).Get(ctx, lease, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		holder := leaseHolder(l, time.Now())
		pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		leader = holderPod(pods.Items, holder)
		last = fmt.Sprintf("the Lease is held by %q", holder)
		return leader != nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("no pod of %s leads through Lease %s/%s within %s (%s)", selector, namespace, lease, timeout, last)
	}
	return leader, nil
}

// leaseHolder is the identity holding l at now: "" when none does, or
// when its holder has not renewed it within its duration.
func leaseHolder(l *coordinationv1.Lease, now time.Time) string {
	s := l.Spec
	if s.HolderIdentity == nil || s.RenewTime == nil || s.LeaseDurationSeconds == nil {
		return ""
	}
	if now.After(s.RenewTime.Add(time.Duration(*s.LeaseDurationSeconds) * time.Second)) {
		return ""
	}
	return *s.HolderIdentity
}

// holderPod is the pod whose replica's holder identity is holder (the
// pod's name, "_", a UUID), nil when none is.
func holderPod(pods []corev1.Pod, holder string) *corev1.Pod {
	if holder == "" {
		return nil
	}
	for i := range pods {
		if strings.HasPrefix(holder, pods[i].Name+"_") {
			return &pods[i]
		}
	}
	return nil
}

// CrashContainer SIGKILLs the main process of container i of p
// (KillContainer) and waits, at most timeout, until the kubelet has
// started it again and it is ready (RestartedSince); it returns how long
// that took.
func (e *Env) CrashContainer(ctx context.Context, p *corev1.Pod, i int, timeout time.Duration) (time.Duration, error) {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return 0, err
	}
	restarts, err := KillContainer(p, i)
	if err != nil {
		return 0, err
	}
	killed := time.Now()
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		got, err := cs.CoreV1().Pods(p.Namespace).Get(ctx, p.Name, metav1.GetOptions{})
		return err == nil && RestartedSince(got, i, restarts), nil
	}); err != nil {
		return 0, fmt.Errorf("pod %s: container %d, SIGKILLed, not running and ready again within %s\n%s", p.Name, i, timeout, e.PodsSummary(ctx))
	}
	return time.Since(killed), nil
}

// EmptyDir is the folder on the host where the kubelet keeps pod p's
// emptyDir volume named volume: what a test reads of the files the pod
// wrote there.
func (e *Env) EmptyDir(p *corev1.Pod, volume string) string {
	return filepath.Join(e.cfg.Dir, "node", "kubelet", "pods", string(p.UID), "volumes", "kubernetes.io~empty-dir", volume)
}
