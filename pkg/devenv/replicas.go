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

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Replica is a pod of a shipped Deployment as a test reaches it: its
// metrics (HTTPS, authenticated) and probes at its pod IP (the host
// reaches pods on the node's bridge), on the ports its container names
// metrics and health.
type Replica struct {
	Pod string
	// Metrics is https://IP:PORT/metrics.
	Metrics string
	// Health is http://IP:PORT, for Leadership and /healthz.
	Health string
}

// Replicas returns the Deployment namespace/name's pods, as many as it
// asks for, each with an IP; an error while a rollout or a replacement is
// under way.
func (e *Env) Replicas(ctx context.Context, namespace, name string) ([]Replica, error) {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return nil, err
	}
	d, err := cs.AppsV1().Deployments(namespace).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: metav1.FormatLabelSelector(d.Spec.Selector)})
	if err != nil {
		return nil, err
	}
	var out []Replica
	for _, p := range pods.Items {
		if p.DeletionTimestamp != nil {
			continue
		}
		r, err := replicaOf(&p)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	if want := int(*d.Spec.Replicas); len(out) != want {
		return nil, fmt.Errorf("%d pods of %s, it asks for %d", len(out), name, want)
	}
	return out, nil
}

func replicaOf(p *corev1.Pod) (Replica, error) {
	if p.Status.PodIP == "" {
		return Replica{}, fmt.Errorf("pod %s has no IP yet", p.Name)
	}
	ports := map[string]string{}
	for _, ctr := range p.Spec.Containers {
		for _, port := range ctr.Ports {
			ports[port.Name] = strconv.Itoa(int(port.ContainerPort))
		}
	}
	if ports["metrics"] == "" || ports["health"] == "" {
		return Replica{}, fmt.Errorf("pod %s names no metrics and health ports: %v", p.Name, ports)
	}
	return Replica{Pod: p.Name,
		Metrics: "https://" + net.JoinHostPort(p.Status.PodIP, ports["metrics"]) + "/metrics",
		Health:  "http://" + net.JoinHostPort(p.Status.PodIP, ports["health"]),
	}, nil
}

// WaitLeadership waits, at most timeout, until one of the Deployment's
// replicas says leading and every other (at least one) standby on its
// /readyz?verbose (Leadership), all of them ready, and returns the leader
// and all the replicas.
func (e *Env) WaitLeadership(ctx context.Context, namespace, name string, timeout time.Duration) (lead Replica, all []Replica, err error) {
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		rs, err := e.Replicas(ctx, namespace, name)
		if err != nil {
			last = err
			return false, nil
		}
		states := make([]string, len(rs))
		for i, r := range rs {
			if states[i], err = Leadership(r.Health); err != nil {
				last = fmt.Errorf("pod %s: %w", r.Pod, err)
				return false, nil
			}
		}
		i, err := oneLeading(states)
		if err != nil {
			last = err
			return false, nil
		}
		lead, all = rs[i], rs
		return true, nil
	})
	if err != nil {
		return Replica{}, nil, fmt.Errorf("deployment %s/%s: no single leader within %s: %v", namespace, name, timeout, last)
	}
	return lead, all, nil
}

// oneLeading is the index of the one replica whose state is leading, when
// every other (at least one) is standby.
func oneLeading(states []string) (int, error) {
	lead, standby := -1, 0
	for i, s := range states {
		switch s {
		case "leading":
			if lead >= 0 {
				return -1, fmt.Errorf("replicas say %v: two leading", states)
			}
			lead = i
		case "standby":
			standby++
		}
	}
	if lead < 0 || standby == 0 || standby != len(states)-1 {
		return -1, fmt.Errorf("replicas say %v, want one leading and the others (at least one) standby", states)
	}
	return lead, nil
}

// LiveAndReady waits, at most timeout, until replica r of namespace
// answers /healthz and the kubelet's readiness probe marks its pod Ready.
func (e *Env) LiveAndReady(ctx context.Context, namespace string, r Replica, timeout time.Duration) error {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	hc := &http.Client{Timeout: 10 * time.Second}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		resp, err := hc.Get(r.Health + "/healthz")
		if err != nil {
			last = err
			return false, nil
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("%s/healthz: HTTP %d", r.Health, resp.StatusCode)
			return false, nil
		}
		p, err := cs.CoreV1().Pods(namespace).Get(ctx, r.Pod, metav1.GetOptions{})
		if err != nil {
			last = err
			return false, nil
		}
		if !PodReady(p) {
			last = fmt.Errorf("not Ready: %+v", p.Status.Conditions)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("pod %s not live and ready within %s: %v", r.Pod, timeout, last)
	}
	return nil
}
