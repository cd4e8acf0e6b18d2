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

package monitoring

import (
	"context"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/metricstest"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// TestServiceMonitorScrapesEveryMetricsPod: the shipped ServiceMonitor,
// resolved as the Prometheus operator resolves it against the shipped
// metrics Services and their EndpointSlices, has Prometheus scrape every
// pod of every Deployment serving metrics (a container port named
// metrics) in the namespaces it watches, each once and nothing else, and
// every target answers 200 to the scraper's token with the
// ServiceMonitor's scheme and TLS settings, with banlieue_ metrics. A
// Service selecting no pods, a wrong port name, a ServiceMonitor selector
// or namespace missing a Service, a wrong scheme or TLS setting: a pod
// unscraped or a scrape failing.
func TestServiceMonitorScrapesEveryMetricsPod(t *testing.T) {
	ctx := context.Background()
	sm, err := shippedServiceMonitor()
	if err != nil {
		t.Fatal(err)
	}
	var want, got []string
	var scrapes []scraped
	var last error
	// EndpointSlices follow the pods' readiness: until they agree. What
	// is checked below is the last complete look.
	_ = wait.PollUntilContextTimeout(ctx, time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		pods, err := metricsPods(ctx, sm)
		if err != nil {
			last = err
			return false, nil
		}
		s, err := scrapeAll(ctx, sm)
		if err != nil {
			last = err
			return false, nil
		}
		want, scrapes, got = pods, s, scrapedPods(s)
		_, last = merged(scrapes)
		return last == nil && slices.Equal(want, got), nil
	})
	if len(want) == 0 {
		t.Fatalf("no pod of a Deployment serving metrics in %v (%v)", monitoredNamespaces(sm), last)
	}
	seen := count.Sightings(got)
	if missing := count.Missing(want, seen); len(missing) > 0 {
		t.Errorf("pods serving metrics that the ServiceMonitor does not have scraped: %v (targets %v)", missing, got)
	}
	if extra := count.Missing(got, count.Sightings(want)); len(extra) > 0 {
		t.Errorf("targets that are no pod serving metrics: %v (pods %v)", extra, want)
	}
	if n, keys := count.Duplicated(seen); n > 0 {
		t.Errorf("pods scraped more than once (%d extra scrapes): %v", n, keys)
	}
	for _, s := range scrapes {
		switch {
		case s.Err != nil:
			t.Errorf("target %s (Service %s, pod %s): %v", s.URL, s.Service, s.Pod, s.Err)
		case !banlieueMetrics(s.Families):
			t.Errorf("target %s (Service %s, pod %s) exports no banlieue_ metric: %v", s.URL, s.Service, s.Pod, slices.Sorted(maps.Keys(s.Families)))
		}
	}
	t.Logf("%d targets: %v", len(got), got)
}

// banlieueMetrics says whether f holds a series of banlieue's own (a
// standby replica's too: banlieue_console_sessions, say).
func banlieueMetrics(f metricstest.Families) bool {
	for name, mf := range f {
		if strings.HasPrefix(name, "banlieue_") && len(mf.GetMetric()) > 0 {
			return true
		}
	}
	return false
}

// scrapedPods are the pods (namespace/name) the scrapes are of, sorted;
// a target of no pod by its URL.
func scrapedPods(scrapes []scraped) []string {
	out := make([]string, 0, len(scrapes))
	for _, s := range scrapes {
		if s.Pod == "" {
			out = append(out, s.URL)
			continue
		}
		out = append(out, s.Pod)
	}
	slices.Sort(out)
	return out
}

// metricsPods are the pods (namespace/name, sorted), as kube-apiserver
// lists them, of every Deployment of sm's namespaces whose pods serve
// metrics (a container port named metrics): what Prometheus must scrape.
func metricsPods(ctx context.Context, sm *monitoringv1.ServiceMonitor) ([]string, error) {
	var out []string
	for _, namespace := range monitoredNamespaces(sm) {
		deployments, err := cs.AppsV1().Deployments(namespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, err
		}
		for _, d := range deployments.Items {
			if !servesMetrics(&d.Spec.Template.Spec) {
				continue
			}
			selector, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
			if err != nil {
				return nil, err
			}
			pods, err := cs.CoreV1().Pods(d.Namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
			if err != nil {
				return nil, err
			}
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
					out = append(out, p.Namespace+"/"+p.Name)
				}
			}
		}
	}
	slices.Sort(out)
	return out, nil
}

// servesMetrics: a container of spec has a port named metrics.
func servesMetrics(spec *corev1.PodSpec) bool {
	for _, c := range spec.Containers {
		for _, p := range c.Ports {
			if p.Name == "metrics" {
				return true
			}
		}
	}
	return false
}
