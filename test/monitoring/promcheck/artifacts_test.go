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

package promcheck

import (
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/apply"
	"github.com/firestoned/banlieue/pkg/workload"
)

// The shipped artifacts, read from the checkout (test/monitoring/promcheck).
var (
	root       = filepath.Join("..", "..", "..")
	monitoring = filepath.Join(root, "artifacts", "monitoring")
)

// TestRulesShape: every alert waits (for:), is routed (severity) and
// explains itself (summary, description); the four alerts are
// there.
func TestRulesShape(t *testing.T) {
	rules, err := Rules(filepath.Join(monitoring, "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if rules.Kind != monitoringv1.PrometheusRuleKind || rules.APIVersion != monitoringv1.SchemeGroupVersion.String() {
		t.Errorf("%s %s, want a %s", rules.APIVersion, rules.Kind, monitoringv1.PrometheusRuleKind)
	}
	alerts := map[string]monitoringv1.Duration{} // alert: its for
	for _, g := range rules.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			if r.For == nil || *r.For == "" {
				t.Errorf("alert %s has no for:", r.Alert)
				continue
			}
			alerts[r.Alert] = *r.For
			if s := r.Labels["severity"]; s != "warning" && s != "critical" && s != "info" {
				t.Errorf("alert %s severity %q", r.Alert, s)
			}
			for _, a := range []string{"summary", "description"} {
				if r.Annotations[a] == "" {
					t.Errorf("alert %s has no %s", r.Alert, a)
				}
			}
		}
	}
	for _, want := range []string{"BanlieueProviderUnready", "BanlieueVirtualMachinesUnscheduled", "BanlieueProvisioningSlow", "BanlieueBackendErrorRate"} {
		if _, ok := alerts[want]; !ok {
			t.Errorf("no alert %s", want)
		}
	}
	if f := alerts["BanlieueProviderUnready"]; f != "" && f != "15m" {
		t.Errorf("BanlieueProviderUnready fires after %s, want 15m", f)
	}
}

// TestServiceMonitorSelectsMetricsServices: the ServiceMonitor, decoded
// strictly into the operator's type, selects every metrics Service of
// artifacts/deploy (a Service in front of a container port named
// metrics: the controller's, the operator's, each static provider's) and
// the metrics Service of each workload the operator renders in
// banlieue-system (pkg/workload, per Provider and shared, every backend)
// on a port that Service has, over HTTPS with a bearer token, and no
// other Service (the API server's and etcd's are not metrics endpoints).
func TestServiceMonitorSelectsMetricsServices(t *testing.T) {
	sm, err := ServiceMonitor(filepath.Join(monitoring, "servicemonitor.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if sm.Kind != monitoringv1.ServiceMonitorsKind || sm.APIVersion != monitoringv1.SchemeGroupVersion.String() {
		t.Errorf("%s %s, want a %s", sm.APIVersion, sm.Kind, monitoringv1.ServiceMonitorsKind)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	for _, ep := range sm.Spec.Endpoints {
		if ep.Scheme == nil || *ep.Scheme != monitoringv1.SchemeHTTPS {
			t.Errorf("endpoint %s scheme %s, want HTTPS (the endpoints serve only TLS)", ep.Port, ep.Scheme)
		}
		if ep.BearerTokenFile == "" && ep.Authorization == nil {
			t.Errorf("endpoint %s sends no token (the endpoints answer 401 without one)", ep.Port)
		}
		if ep.TLSConfig == nil {
			t.Errorf("endpoint %s has no tlsConfig (the certificates are self-signed)", ep.Port)
		}
	}
	services, deployments := deployObjects(t)
	rendered, renderedDeployments := renderedObjects(t)
	services, deployments = append(services, rendered...), append(deployments, renderedDeployments...)
	metricsServices := 0
	for _, svc := range services {
		metrics := servesMetrics(svc, deployments)
		if metrics {
			metricsServices++
		}
		selected := (sm.Spec.NamespaceSelector.Any || slices.Contains(sm.Spec.NamespaceSelector.MatchNames, svc.Namespace)) &&
			selector.Matches(labels.Set(svc.Labels))
		switch {
		case metrics && !selected:
			t.Errorf("Service %s/%s serves metrics and is not selected (labels %v)", svc.Namespace, svc.Name, svc.Labels)
		case !metrics && selected:
			t.Errorf("Service %s/%s serves no metrics and is selected", svc.Namespace, svc.Name)
		case metrics:
			for _, ep := range sm.Spec.Endpoints {
				if !slices.ContainsFunc(svc.Spec.Ports, func(p corev1.ServicePort) bool { return p.Name == ep.Port }) {
					t.Errorf("Service %s/%s has no port %q", svc.Namespace, svc.Name, ep.Port)
				}
			}
		}
	}
	// The controller, the operator and the three providers; a
	// per-Provider and a shared workload of each backend.
	if metricsServices != 5+len(rendered) || len(rendered) != 6 {
		t.Errorf("%d metrics Services (%d rendered), want 5 in artifacts/deploy and 6 rendered", metricsServices, len(rendered))
	}
}

// renderedObjects are the metrics Services and Deployments the operator
// renders for a per-Provider and a shared workload of each backend in
// banlieue-system, as the API server stores them.
func renderedObjects(t *testing.T) ([]*corev1.Service, []*appsv1.Deployment) {
	t.Helper()
	var services []*corev1.Service
	var deployments []*appsv1.Deployment
	for _, backend := range []string{"vsphere", "libvirt", "proxmox"} {
		class := &v1alpha1.ProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "lab-" + backend},
			Spec: v1alpha1.ProviderClassSpec{Backend: backend, Image: "ghcr.io/firestoned/banlieue:v0.1.0", Namespace: "banlieue-system"}}
		v1alpha1.SetDefaults_ProviderClassSpec(&class.Spec)
		p := v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "lab", Namespace: "banlieue-system", UID: "u1"},
			Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: class.Name}}}
		for _, w := range []workload.Workload{workload.ForProvider(class, &p, workload.Inputs{}), workload.Shared(class, []v1alpha1.Provider{p}, workload.Inputs{})} {
			svc, d := &corev1.Service{}, &appsv1.Deployment{}
			for from, into := range map[any]any{w.Service: svc, w.Deployment: d} {
				data, err := json.Marshal(from)
				if err == nil {
					err = json.Unmarshal(data, into)
				}
				if err != nil {
					t.Fatalf("workload %s: %v", w.Name, err)
				}
			}
			services, deployments = append(services, svc), append(deployments, d)
		}
	}
	return services, deployments
}

// servesMetrics: one of svc's ports targets a container port named
// metrics of a Deployment svc selects.
func servesMetrics(svc *corev1.Service, deployments []*appsv1.Deployment) bool {
	for _, d := range deployments {
		if d.Namespace != svc.Namespace || len(svc.Spec.Selector) == 0 || !labels.SelectorFromSet(svc.Spec.Selector).Matches(labels.Set(d.Spec.Template.Labels)) {
			continue
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			for _, cp := range c.Ports {
				for _, sp := range svc.Spec.Ports {
					if cp.Name == "metrics" && (sp.TargetPort.StrVal == cp.Name || sp.TargetPort.IntValue() == int(cp.ContainerPort)) {
						return true
					}
				}
			}
		}
	}
	return false
}

// deployObjects are the Services and Deployments of every YAML file of
// artifacts/deploy.
func deployObjects(t *testing.T) ([]*corev1.Service, []*appsv1.Deployment) {
	t.Helper()
	var services []*corev1.Service
	var deployments []*appsv1.Deployment
	err := filepath.WalkDir(filepath.Join(root, "artifacts", "deploy"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") || d.Name() == "kustomization.yaml" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		objs, err := apply.Decode(data)
		if err != nil {
			t.Errorf("%s: %v", path, err)
			return nil
		}
		for _, o := range objs {
			var into any
			switch o.GetKind() {
			case "Service":
				s := &corev1.Service{}
				services, into = append(services, s), s
			case "Deployment":
				dep := &appsv1.Deployment{}
				deployments, into = append(deployments, dep), dep
			default:
				continue
			}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, into); err != nil {
				t.Errorf("%s: %s %s: %v", path, o.GetKind(), o.GetName(), err)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return services, deployments
}

// TestKustomization: kubectl apply -k artifacts/monitoring builds the
// ServiceMonitor, the PrometheusRule and the dashboard's ConfigMap (the
// file as it is, labelled for Grafana's sidecar) in banlieue-system.
func TestKustomization(t *testing.T) {
	out, err := exec.Command(filepath.Join(root, "bin", "kubectl"), "kustomize", monitoring).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize: %v: %s", err, out)
	}
	objs, err := apply.Decode(out)
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := os.ReadFile(filepath.Join(monitoring, "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]bool{}
	for _, o := range objs {
		kinds[o.GetKind()] = true
		if o.GetNamespace() != "banlieue-system" {
			t.Errorf("%s %s in namespace %q", o.GetKind(), o.GetName(), o.GetNamespace())
		}
		if o.GetKind() != "ConfigMap" {
			continue
		}
		cm := &corev1.ConfigMap{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, cm); err != nil {
			t.Fatal(err)
		}
		if cm.Labels["grafana_dashboard"] != "1" || cm.Data["banlieue.json"] != string(dashboard) {
			t.Errorf("ConfigMap %s: labels %v, dashboard as shipped: %v", cm.Name, cm.Labels, cm.Data["banlieue.json"] == string(dashboard))
		}
	}
	for _, want := range []string{"ServiceMonitor", "PrometheusRule", "ConfigMap"} {
		if !kinds[want] {
			t.Errorf("kubectl kustomize %s builds no %s (%v)", monitoring, want, kinds)
		}
	}
}
