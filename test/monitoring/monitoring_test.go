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
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/console"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/metricstest"
	"github.com/firestoned/banlieue/test/monitoring/promcheck"
)

// TestArtifactsQueryExportedMetrics drives the controller's and the
// provider's pods until every series the artifacts read exists — a VM
// Ready on a Provider, a VM whose class does not exist, a Provider whose
// token the simulator refuses (failed logins), a VM whose clone the
// simulator fails (backend call errors), an image imported by URL, a
// reconnect after the Secret changed, a console attach refused — then
// scrapes every target of the shipped ServiceMonitor as a Prometheus
// holding banlieue-metrics-reader would, merges them as a query reads
// them, and checks every alert rule, dashboard target and dashboard
// variable against what they export: a metric or label read and not
// exported fails, naming the rule or panel. Of the controller's replicas
// only the leader exports banlieue_virtualmachines, so a sum() over the
// targets counts each VM once.
func TestArtifactsQueryExportedMetrics(t *testing.T) {
	rules, err := promcheck.Rules(filepath.Join(root, "artifacts", "monitoring", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := promcheck.ReadDashboard(filepath.Join(root, "artifacts", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries := append(promcheck.RuleQueries(rules), dashboard.Queries()...)

	good, vm := provisionAndFail(t)
	importByURL(t)
	rotateSecret(t, "monitoring-token")
	refusedAttach(t, good, vm)

	scrapes, families := scrapeUntilRead(t, queries)
	t.Logf("%d queries (%d of them rules, the others dashboard targets and variables) read only exported metrics and labels of %d targets",
		len(queries), len(promcheck.RuleQueries(rules)), len(scrapes))
	checkDriven(t, families)
	checkLeaderCountsVMs(t, scrapes)
}

// provisionAndFail makes a Ready Provider and one whose token the
// simulator refuses, a VM Ready on the first, one whose class does not
// exist, and one whose clones the simulator fails; it returns the Ready
// Provider and VM.
func provisionAndFail(t *testing.T) (*v1alpha1.Provider, *v1alpha1.VirtualMachine) {
	t.Helper()
	ctx := context.Background()
	good := proxmoxProvider(t, "monitoring-pve", "monitoring-token", sim.Secret, map[string]string{"monitoring": "yes"})
	create(t, good, proxmoxProvider(t, "monitoring-refused", "monitoring-wrong-token", "not-the-secret", nil))
	waitProvider(t, "monitoring-pve", "InventoryWalked")
	waitProvider(t, "monitoring-refused", "ConnectFailed")

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian-12"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "debian-12-cloud"}}}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "monitoring"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "yes"}}}}}
	noClass := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-no-class", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "no-such-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"}}}
	create(t, img, class, vm, noClass)
	waitCondition(t, vm, "Ready", metav1.ConditionTrue, "")
	waitCondition(t, noClass, "Scheduled", metav1.ConditionFalse, "ClassNotFound")

	// A backend error: the simulator fails clones from now on, so the
	// next VM's EnsureMachine calls fail (a refused token fails at the
	// login, before any backend call is made).
	sim.FailTasks("qmclone", "clone failed: simulated storage outage")
	t.Cleanup(func() { sim.FailTasks("qmclone", "") })
	cloneFails := vm.DeepCopy()
	cloneFails.ObjectMeta = metav1.ObjectMeta{Name: "monitoring-clone-fails", Namespace: ns}
	create(t, cloneFails)
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
		t.Fatal(err)
	}
	return good, vm
}

// importByURL imports an image by URL (the import's bytes and attempts)
// and waits for it to be Ready. The provider's pod fetches it: the
// server's port is exposed to pods.
func importByURL(t *testing.T) {
	t.Helper()
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	srv := imagetest.Serve(t, map[string]string{"/guest.qcow2": guest})
	url, err := env.ExposeURL(srv.URL("/guest.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	imported := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-imported"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: url, Checksum: imagetest.Checksum(t, guest),
			Format: v1alpha1.ImageFormatQCOW2, ProviderClasses: []string{"proxmox"}}}}
	create(t, imported)
	waitCondition(t, imported, "Ready", metav1.ConditionTrue, "")
}

// rotateSecret changes a Provider's Secret: its session is replaced at
// the next resync, a reconnect.
func rotateSecret(t *testing.T, name string) {
	t.Helper()
	ctx := context.Background()
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Annotations = map[string]string{"monitoring.banlieue.io/rotated": time.Now().UTC().Format(time.RFC3339)}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}
}

// refusedAttach attaches to vm's console at the endpoint p publishes (its
// leader pod's address) without the API server's token: refused.
func refusedAttach(t *testing.T, p *v1alpha1.Provider, vm *v1alpha1.VirtualMachine) {
	t.Helper()
	if p.Status.Console == nil {
		t.Fatalf("Provider %s publishes no console endpoint", p.Name)
	}
	attach := p.Status.Console.Endpoint + console.PathPrefix + ns + "/virtualmachines/" + vm.Name + "?provider=" + ns + "/" + p.Name
	if code, body, err := metricstest.Get(attach, ""); err != nil || code < 400 {
		t.Fatalf("an attach without a token: HTTP %d %.200s %v", code, body, err)
	}
}

// scrapeUntilRead scrapes the ServiceMonitor's targets until every query
// reads what they export, merged: the series follow the reconciles (the
// reconnect at the next resync). It returns the last scrapes and their
// merge.
func scrapeUntilRead(t *testing.T, queries []promcheck.Query) ([]scraped, metricstest.Families) {
	t.Helper()
	sm, err := shippedServiceMonitor()
	if err != nil {
		t.Fatal(err)
	}
	var findings []promcheck.Finding
	var scrapes []scraped
	var families metricstest.Families
	if err := wait.PollUntilContextTimeout(context.Background(), 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		if scrapes, err = scrapeAll(ctx, sm); err == nil {
			families, err = merged(scrapes)
		}
		if err != nil {
			findings = []promcheck.Finding{{Source: "ServiceMonitor " + sm.Name, Detail: err.Error()}}
			return false, nil
		}
		findings = promcheck.Check(families, queries)
		return len(findings) == 0, nil
	}); err != nil {
		for _, f := range findings {
			t.Error(f)
		}
		t.Fatalf("%d findings: queries among the %d read what the targets do not export", len(findings), len(queries))
	}
	return scrapes, families
}

// checkDriven: what was driven shows as driven, the values the alerts
// would see.
func checkDriven(t *testing.T, families metricstest.Families) {
	t.Helper()
	for _, want := range []struct {
		name   string
		labels map[string]string
	}{
		{"banlieue_provider_ready", map[string]string{"provider": ns + "/monitoring-refused", "status": "False"}},
		{"banlieue_provider_backend_call_errors_total", map[string]string{"backend": "proxmox", "operation": "EnsureMachine"}},
		{"banlieue_provider_session_logins_total", map[string]string{"backend": "proxmox", "result": "failure"}},
		{"banlieue_provider_session_reconnects_total", map[string]string{"backend": "proxmox"}},
		{"banlieue_console_attaches_total", map[string]string{"result": "refused"}},
		{"banlieue_virtualmachines", map[string]string{"phase": "Unschedulable"}},
		{"banlieue_virtualmachine_ready_seconds", map[string]string{"provider": ns + "/monitoring-pve"}},
	} {
		var sum float64
		for _, m := range families.Matching(want.name, want.labels) {
			v, _ := metricstest.Value(m)
			sum += v
		}
		if sum < 1 {
			t.Errorf("%s%v = %v, want >= 1", want.name, want.labels, sum)
		}
	}
}

// checkLeaderCountsVMs: banlieue_virtualmachines comes from a controller
// pod holding a Lease, and from no other target.
func checkLeaderCountsVMs(t *testing.T, scrapes []scraped) {
	t.Helper()
	leader, err := env.LeadingPod(context.Background(), ns, "app.kubernetes.io/component=controller", "banlieue-controllers", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	var from []string
	for _, s := range scrapes {
		if len(s.Families["banlieue_virtualmachines"].GetMetric()) > 0 {
			from = append(from, s.Pod)
		}
	}
	if len(from) == 0 {
		t.Error("no target exports banlieue_virtualmachines")
	}
	for _, pod := range from {
		if pod != ns+"/"+leader.Name {
			t.Errorf("banlieue_virtualmachines from %v: %s is not the controller's leader %s", from, pod, leader.Name)
		}
	}
}

// create creates each object, failing the test on the first error.
func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := c.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

// proxmoxProvider is a Provider of the simulator, its token (with secret)
// in Secret creds, granted to the provider by name.
func proxmoxProvider(t *testing.T, name, creds, secret string, labels map[string]string) *v1alpha1.Provider {
	t.Helper()
	p, err := env.NewProxmoxProvider(context.Background(), c, devenv.ProxmoxProvider{Name: name, Labels: labels,
		Endpoint: simEndpoint, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: secret, Secret: creds, Grant: true,
		Capabilities: v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitProvider(t *testing.T, name, reason string) {
	t.Helper()
	waitCondition(t, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}, v1alpha1.ProviderReady, "", reason)
}

// waitCondition waits until obj (a Provider, VirtualMachine or VMImage)
// has condition typ with status (any when empty) and reason (any when
// empty).
func waitCondition(t *testing.T, obj client.Object, typ string, status metav1.ConditionStatus, reason string) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		if last = c.Get(ctx, client.ObjectKeyFromObject(obj), obj); last != nil {
			return false, nil
		}
		var conds []metav1.Condition
		switch o := obj.(type) {
		case *v1alpha1.Provider:
			conds = o.Status.Conditions
		case *v1alpha1.VirtualMachine:
			conds = o.Status.Conditions
		case *v1alpha1.VMImage:
			conds = o.Status.Conditions
		default:
			return false, fmt.Errorf("no conditions on %T", obj)
		}
		cond := meta.FindStatusCondition(conds, typ)
		if cond == nil || (status != "" && cond.Status != status) || (reason != "" && cond.Reason != reason) {
			last = fmt.Errorf("%s %s = %+v, want %s %s", obj.GetName(), typ, cond, status, reason)
			return false, nil
		}
		return true, nil
	}); err != nil {
		t.Fatalf("not within 3m: %v", errors.Join(err, last))
	}
}
