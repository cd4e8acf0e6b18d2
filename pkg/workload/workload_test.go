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
package workload

import (
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	rbacv1ac "k8s.io/client-go/applyconfigurations/rbac/v1"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func class() *v1alpha1.ProviderClass {
	c := &v1alpha1.ProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "vsphere"}, Spec: v1alpha1.ProviderClassSpec{Backend: "vsphere", Image: "banlieue:test"}}
	v1alpha1.SetDefaults_ProviderClassSpec(&c.Spec)
	return c
}

func provider(name, creds string, ca *v1alpha1.CABundleSource) v1alpha1.Provider {
	return v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "banlieue-system"},
		Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{CredentialsRef: v1alpha1.LocalObjectReference{Name: creds}, CABundle: ca}},
	}
}

// grants are a Role's rules as "resource verb [names]" strings.
func grants(rules []rbacv1ac.PolicyRuleApplyConfiguration) []string {
	var out []string
	for _, r := range rules {
		for _, res := range r.Resources {
			for _, v := range r.Verbs {
				out = append(out, res+" "+v+" "+strings.Join(r.ResourceNames, ","))
			}
		}
	}
	return out
}

func TestForProvider(t *testing.T) {
	p := provider("prod", "prod-creds", &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Name: "corp-ca"}})
	p.UID = "u1"
	w := ForProvider(class(), &p, Inputs{SharedProviderNamespace: "infra", CloudConfigs: []string{"base-cc"}})
	if w.Name != "banlieue-provider-vsphere-prod" || w.Namespace != "banlieue-system" {
		t.Fatalf("workload %s/%s", w.Namespace, w.Name)
	}
	got := grants(w.Role.Rules)
	for _, want := range []string{
		"providers get prod", "providers list prod", "providers watch prod", "providers/status patch prod", "providers/finalizers patch prod",
		"secrets get base-cc,prod-creds", "configmaps get corp-ca",
		"leases create ", "leases update banlieue-provider-vsphere-prod", "events create ",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("the Role lacks %q: %q", want, got)
		}
	}
	for _, g := range got {
		if strings.HasPrefix(g, "secrets ") && g != "secrets get base-cc,prod-creds" || strings.HasPrefix(g, "secrets list") {
			t.Errorf("the Role grants %q", g)
		}
		// A write of the Provider itself would let the workload rename
		// the Secrets this Role grants.
		if strings.HasPrefix(g, "providers update") || strings.HasPrefix(g, "providers patch") {
			t.Errorf("the Role grants %q: the workload could change the spec it is granted from", g)
		}
	}
	args := w.Deployment.Spec.Template.Spec.Containers[0].Args
	for _, want := range []string{"provider", "vsphere", "--namespace=banlieue-system", "--provider=prod", "--leader-elect",
		"--service-account=banlieue-system:banlieue-provider.prod", "-v=2", "--shared-provider-namespace=infra"} {
		if !slices.Contains(args, want) {
			t.Errorf("args lack %q: %q", want, args)
		}
	}
	// Never shortened: the machines' admission policy reads the Provider
	// back from it.
	if *w.Deployment.Spec.Replicas != 1 || *w.Deployment.Spec.Template.Spec.ServiceAccountName != "banlieue-provider.prod" ||
		*w.ServiceAccount.Name != "banlieue-provider.prod" || *w.RoleBinding.Subjects[0].Name != "banlieue-provider.prod" {
		t.Errorf("replicas %d, service account %s", *w.Deployment.Spec.Replicas, *w.Deployment.Spec.Template.Spec.ServiceAccountName)
	}
	if sel := w.Deployment.Spec.Selector.MatchLabels; sel[ProviderLabel] != "prod" {
		t.Errorf("selector %v does not pick this Provider's pods only", sel)
	}
	if len(w.Deployment.OwnerReferences) != 1 || *w.Deployment.OwnerReferences[0].UID != "u1" {
		t.Errorf("owner references %v", w.Deployment.OwnerReferences)
	}
	lim := w.Deployment.Spec.Template.Spec.Containers[0].Resources.Limits
	if q := (*lim)["memory"]; q.String() != "512Mi" {
		t.Errorf("memory limit %s", q.String())
	}
	// The address a console endpoint publishes, as in the static
	// Deployments.
	env := w.Deployment.Spec.Template.Spec.Containers[0].Env
	if len(env) != 1 || *env[0].Name != "POD_IP" || *env[0].ValueFrom.FieldRef.FieldPath != "status.podIP" {
		t.Errorf("env %+v, want POD_IP from status.podIP", env)
	}
	// A writable temporary directory on the read-only root.
	spec := w.Deployment.Spec.Template.Spec
	if m := spec.Containers[0].VolumeMounts; len(m) != 1 || *m[0].MountPath != "/tmp" || len(spec.Volumes) != 1 ||
		*spec.Volumes[0].Name != *m[0].Name || spec.Volumes[0].EmptyDir == nil {
		t.Errorf("volumes %+v mounted %+v, want an emptyDir at /tmp", spec.Volumes, m)
	}
}

func TestShared(t *testing.T) {
	c := class()
	c.Spec.DeploymentStrategy, c.Spec.Replicas = v1alpha1.ProviderDeploymentShared, ptr.To[int32](2)
	a := provider("a", "a-creds", &v1alpha1.CABundleSource{SecretRef: &v1alpha1.KeySelector{Name: "a-ca"}})
	b := provider("b", "shared-creds", nil)
	w := Shared(c, []v1alpha1.Provider{b, a, provider("c", "shared-creds", nil)}, Inputs{})
	if w.Name != "banlieue-provider-vsphere" {
		t.Errorf("name %s", w.Name)
	}
	got := grants(w.Role.Rules)
	for _, want := range []string{"providers list ", "secrets get a-ca,a-creds,shared-creds", "leases update banlieue-provider-vsphere"} {
		if !slices.Contains(got, want) {
			t.Errorf("the Role lacks %q: %q", want, got)
		}
	}
	if args := w.Deployment.Spec.Template.Spec.Containers[0].Args; slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--provider") }) {
		t.Errorf("a shared workload serves one Provider: %q", args)
	}
	if *w.Deployment.Spec.Replicas != 2 {
		t.Errorf("replicas %d", *w.Deployment.Spec.Replicas)
	}
}

func TestNames(t *testing.T) {
	long := strings.Repeat("p", 63)
	if n := Name("vsphere", long); len(n) > maxName || !strings.HasPrefix(n, "banlieue-provider-vsphere-ppp") {
		t.Errorf("Name of a long Provider = %q (%d characters)", n, len(n))
	}
	if Name("vsphere", long) == Name("vsphere", long[:62]) {
		t.Error("two long names shortened to one")
	}
	if sa := ServiceAccountName("vsphere", long); sa != ProviderServiceAccountPrefix+long || len(validation.IsDNS1123Subdomain(sa)) > 0 {
		t.Errorf("ServiceAccountName of a long Provider = %q: want it whole and valid", sa)
	}
	if n := BackendClusterRoleBinding("libvirt"); n != "banlieue-provider-libvirt-workloads" {
		t.Errorf("BackendClusterRoleBinding = %q", n)
	}
}

// TestMetricsService: each workload's metrics Service selects exactly the
// pods its Deployment does (a Service selects by equality, so its selector
// is the Deployment's matchLabels, which the pod template carries), on a
// port named as the static providers' (the one the ServiceMonitor scrapes)
// targeting the container's metrics port; it is ClusterIP, labelled and
// owned as the workload's other objects, and validly named however long
// the Provider's name.
func TestMetricsService(t *testing.T) {
	p := provider("prod", "prod-creds", nil)
	p.UID = "u1"
	shared := class()
	shared.Spec.DeploymentStrategy = v1alpha1.ProviderDeploymentShared
	long := provider(strings.Repeat("p", 63), "creds", nil)
	for name, w := range map[string]Workload{
		"per Provider": ForProvider(class(), &p, Inputs{}),
		"shared":       Shared(shared, []v1alpha1.Provider{p}, Inputs{}),
		"long name":    ForProvider(class(), &long, Inputs{}),
	} {
		t.Run(name, func(t *testing.T) {
			svc, d := w.Service, w.Deployment
			if *svc.Name != w.Name+"-metrics" || *svc.Namespace != w.Namespace || len(validation.IsDNS1035Label(*svc.Name)) > 0 {
				t.Errorf("Service %s/%s for workload %s/%s: want %s-metrics, a DNS-1035 label", *svc.Namespace, *svc.Name, w.Namespace, w.Name, w.Name)
			}
			if sel := svc.Spec.Selector; !maps.Equal(sel, d.Spec.Selector.MatchLabels) || len(sel) == 0 {
				t.Errorf("Service selector %v, want the Deployment's %v", sel, d.Spec.Selector.MatchLabels)
			}
			for k, v := range svc.Spec.Selector {
				if d.Spec.Template.Labels[k] != v {
					t.Errorf("the pods are not labelled %s=%s (%v): the Service selects none", k, v, d.Spec.Template.Labels)
				}
			}
			if *svc.Spec.Type != corev1.ServiceTypeClusterIP || len(svc.Spec.ExternalIPs) > 0 {
				t.Errorf("Service type %s, external IPs %v: want ClusterIP only", *svc.Spec.Type, svc.Spec.ExternalIPs)
			}
			if len(svc.Spec.Ports) != 1 {
				t.Fatalf("Service ports %v, want the metrics port only", svc.Spec.Ports)
			}
			port := svc.Spec.Ports[0]
			if *port.Name != "https-metrics" || *port.Port != MetricsPort || port.TargetPort.String() != "metrics" {
				t.Errorf("Service port %s %d -> %s, want https-metrics %d -> metrics", *port.Name, *port.Port, port.TargetPort.String(), MetricsPort)
			}
			if !slices.ContainsFunc(d.Spec.Template.Spec.Containers[0].Ports, func(cp corev1ac.ContainerPortApplyConfiguration) bool {
				return *cp.Name == port.TargetPort.String() && *cp.ContainerPort == MetricsPort
			}) {
				t.Errorf("no container port %q on %d: %v", port.TargetPort.String(), MetricsPort, d.Spec.Template.Spec.Containers[0].Ports)
			}
			if !maps.Equal(svc.Labels, d.Labels) || svc.Labels["app.kubernetes.io/name"] != "banlieue" ||
				svc.Labels["app.kubernetes.io/component"] != "provider-vsphere" || svc.Labels[ManagedByLabel] != FieldManager {
				t.Errorf("Service labels %v, want the Deployment's %v", svc.Labels, d.Labels)
			}
			if !slices.EqualFunc(svc.OwnerReferences, d.OwnerReferences, func(a, b metav1ac.OwnerReferenceApplyConfiguration) bool {
				return *a.Kind == *b.Kind && *a.Name == *b.Name && *a.UID == *b.UID && ptr.Deref(a.Controller, false) == ptr.Deref(b.Controller, false)
			}) || len(svc.OwnerReferences) != 1 {
				t.Errorf("Service owners %v, want the Deployment's", svc.OwnerReferences)
			}
		})
	}
}

// TestSubjects: one subject per per-Provider workload, one per shared
// workload however many Providers it serves, sorted, in each class's
// namespace.
func TestSubjects(t *testing.T) {
	per := class()
	shared := class()
	shared.Name, shared.Spec.DeploymentStrategy, shared.Spec.Namespace = "vsphere-shared", v1alpha1.ProviderDeploymentShared, "infra"
	got := Subjects([]Served{{per, "b"}, {shared, "x"}, {per, "a"}, {shared, "y"}, {per, "a"}})
	want := []rbacv1.Subject{
		{Kind: "ServiceAccount", Name: "banlieue-provider.a", Namespace: "banlieue-system"},
		{Kind: "ServiceAccount", Name: "banlieue-provider.b", Namespace: "banlieue-system"},
		{Kind: "ServiceAccount", Name: "banlieue-provider-vsphere-shared", Namespace: "infra"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("Subjects = %v, want %v", got, want)
	}
	if got := Subjects(nil); len(got) != 0 {
		t.Errorf("Subjects of nothing = %v", got)
	}
}

// TestCloudConfigs: the cloud configs of the images with a source for the
// class, once each, sorted; none of another class's images.
func TestCloudConfigs(t *testing.T) {
	img := func(classes []string, ccs ...string) v1alpha1.VMImage {
		var i v1alpha1.VMImage
		for _, c := range classes {
			i.Spec.Sources = append(i.Spec.Sources, v1alpha1.ImageSource{ProviderClass: c})
		}
		for _, cc := range ccs {
			i.Spec.CloudConfigs = append(i.Spec.CloudConfigs, v1alpha1.CloudConfigSource{SecretRef: v1alpha1.LocalObjectReference{Name: cc}})
		}
		return i
	}
	got := CloudConfigs("vsphere", []v1alpha1.VMImage{
		img([]string{"vsphere", "libvirt"}, "z", "a"), img([]string{"libvirt"}, "libvirt-only"), img([]string{"vsphere"}, "a", "m"),
	})
	if want := []string{"a", "m", "z"}; !slices.Equal(got, want) {
		t.Errorf("CloudConfigs = %v, want %v", got, want)
	}
}
