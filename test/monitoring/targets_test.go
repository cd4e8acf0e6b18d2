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

// What Prometheus scrapes for the shipped ServiceMonitor, found as the
// Prometheus operator's configuration finds it: the Services its selector
// and namespaceSelector pick, their EndpointSlices, each ready endpoint's
// address on the port named as the ServiceMonitor's endpoint says, with its
// scheme, path, TLS settings and bearer token. There is no kube-proxy on
// the node, and Prometheus does not use ClusterIPs either: the host
// reaches the pods' addresses on the bridge.

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/firestoned/banlieue/pkg/metricstest"
	"github.com/firestoned/banlieue/test/monitoring/promcheck"
)

// target is one endpoint Prometheus scrapes for a ServiceMonitor.
type target struct {
	// Service and Pod are namespace/name: the Service selected and the
	// pod its EndpointSlice's endpoint refers to.
	Service, Pod string
	URL          string
	endpoint     monitoringv1.Endpoint
}

// scraped is a target's scrape: its families, or why it failed.
type scraped struct {
	target
	Families metricstest.Families
	Err      error
}

// shippedServiceMonitor is artifacts/monitoring/servicemonitor.yaml.
func shippedServiceMonitor() (*monitoringv1.ServiceMonitor, error) {
	return promcheck.ServiceMonitor(filepath.Join(root, "artifacts", "monitoring", "servicemonitor.yaml"))
}

// monitoredNamespaces are the namespaces sm's namespaceSelector picks:
// its matchNames, every one ("") with any, its own without either.
func monitoredNamespaces(sm *monitoringv1.ServiceMonitor) []string {
	switch {
	case sm.Spec.NamespaceSelector.Any:
		return []string{metav1.NamespaceAll}
	case len(sm.Spec.NamespaceSelector.MatchNames) > 0:
		return sm.Spec.NamespaceSelector.MatchNames
	}
	return []string{sm.Namespace}
}

// discover lists the targets of sm.
func discover(ctx context.Context, sm *monitoringv1.ServiceMonitor) ([]target, error) {
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		return nil, err
	}
	var out []target
	for _, namespace := range monitoredNamespaces(sm) {
		services, err := cs.CoreV1().Services(namespace).List(ctx, metav1.ListOptions{LabelSelector: selector.String()})
		if err != nil {
			return nil, err
		}
		for _, svc := range services.Items {
			eps, err := cs.DiscoveryV1().EndpointSlices(svc.Namespace).List(ctx, metav1.ListOptions{
				LabelSelector: labels.Set{discoveryv1.LabelServiceName: svc.Name}.String()})
			if err != nil {
				return nil, err
			}
			for _, ep := range sm.Spec.Endpoints {
				out = append(out, endpointTargets(&svc, eps.Items, ep)...)
			}
		}
	}
	return out, nil
}

// endpointTargets are the targets of svc's slices for the ServiceMonitor
// endpoint ep: each ready endpoint's addresses on the port named ep.Port.
func endpointTargets(svc *corev1.Service, slices []discoveryv1.EndpointSlice, ep monitoringv1.Endpoint) []target {
	scheme, path := "http", ep.Path
	if ep.Scheme != nil {
		scheme = strings.ToLower(string(*ep.Scheme))
	}
	if path == "" {
		path = "/metrics"
	}
	var out []target
	for _, s := range slices {
		for _, port := range s.Ports {
			if port.Name == nil || *port.Name != ep.Port || port.Port == nil {
				continue
			}
			for _, e := range s.Endpoints {
				// An unknown readiness counts as ready (the API's advice).
				if e.Conditions.Ready != nil && !*e.Conditions.Ready {
					continue
				}
				pod := ""
				if e.TargetRef != nil && e.TargetRef.Kind == "Pod" {
					pod = e.TargetRef.Namespace + "/" + e.TargetRef.Name
				}
				for _, addr := range e.Addresses {
					out = append(out, target{Service: svc.Namespace + "/" + svc.Name, Pod: pod, endpoint: ep,
						URL: scheme + "://" + net.JoinHostPort(addr, strconv.Itoa(int(*port.Port))) + path})
				}
			}
		}
	}
	return out
}

// scrape GETs t as Prometheus does with its endpoint's settings: TLS
// verified unless tlsConfig skips it, and the scraper's own token when
// bearerTokenFile names it (the file is Prometheus pod's ServiceAccount
// token; scraperToken is this suite's Prometheus's).
func scrape(t target) (metricstest.Families, error) {
	ep := t.endpoint
	if ep.Authorization != nil || ep.BasicAuth != nil || ep.OAuth2 != nil || ep.BearerTokenSecret != nil {
		return nil, errors.New("the ServiceMonitor authenticates otherwise than by the scraper's token, which this suite does not do")
	}
	skip := ep.TLSConfig != nil && ep.TLSConfig.InsecureSkipVerify != nil && *ep.TLSConfig.InsecureSkipVerify
	transport := &http.Transport{TLSClientConfig: &tls.Config{MinVersion: tls.VersionTLS12, InsecureSkipVerify: skip}} //nolint:gosec // as the ServiceMonitor says
	defer transport.CloseIdleConnections()
	req, err := http.NewRequest(http.MethodGet, t.URL, nil)
	if err != nil {
		return nil, err
	}
	if ep.BearerTokenFile != "" {
		req.Header.Set("Authorization", "Bearer "+scraperToken)
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	resp, err := (&http.Client{Timeout: 10 * time.Second, Transport: transport}).Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", t.URL, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", t.URL, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %.300s", t.URL, resp.StatusCode, body)
	}
	return metricstest.Parse(strings.NewReader(string(body)))
}

// scrapeAll discovers sm's targets and scrapes each.
func scrapeAll(ctx context.Context, sm *monitoringv1.ServiceMonitor) ([]scraped, error) {
	targets, err := discover(ctx, sm)
	if err != nil {
		return nil, err
	}
	out := make([]scraped, 0, len(targets))
	for _, t := range targets {
		f, err := scrape(t)
		out = append(out, scraped{target: t, Families: f, Err: err})
	}
	return out, nil
}

// merged is every scrape's families as one, as a query reads every
// target; the error joins the failed scrapes'.
func merged(scrapes []scraped) (metricstest.Families, error) {
	var all metricstest.Families
	var errs []error
	for _, s := range scrapes {
		if s.Err != nil {
			errs = append(errs, s.Err)
			continue
		}
		all = all.Merge(s.Families)
	}
	return all, errors.Join(errs...)
}
