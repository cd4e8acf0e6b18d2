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
package vsphere

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/artifacts"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/operator"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/metricstest"
	"github.com/firestoned/banlieue/pkg/workload"
)

// opNS is where the operator test's ProviderClass runs workloads: not
// banlieue-system, which this package's static provider serves.
const opNS = "operator-e2e"

// TestOperatorWorkloads: the shipped operator Deployment, run as pods
// (managing namespace operator-e2e), runs per Provider of the vsphere
// ProviderClass a Deployment, its metrics Service, ServiceAccount, Role and
// bindings by server-side apply; the generated identity may read its own
// Provider's credentials and no other's, and list or watch no Secret; hand
// edits are undone; the generated Deployment runs as a pod of the release
// image, with a token of the generated ServiceAccount, reaches vcsim from
// the pod network and makes its Provider Ready (and serves only it); the
// operator records it Available; deleting a Provider removes its
// workload; a Provider whose class does not exist is told so in
// status.workload; its standby replica leads once the leader's pod is
// deleted (standbyTakesOver).
func TestOperatorWorkloads(t *testing.T) {
	ctx := context.Background()
	createNamespace(t, opNS)
	// The operator manages a namespace bound to banlieue-operator-namespace.
	kubectlOut(t, "-n", opNS, "create", "rolebinding", "banlieue-operator", "--clusterrole=banlieue-operator-namespace",
		"--serviceaccount=banlieue-system:banlieue-operator")
	// The release image, which the node has: the workloads run.
	class := &v1alpha1.ProviderClass{ObjectMeta: metav1.ObjectMeta{Name: "vsphere"},
		Spec: v1alpha1.ProviderClassSpec{Backend: "vsphere", Image: devenv.ReleaseImage, Namespace: opNS}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Delete(ctx, class) })
	if *class.Spec.Replicas != 1 || class.Spec.DeploymentStrategy != v1alpha1.ProviderDeploymentPerProvider {
		t.Errorf("ProviderClass defaults: replicas %d, strategy %q", *class.Spec.Replicas, class.Spec.DeploymentStrategy)
	}
	runOperator(t)

	for _, name := range []string{"op-a", "op-b"} {
		secret(t, opNS, name+"-creds", map[string]string{"username": user, "password": password})
		p := provider(name, name+"-creds", nil)
		p.Namespace = opNS
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	a, b := workload.Name("vsphere", "op-a"), workload.Name("vsphere", "op-b")

	t.Run("applied", func(t *testing.T) {
		d := waitDeployment(t, a)
		if !slices.ContainsFunc(d.ManagedFields, func(f metav1.ManagedFieldsEntry) bool {
			return f.Manager == workload.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply
		}) {
			t.Errorf("the Deployment is not applied by %s: %v", workload.FieldManager, d.ManagedFields)
		}
		p := getProvider(t, "op-a")
		if ref := metav1.GetControllerOf(d); ref == nil || ref.UID != p.UID {
			t.Errorf("the Deployment's controller is %v, want Provider op-a", ref)
		}
		for _, obj := range []client.Object{&rbacv1.Role{}, &rbacv1.RoleBinding{}} {
			if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: a}, obj); err != nil {
				t.Errorf("%T %s: %v", obj, a, err)
			}
		}
		// Its metrics Service, for the shipped ServiceMonitor: owned by
		// the Provider, in front of exactly the Deployment's pods.
		svc := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: workload.MetricsServiceName("vsphere", "op-a")}, svc); err != nil {
			t.Errorf("the metrics Service: %v", err)
		} else {
			if ref := metav1.GetControllerOf(svc); ref == nil || ref.UID != p.UID || ref.Kind != "Provider" {
				t.Errorf("the metrics Service's controller is %v, want Provider op-a", ref)
			}
			if !maps.Equal(svc.Spec.Selector, d.Spec.Selector.MatchLabels) || svc.Spec.Type != corev1.ServiceTypeClusterIP {
				t.Errorf("the metrics Service (%s) selects %v, want the Deployment's %v", svc.Spec.Type, svc.Spec.Selector, d.Spec.Selector.MatchLabels)
			}
			if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https-metrics" || svc.Spec.Ports[0].TargetPort.StrVal != "metrics" {
				t.Errorf("the metrics Service's ports %+v, want https-metrics -> metrics", svc.Spec.Ports)
			}
		}
		if sa := workload.ServiceAccountName("vsphere", "op-a"); c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: sa}, &corev1.ServiceAccount{}) != nil ||
			d.Spec.Template.Spec.ServiceAccountName != sa {
			t.Errorf("the workload does not run as ServiceAccount %s", sa)
		}
		// Progressing until its pod is ready, then Available: the pod
		// may be ready already ("the generated workload runs" waits).
		eventually(t, time.Minute, func() error {
			w := getProvider(t, "op-a").Status.Workload
			if w == nil || w.DeploymentName != a || w.Namespace != opNS || (w.Reason != operator.ReasonProgressing && w.Reason != operator.ReasonAvailable) {
				return fmt.Errorf("status.workload = %+v", w)
			}
			return nil
		})
		// The operator's field only: what it applies to the Provider's
		// status is status.workload, never a condition (the workload's
		// own pod may be writing those by now).
		if owned := statusFieldsOf(t, getProvider(t, "op-a"), workload.FieldManager); !slices.Equal(owned, []string{"f:workload"}) {
			t.Errorf("the operator's field manager owns status fields %v, want f:workload only", owned)
		}
	})

	t.Run("grants", func(t *testing.T) {
		waitDeployment(t, b)
		sa := "system:serviceaccount:" + opNS + ":" + workload.ServiceAccountName("vsphere", "op-a")
		for _, q := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "secrets/op-a-creds", "-n", opNS}, "yes"},
			{[]string{"get", "secrets/op-b-creds", "-n", opNS}, "no"},
			{[]string{"list", "secrets", "-n", opNS}, "no"},
			{[]string{"watch", "secrets", "-n", opNS}, "no"},
			{[]string{"list", "secrets", "--all-namespaces"}, "no"},
			{[]string{"get", "secrets/vsphere-creds", "-n", ns}, "no"},
			{[]string{"get", "providers.banlieue.io/op-a", "-n", opNS}, "yes"},
			{[]string{"patch", "providers.banlieue.io/op-a", "--subresource=status", "-n", opNS}, "yes"},
			// Its finalizer, through the subresource that takes nothing
			// else; never the spec naming the Secrets it is granted.
			{[]string{"patch", "providers.banlieue.io/op-a", "--subresource=finalizers", "-n", opNS}, "yes"},
			{[]string{"patch", "providers.banlieue.io/op-a", "-n", opNS}, "no"},
			{[]string{"update", "providers.banlieue.io/op-a", "-n", opNS}, "no"},
			{[]string{"get", "providers.banlieue.io/op-b", "-n", opNS}, "no"},
			{[]string{"patch", "providers.banlieue.io/op-b", "--subresource=status", "-n", opNS}, "no"},
			{[]string{"list", "providers.banlieue.io", "-n", opNS}, "no"},
			{[]string{"patch", "vspheremachines.infrastructure.banlieue.io", "--subresource=status", "-n", "some-tenant"}, "yes"},
			{[]string{"patch", "libvirtmachines.infrastructure.banlieue.io", "--subresource=status", "-n", "some-tenant"}, "no"},
			{[]string{"create", "pods", "-n", opNS}, "no"},
		} {
			args := append([]string{"auth", "can-i", "--as=" + sa, "--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + opNS}, q.args...)
			if got := strings.TrimSpace(kubectlAnswer(t, args...)); got != q.want {
				t.Errorf("%s: can-i %s = %s, want %s", a, strings.Join(q.args, " "), got, q.want)
			}
		}
		// The operator grants in namespaces what it holds (no escalate);
		// cluster-wide it binds its backends' shipped roles only, and
		// touches no RBAC it did not make.
		for _, q := range []struct {
			args []string
			want string
		}{
			{[]string{"escalate", "clusterroles"}, "no"}, {[]string{"bind", "clusterroles"}, "no"},
			{[]string{"escalate", "roles", "-n", opNS}, "no"}, {[]string{"bind", "roles", "-n", opNS}, "no"},
			{[]string{"list", "secrets", "-n", opNS}, "no"}, {[]string{"list", "secrets", "--all-namespaces"}, "no"},
			{[]string{"bind", "clusterroles/cluster-admin"}, "no"},
			{[]string{"bind", "clusterroles/" + workload.BackendClusterRole("vsphere")}, "yes"},
			{[]string{"create", "clusterrolebindings"}, "no"},
			{[]string{"delete", "clusterrolebindings/cluster-admin"}, "no"},
			{[]string{"update", "clusterrolebindings/cluster-admin"}, "no"},
			{[]string{"update", "clusterroles/admin"}, "no"},
			{[]string{"delete", "clusterroles/edit"}, "no"},
			{[]string{"create", "clusterroles"}, "no"},
			{[]string{"update", "clusterrolebindings/" + workload.BackendClusterRoleBinding("vsphere")}, "yes"},
			{[]string{"patch", "providers.banlieue.io", "-n", opNS}, "no"},
			{[]string{"patch", "providers.banlieue.io", "--subresource=finalizers", "-n", opNS}, "yes"},
			// Its workloads' metrics Services, where it runs workloads.
			{[]string{"create", "services", "-n", opNS}, "yes"},
			{[]string{"delete", "services", "-n", opNS}, "yes"},
			{[]string{"create", "services", "-n", "some-tenant"}, "no"},
			{[]string{"delete", "services", "-n", "some-tenant"}, "no"},
		} {
			args := append([]string{"auth", "can-i", "--as=" + devenv.OperatorUser, "--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + ns}, q.args...)
			if got := strings.TrimSpace(kubectlAnswer(t, args...)); got != q.want {
				t.Errorf("the operator: can-i %s = %s, want %s", strings.Join(q.args, " "), got, q.want)
			}
		}
	})

	t.Run("no identity widens its grants", func(t *testing.T) {
		// The workload's identity asks to rename the Secret its Role
		// grants: RBAC refuses the Provider write outright...
		sa := "system:serviceaccount:" + opNS + ":" + workload.ServiceAccountName("vsphere", "op-a")
		_, errOut, err := kubectlAs(t, sa, "-n", opNS, "patch", "provider", "op-a", "--dry-run=server", "--type=merge",
			"-p", `{"spec":{"connection":{"credentialsRef":{"name":"vsphere-creds"}}}}`)
		if err == nil || !strings.Contains(errOut, "forbidden") {
			t.Errorf("the workload patched its Provider's credentialsRef (err %v): %s", err, errOut)
		}
		// ...and /finalizers keeps everything but the finalizers.
		asSA := *env.Admin
		asSA.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + opNS, "system:authenticated"}}
		saClient, err := client.New(&asSA, client.Options{Scheme: c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		p := getProvider(t, "op-a")
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.Connection.CredentialsRef.Name = "vsphere-creds"
		p.Labels = map[string]string{"smuggled": "yes"}
		p.Finalizers = append(p.Finalizers, "example.com/test")
		if err := saClient.SubResource("finalizers").Patch(ctx, p, patch); err != nil {
			t.Fatalf("patching /finalizers as the workload: %v", err)
		}
		got := getProvider(t, "op-a")
		if got.Spec.Connection.CredentialsRef.Name != "op-a-creds" || got.Labels["smuggled"] != "" || !slices.Contains(got.Finalizers, "example.com/test") {
			t.Errorf("after /finalizers: credentialsRef %q, labels %v, finalizers %v (want op-a-creds, no smuggled label, example.com/test)",
				got.Spec.Connection.CredentialsRef.Name, got.Labels, got.Finalizers)
		}
		patch = client.MergeFrom(got.DeepCopy())
		got.Finalizers = slices.DeleteFunc(got.Finalizers, func(f string) bool { return f == "example.com/test" })
		if err := saClient.SubResource("finalizers").Patch(ctx, got, patch); err != nil {
			t.Fatal(err)
		}
		// The operator, though its Role lets it delete RoleBindings in
		// the namespace, may delete only those it made.
		_, errOut, err = kubectlAs(t, devenv.OperatorUser, "-n", ns, "delete", "rolebinding", "banlieue-provider-vsphere", "--dry-run=server")
		if err == nil || !strings.Contains(errOut, "only the objects it made") {
			t.Errorf("the operator deleted the static install's RoleBinding (err %v): %s", err, errOut)
		}
		// Nor the install's Services, which its Role lets it write too...
		if err := devenv.ApplyFiles(ctx, env.Admin, artifacts.Deploy, "deploy/providers/vsphere/service.yaml"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			c.Delete(context.Background(), &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "banlieue-provider-vsphere-metrics"}})
		})
		_, errOut, err = kubectlAs(t, devenv.OperatorUser, "-n", ns, "delete", "service", "banlieue-provider-vsphere-metrics", "--dry-run=server")
		if err == nil || !strings.Contains(errOut, "only the objects it made") {
			t.Errorf("the operator deleted the static install's metrics Service (err %v): %s", err, errOut)
		}
		// ...and what it makes stays inside the cluster: no NodePort,
		// LoadBalancer or external IP, though labelled as its own.
		for _, spec := range []string{`"type":"NodePort"`, `"type":"LoadBalancer"`, `"externalIPs":["192.0.2.1"]`} {
			manifest := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"op-exposed","labels":{"` + workload.ManagedByLabel + `":"` + workload.FieldManager +
				`"}},"spec":{` + spec + `,"ports":[{"port":8443}]}}`
			cmd := exec.Command(kubectlBin, "--kubeconfig="+env.AdminKubeconfig, "--as="+devenv.OperatorUser, "--as-group=system:serviceaccounts",
				"--as-group=system:serviceaccounts:"+ns, "--as-group=system:authenticated", "-n", opNS, "create", "--dry-run=server", "-f", "-")
			cmd.Stdin = strings.NewReader(manifest)
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "must be of type ClusterIP") {
				t.Errorf("the operator created a Service with %s (err %v): %s", spec, err, out)
			}
		}
	})

	t.Run("hand edits undone", func(t *testing.T) {
		kubectlOut(t, "-n", opNS, "scale", "deployment/"+a, "--replicas=3")
		kubectlOut(t, "-n", opNS, "patch", "role", a, "--type=json", `-p=[{"op":"replace","path":"/rules","value":[]}]`)
		eventually(t, time.Minute, func() error {
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: a}, d); err != nil {
				return err
			}
			role := &rbacv1.Role{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: a}, role); err != nil {
				return err
			}
			if *d.Spec.Replicas != 1 || !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.ResourceNames, "op-a-creds") }) {
				return fmt.Errorf("replicas %d, role rules %v", *d.Spec.Replicas, role.Rules)
			}
			return nil
		})
	})

	// The workload runs on until its Provider's deletion: its finalizer
	// cleans up there.
	t.Run("the generated workload runs", func(t *testing.T) {
		d := waitDeployment(t, a)
		if err := env.RolloutStatus(ctx, opNS, a, 2*time.Minute); err != nil {
			t.Fatal(err)
		}
		eventually(t, 90*time.Second, func() error {
			cond := meta.FindStatusCondition(getProvider(t, "op-a").Status.Conditions, v1alpha1.ProviderReady)
			if cond == nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("op-a Ready = %+v", cond)
			}
			return nil
		})
		// The provider's status writes keep the operator's field, which
		// records the pod ready.
		eventually(t, time.Minute, func() error {
			if w := getProvider(t, "op-a").Status.Workload; w == nil || w.DeploymentName != a || w.Reason != operator.ReasonAvailable || w.ReadyReplicas != 1 {
				return fmt.Errorf("status.workload after the provider wrote its status: %+v", w)
			}
			return nil
		})
		if got := len(getProvider(t, "op-a").Status.FailureDomains); got != 6 {
			t.Errorf("op-a has %d failure domains, want vcsim's 6", got)
		}
		pod := workloadPod(t, d)
		// It runs with a token of the generated ServiceAccount.
		sa := "system:serviceaccount:" + opNS + ":" + workload.ServiceAccountName("vsphere", "op-a")
		if who := podIdentity(t, ctx, pod); who != sa {
			t.Errorf("the workload pod %s is %q to kube-apiserver, want %s", pod.Name, who, sa)
		}
		// The workload serves op-a only: it holds one vCenter session, op-a's
		// (one per Provider served); op-b's is its own workload's.
		if n := vsphereSessions(t, pod); n != 1 {
			t.Errorf("the workload of op-a holds %v vCenter sessions, want 1 (op-a's)", n)
		}
		if lines, err := reconcileErrors("workload-"+a+"-*", "forbidden"); err != nil || len(lines) > 0 {
			t.Errorf("the workload was refused something (%v): %q", err, lines)
		}
	})

	// RBAC grants a workload its backend's machines everywhere; the
	// shipped admission policy keeps a per-Provider one to its Provider's.
	t.Run("writes only its own Provider's machines", func(t *testing.T) {
		sa := "system:serviceaccount:" + opNS + ":" + workload.ServiceAccountName("vsphere", "op-a")
		markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
		ensureImage(t, "ubuntu-22.04-cloudinit")
		own := tenantMachine(opNS, "own-a", opNS+"/op-a", nil)
		other := tenantMachine(opNS, "of-b", opNS+"/op-b", nil)
		found := tenantMachine(opNS, "found-by-domain", "", func(m *infrav1.VSphereMachine) {
			delete(m.Annotations, infrav1.ProviderAnnotation)
			for _, fd := range getProvider(t, "op-a").Status.FailureDomains {
				if fd.Datacenter == m.Spec.Datacenter && fd.Cluster == m.Spec.Cluster && fd.Host == "" {
					m.Spec.FailureDomain = fd.Name
				}
			}
		})
		for _, m := range []*infrav1.VSphereMachine{own, other, found} {
			if err := c.Create(ctx, m); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { c.Delete(context.Background(), m) })
		}
		// The workload builds its own, and takes the Cluster API-style
		// machine of its failure domain by naming its Provider on it.
		for _, name := range []string{"own-a", "found-by-domain"} {
			waitMachineIn(t, opNS, name, "PoweredOn")
		}
		if got := getMachineIn(t, opNS, "found-by-domain").Annotations[infrav1.ProviderAnnotation]; got != opNS+"/op-a" {
			t.Errorf("the machine found by failure domain is annotated %q, want %s/op-a", got, opNS)
		}
		for _, q := range []struct {
			name, patch, refused string // refused: "" when allowed
		}{
			{"own-a", `{"metadata":{"labels":{"touched":"yes"}}}`, ""},
			{"of-b", `{"metadata":{"labels":{"touched":"yes"}}}`, "may change only its own Provider's machines"},
			{"of-b", `{"metadata":{"annotations":{"banlieue.io/provider":"` + opNS + `/op-a"}}}`, "may change only its own Provider's machines"},
			{"own-a", `{"metadata":{"annotations":{"banlieue.io/provider":"` + opNS + `/op-b"}}}`, "must be annotated banlieue.io/provider=" + opNS + "/op-a"},
		} {
			_, errOut, err := kubectlAs(t, sa, "-n", opNS, "patch", "vspheremachine", q.name, "--dry-run=server", "--type=merge", "-p", q.patch)
			switch {
			case q.refused == "" && err != nil:
				t.Errorf("the workload could not patch %s with %s: %s", q.name, q.patch, errOut)
			case q.refused != "" && (err == nil || !strings.Contains(errOut, q.refused)):
				t.Errorf("patching %s with %s as the workload: err %v, %q; want refused with %q", q.name, q.patch, err, errOut, q.refused)
			}
		}
		asSA := *env.Admin
		asSA.Impersonate = rest.ImpersonationConfig{UserName: sa, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + opNS, "system:authenticated"}}
		saClient, err := client.New(&asSA, client.Options{Scheme: c.Scheme()})
		if err != nil {
			t.Fatal(err)
		}
		m := getMachineIn(t, opNS, "of-b")
		patch := client.MergeFrom(m.DeepCopy())
		m.Status.FailureDomain = "elsewhere"
		if err := saClient.Status().Patch(ctx, m, patch, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "may change only its own Provider's machines") {
			t.Errorf("the workload wrote another Provider's machine's status: %v", err)
		}
		for _, m := range []*infrav1.VSphereMachine{own, other, found} {
			if err := c.Delete(ctx, m); client.IgnoreNotFound(err) != nil {
				t.Fatal(err)
			}
		}
		eventually(t, time.Minute, func() error {
			var list infrav1.VSphereMachineList
			if err := c.List(ctx, &list, client.InNamespace(opNS)); err != nil {
				return err
			}
			if len(list.Items) > 0 {
				return fmt.Errorf("%d machines are not gone, the first %s", len(list.Items), list.Items[0].Name)
			}
			return nil
		})
	})

	t.Run("missing class", func(t *testing.T) {
		p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "op-c", Namespace: opNS},
			Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"},
				Connection: v1alpha1.ProviderConnection{Endpoint: "qemu+unix:///system?socket=/run/none"}}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			w := getProvider(t, "op-c").Status.Workload
			if w == nil || w.Reason != operator.ReasonProviderClassNotFound || !strings.Contains(w.Message, `"libvirt"`) {
				return fmt.Errorf("status.workload = %+v", w)
			}
			return nil
		})
		c.Delete(ctx, p)
	})

	t.Run("deleting a Provider removes its workload", func(t *testing.T) {
		for _, name := range []string{"op-b", "op-a"} {
			if err := c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: name}}); err != nil {
				t.Fatal(err)
			}
			w := workload.Name("vsphere", name)
			eventually(t, time.Minute, func() error {
				for _, obj := range []client.Object{&v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: name}}, &appsv1.Deployment{}, &corev1.ServiceAccount{}, &rbacv1.Role{}, &rbacv1.RoleBinding{}, &corev1.Service{}} {
					key := client.ObjectKey{Namespace: opNS, Name: w}
					switch obj.(type) {
					case *v1alpha1.Provider:
						key.Name = name
					case *corev1.ServiceAccount:
						key.Name = workload.ServiceAccountName("vsphere", name)
					case *corev1.Service:
						key.Name = workload.MetricsServiceName("vsphere", name)
					}
					if err := c.Get(ctx, key, obj); !apierrors.IsNotFound(err) {
						return fmt.Errorf("%T %s still there (%v)", obj, key.Name, err)
					}
				}
				crb := &rbacv1.ClusterRoleBinding{}
				if err := c.Get(ctx, client.ObjectKey{Name: workload.BackendClusterRoleBinding("vsphere")}, crb); err != nil {
					return err
				}
				if slices.ContainsFunc(crb.Subjects, func(s rbacv1.Subject) bool { return s.Name == w && s.Namespace == opNS }) {
					return fmt.Errorf("%s is still a subject of %s", w, crb.Name)
				}
				return nil
			})
		}
	})

	t.Run("changing strategy", func(t *testing.T) {
		for _, name := range []string{"op-e", "op-f"} {
			secret(t, opNS, name+"-creds", map[string]string{"username": user, "password": password})
			p := provider(name, name+"-creds", nil)
			p.Namespace = opNS
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			waitDeployment(t, workload.Name("vsphere", name))
		}
		setStrategy(t, v1alpha1.ProviderDeploymentShared)
		shared := workload.Name("vsphere", "")
		eventually(t, time.Minute, func() error {
			role := &rbacv1.Role{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: shared}, role); err != nil {
				return err
			}
			if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
				return slices.Equal(r.ResourceNames, []string{"op-e-creds", "op-f-creds"})
			}) {
				return fmt.Errorf("the shared Role grants %v", role.Rules)
			}
			for _, name := range []string{"op-e", "op-f"} {
				if w := getProvider(t, name).Status.Workload; w == nil || w.DeploymentName != shared {
					return fmt.Errorf("%s: status.workload %+v", name, w)
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: workload.Name("vsphere", name)}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s's own Deployment is still there (%v)", name, err)
				}
				if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: workload.MetricsServiceName("vsphere", name)}, &corev1.Service{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("%s's own metrics Service is still there (%v)", name, err)
				}
			}
			svc := &corev1.Service{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: workload.MetricsServiceName("vsphere", "")}, svc); err != nil {
				return fmt.Errorf("the shared metrics Service: %w", err)
			}
			if _, perProvider := svc.Spec.Selector[workload.ProviderLabel]; perProvider {
				return fmt.Errorf("the shared metrics Service selects %v", svc.Spec.Selector)
			}
			crb := &rbacv1.ClusterRoleBinding{}
			if err := c.Get(ctx, client.ObjectKey{Name: workload.BackendClusterRoleBinding("vsphere")}, crb); err != nil {
				return err
			}
			if !slices.ContainsFunc(crb.Subjects, func(s rbacv1.Subject) bool { return s.Name == shared && s.Namespace == opNS }) {
				return fmt.Errorf("%s is not a subject of %s: %v", shared, crb.Name, crb.Subjects)
			}
			return nil
		})
		// The shared identity: both Providers' credentials, by name, and no
		// more; no write of either spec.
		sa := "system:serviceaccount:" + opNS + ":" + shared
		for _, q := range []struct {
			args []string
			want string
		}{
			{[]string{"get", "secrets/op-e-creds", "-n", opNS}, "yes"},
			{[]string{"get", "secrets/op-f-creds", "-n", opNS}, "yes"},
			{[]string{"get", "secrets/vsphere-creds", "-n", ns}, "no"},
			{[]string{"list", "secrets", "-n", opNS}, "no"},
			{[]string{"patch", "providers.banlieue.io/op-e", "-n", opNS}, "no"},
			{[]string{"patch", "providers.banlieue.io/op-e", "--subresource=finalizers", "-n", opNS}, "yes"},
			{[]string{"patch", "libvirtmachines.infrastructure.banlieue.io", "--subresource=status", "-n", "some-tenant"}, "no"},
			{[]string{"delete", "clusterrolebindings/cluster-admin"}, "no"},
		} {
			args := append([]string{"auth", "can-i", "--as=" + sa, "--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:" + opNS}, q.args...)
			if got := strings.TrimSpace(kubectlAnswer(t, args...)); got != q.want {
				t.Errorf("%s: can-i %s = %s, want %s", shared, strings.Join(q.args, " "), got, q.want)
			}
		}
		setStrategy(t, v1alpha1.ProviderDeploymentPerProvider)
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: shared}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("the shared Deployment is still there (%v)", err)
			}
			for _, name := range []string{"op-e", "op-f"} {
				if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: workload.Name("vsphere", name)}, &appsv1.Deployment{}); err != nil {
					return err
				}
			}
			return nil
		})
		for _, name := range []string{"op-e", "op-f"} {
			if err := c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: opNS, Name: name}}); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, func() error {
				if err := c.Get(ctx, client.ObjectKey{Namespace: opNS, Name: name}, &v1alpha1.Provider{}); !apierrors.IsNotFound(err) {
					return fmt.Errorf("Provider %s still there (%v)", name, err)
				}
				return nil
			})
		}
	})

	// A drain or a rolling update of the operator: its standby carries on.
	t.Run("a standby takes over", func(t *testing.T) { standbyTakesOver(t, "banlieue-operator") })
}

// setStrategy changes the vsphere ProviderClass's deployment strategy.
func setStrategy(t *testing.T, s v1alpha1.ProviderDeploymentStrategy) {
	t.Helper()
	class := &v1alpha1.ProviderClass{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: "vsphere"}, class); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(class.DeepCopy())
	class.Spec.DeploymentStrategy = s
	if err := c.Patch(context.Background(), class, patch); err != nil {
		t.Fatal(err)
	}
}

func getProvider(t *testing.T, name string) *v1alpha1.Provider {
	t.Helper()
	p := &v1alpha1.Provider{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: opNS, Name: name}, p); err != nil {
		t.Fatal(err)
	}
	return p
}

func waitDeployment(t *testing.T, name string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	eventually(t, time.Minute, func() error { return c.Get(context.Background(), client.ObjectKey{Namespace: opNS, Name: name}, d) })
	if d.Spec.Replicas == nil {
		d.Spec.Replicas = ptr.To[int32](1)
	}
	return d
}

// kubectlOut runs kubectl as the administrator and fails the test on error.
func kubectlOut(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig=" + env.AdminKubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// kubectlAnswer is stdout of a kubectl command whose exit code is its answer
// (auth can-i exits 1 on "no").
func kubectlAnswer(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig=" + env.AdminKubeconfig}, args...)...).Output()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// kubectlAs runs kubectl as a ServiceAccount user (with its groups) and
// returns its stdout, stderr and error.
// getMachineIn reads the VSphereMachine namespace/name.
func getMachineIn(t *testing.T, namespace, name string) *infrav1.VSphereMachine {
	t.Helper()
	m := &infrav1.VSphereMachine{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, m); err != nil {
		t.Fatal(err)
	}
	return m
}

func kubectlAs(t *testing.T, user string, args ...string) (string, string, error) {
	t.Helper()
	saNamespace := strings.Split(user, ":")[2]
	all := append([]string{"--kubeconfig=" + env.AdminKubeconfig, "--as=" + user, "--as-group=system:serviceaccounts",
		"--as-group=system:serviceaccounts:" + saNamespace, "--as-group=system:authenticated"}, args...)
	var stdout, stderr strings.Builder
	cmd := exec.Command(kubectlBin, all...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// operatorPatch is the administrator's edit of the shipped operator
// Deployment: it manages namespace operator-e2e (the ProviderClass's), not
// banlieue-system, whose Providers the static provider serves. The test
// op fails the patch if the shipped args change.
const operatorPatch = `[
  {"op":"test","path":"/spec/template/spec/containers/0/args/3","value":"--namespaces=banlieue-system"},
  {"op":"replace","path":"/spec/template/spec/containers/0/args/3","value":"--namespaces=` + opNS + `"}
]`

// runOperator runs the shipped operator Deployment (operatorPatch) until
// the test ends, and copies its pods' logs and its workloads' (operator-*,
// workload-*) from then on.
func runOperator(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := env.ApplyPatched(filepath.Join(root, "artifacts", "deploy", "operator", "deployment.yaml"), "json", operatorPatch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := env.Kubectl("", "-n", ns, "delete", "deployment", "banlieue-operator", "--wait=true", "--timeout=60s"); err != nil {
			t.Errorf("deleting the operator: %v: %s", err, out)
		}
	})
	if err := env.FollowLogs(ns, "app.kubernetes.io/name=banlieue,app.kubernetes.io/component=operator", "operator"); err != nil {
		t.Fatal(err)
	}
	if err := env.FollowLogs(opNS, workload.ClassLabel+"=vsphere", "workload"); err != nil {
		t.Fatal(err)
	}
	if err := env.RolloutStatus(ctx, ns, "banlieue-operator", 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// statusFieldsOf lists the top-level status fields manager owns on p
// through the status subresource (its managedFields), sorted.
func statusFieldsOf(t *testing.T, p *v1alpha1.Provider, manager string) []string {
	t.Helper()
	var out []string
	for _, f := range p.ManagedFields {
		if f.Manager != manager || f.Subresource != "status" || f.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		if err := json.Unmarshal(f.FieldsV1.Raw, &fields); err != nil {
			t.Fatal(err)
		}
		out = append(out, slices.Collect(maps.Keys(fields.Status))...)
	}
	slices.Sort(out)
	return out
}

// workloadPod is the ready pod of the workload Deployment d.
func workloadPod(t *testing.T, d *appsv1.Deployment) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, time.Minute, func() error {
		pods := &corev1.PodList{}
		if err := c.List(context.Background(), pods, client.InNamespace(opNS), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return err
		}
		for i := range pods.Items {
			if p := &pods.Items[i]; p.DeletionTimestamp == nil && devenv.PodReady(p) {
				pod = p
				return nil
			}
		}
		return fmt.Errorf("no ready pod of %s among %d", d.Name, len(pods.Items))
	})
	return pod
}

// podIdentity is who kube-apiserver takes pod's projected token for.
func podIdentity(t *testing.T, ctx context.Context, pod *corev1.Pod) string {
	t.Helper()
	token, err := env.PodToken(pod)
	if err != nil {
		t.Fatal(err)
	}
	cs, err := env.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	who, err := devenv.WhoAmI(ctx, cs)
	if err != nil {
		t.Fatal(err)
	}
	return who
}

// vsphereSessions reads, at the workload pod's metrics port, how many
// vCenter sessions it holds (banlieue_provider_sessions), as a scraper
// bound to the shipped banlieue-metrics-reader does.
func vsphereSessions(t *testing.T, pod *corev1.Pod) float64 {
	t.Helper()
	token, remove, err := env.MetricsReaderToken(opNS, "scraper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	url := "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(workload.MetricsPort)) + "/metrics"
	families, err := metricstest.Scrape(url, token)
	if err != nil {
		t.Fatal(err)
	}
	n, ok := families.Value("banlieue_provider_sessions", map[string]string{"backend": "vsphere"})
	if !ok {
		t.Fatalf("%s serves no banlieue_provider_sessions{backend=\"vsphere\"}", url)
	}
	return n
}
