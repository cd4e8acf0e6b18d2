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
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/console"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/metricstest"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
	"github.com/firestoned/banlieue/test/monitoring/promcheck"
)

const ns = devenv.Namespace

var (
	root       string
	env        *devenv.Env
	sim        *pvesim.Simulator
	c          client.Client
	kubectlBin string
	// The metrics endpoints of the controller and the Proxmox provider
	// (HTTPS, authenticated as in a cluster).
	controllerMetrics, providerMetrics string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

// run starts the control plane, the controller and the Proxmox provider
// against the in-repo simulator (the fastest backend to run for real),
// each serving its metrics as its Deployment does.
func run(m *testing.M) int {
	root, _ = filepath.Abs(filepath.Join("..", ".."))
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	sim = pvesim.New(pvesim.Options{TaskDelay: 100 * time.Millisecond, AgentDelay: 500 * time.Millisecond, ACL: dev.ProxmoxACL(),
		Version: dev.ProxmoxVersion, Nodes: dev.ProxmoxNodes()})
	defer sim.Close()
	dir, err := os.MkdirTemp("", "banlieue-monitoring-")
	if err != nil {
		panic(err)
	}
	env, err = devenv.Start(context.Background(), devenv.Config{Dir: dir, BinDir: filepath.Join(root, "bin"), Setup: dev.InstallRBAC})
	if err != nil {
		fmt.Fprintf(os.Stderr, "monitoring: environment: %v (logs in %s)\n", err, filepath.Join(dir, "logs"))
		return 1
	}
	defer env.Stop()
	ports, err := loopback.FreePorts(2)
	if err != nil {
		panic(err)
	}
	controllerMetrics = "https://127.0.0.1:" + strconv.Itoa(ports[0]) + "/metrics"
	providerMetrics = "https://127.0.0.1:" + strconv.Itoa(ports[1]) + "/metrics"
	if _, err := env.StartController(0, "--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[0])); err != nil {
		fmt.Fprintf(os.Stderr, "monitoring: controller: %v\n", err)
		return 1
	}
	if _, err := env.StartProvider("proxmox", "provider-proxmox", 2*time.Second, "--task-poll=50ms",
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(ports[1])); err != nil {
		fmt.Fprintf(os.Stderr, "monitoring: provider: %v\n", err)
		return 1
	}
	if c, err = env.ServedClient(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "monitoring: %v\n", err)
		return 1
	}
	code := m.Run()
	if code != 0 {
		fmt.Fprintf(os.Stderr, "monitoring: logs in %s\n", filepath.Join(dir, "logs"))
		return code
	}
	_ = os.RemoveAll(dir)
	return 0
}

// TestArtifactsQueryExportedMetrics drives the running binaries until
// every series the artifacts read exists — a VM Ready on a Provider, a VM
// whose class does not exist, a Provider whose token the simulator
// refuses (failed logins), a VM whose clone the simulator fails (backend
// call errors), an image imported by URL, a
// reconnect after the Secret changed, a console attach refused — then
// scrapes the controller and the provider as a Prometheus holding
// banlieue-metrics-reader would, and checks every alert rule, dashboard
// target and dashboard variable against what they export: a metric or
// label read and not exported fails, naming the rule or panel.
func TestArtifactsQueryExportedMetrics(t *testing.T) {
	ctx := context.Background()
	rules, err := promcheck.Rules(filepath.Join(root, "artifacts", "monitoring", "prometheus-rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	dashboard, err := promcheck.ReadDashboard(filepath.Join(root, "artifacts", "monitoring", "dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	queries := append(promcheck.RuleQueries(rules), dashboard.Queries()...)
	token := scraperToken(t)

	// A Ready Provider, and one whose token the simulator refuses.
	good := proxmoxProvider(t, "monitoring-pve", "monitoring-token", sim.Secret, map[string]string{"monitoring": "yes"})
	if err := c.Create(ctx, good); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, proxmoxProvider(t, "monitoring-refused", "monitoring-wrong-token", "not-the-secret", nil)); err != nil {
		t.Fatal(err)
	}
	waitProvider(t, "monitoring-pve", "InventoryWalked")
	waitProvider(t, "monitoring-refused", "ConnectFailed")

	// A VM made Ready on it, and one whose class does not exist.
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "debian-12"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "debian-12-cloud"}}}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "monitoring"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "monitoring"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"monitoring": "yes"}}}}}
	noClass := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-no-class", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "no-such-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"}}}
	for _, o := range []client.Object{img, class, vm, noClass} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitCondition(t, vm, "Ready", metav1.ConditionTrue, "")
	waitCondition(t, noClass, "Scheduled", metav1.ConditionFalse, "ClassNotFound")

	// A backend error: the simulator fails clones from now on, so the
	// next VM's EnsureMachine calls fail (a refused token fails at the
	// login, before any backend call is made).
	sim.FailTasks("qmclone", "clone failed: simulated storage outage")
	t.Cleanup(func() { sim.FailTasks("qmclone", "") })
	cloneFails := vm.DeepCopy()
	cloneFails.ObjectMeta = metav1.ObjectMeta{Name: "monitoring-clone-fails", Namespace: ns}
	if err := c.Create(ctx, cloneFails); err != nil {
		t.Fatal(err)
	}

	// An image imported by URL (the import's bytes and attempts).
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	srv := imagetest.Serve(t, map[string]string{"/guest.qcow2": guest})
	imported := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "monitoring-imported"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: srv.URL("/guest.qcow2"), Checksum: imagetest.Checksum(t, guest),
			Format: v1alpha1.ImageFormatQCOW2, ProviderClasses: []string{"proxmox"}}}}
	if err := c.Create(ctx, imported); err != nil {
		t.Fatal(err)
	}
	waitCondition(t, imported, "Ready", metav1.ConditionTrue, "")

	// The good Provider's Secret changes: its session is replaced, a
	// reconnect.
	secret := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "monitoring-token"}, secret); err != nil {
		t.Fatal(err)
	}
	secret.Annotations = map[string]string{"monitoring.banlieue.io/rotated": time.Now().UTC().Format(time.RFC3339)}
	if err := c.Update(ctx, secret); err != nil {
		t.Fatal(err)
	}

	// A console attach without the API server's token: refused.
	if err := c.Get(ctx, client.ObjectKeyFromObject(good), good); err != nil {
		t.Fatal(err)
	}
	if good.Status.Console == nil {
		t.Fatalf("Provider %s publishes no console endpoint", good.Name)
	}
	attach := good.Status.Console.Endpoint + console.PathPrefix + ns + "/virtualmachines/" + vm.Name + "?provider=" + ns + "/" + good.Name
	if code, body, err := metricstest.Get(attach, ""); err != nil || code < 400 {
		t.Fatalf("an attach without a token: HTTP %d %.200s %v", code, body, err)
	}

	// Until every query reads what is exported: the series follow the
	// reconciles (the reconnect at the next resync).
	var findings []promcheck.Finding
	var scraped metricstest.Families
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		scraped = nil
		for _, url := range []string{controllerMetrics, providerMetrics} {
			f, err := metricstest.Scrape(url, token)
			if err != nil {
				findings = []promcheck.Finding{{Source: url, Detail: err.Error()}}
				return false, nil
			}
			scraped = scraped.Merge(f)
		}
		findings = promcheck.Check(scraped, queries)
		return len(findings) == 0, nil
	}); err != nil {
		for _, f := range findings {
			t.Error(f)
		}
		t.Fatalf("%d queries of %d read what the binaries do not export", len(findings), len(queries))
	}
	t.Logf("%d queries (%d of them rules, the others dashboard targets and variables) read only exported metrics and labels", len(queries), len(promcheck.RuleQueries(rules)))
	// What was driven shows as driven: the values the alerts would see.
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
		for _, m := range scraped.Matching(want.name, want.labels) {
			v, _ := metricstest.Value(m)
			sum += v
		}
		if sum < 1 {
			t.Errorf("%s%v = %v, want >= 1", want.name, want.labels, sum)
		}
	}
}

// scraperToken is a token of a ServiceAccount bound to the shipped
// banlieue-metrics-reader, as Prometheus's in a cluster.
func scraperToken(t *testing.T) string {
	t.Helper()
	kubectl(t, "-n", ns, "create", "serviceaccount", "prometheus")
	kubectl(t, "create", "clusterrolebinding", "monitoring-prometheus", "--clusterrole=banlieue-metrics-reader", "--serviceaccount="+ns+":prometheus")
	return strings.TrimSpace(kubectl(t, "-n", ns, "create", "token", "prometheus"))
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v: %s", args, err, out)
	}
	return string(out)
}

// proxmoxProvider is a Provider of the simulator, its token (with secret)
// in Secret creds, granted to the provider by name.
func proxmoxProvider(t *testing.T, name, creds, secret string, labels map[string]string) *v1alpha1.Provider {
	t.Helper()
	p, err := env.NewProxmoxProvider(context.Background(), c, devenv.ProxmoxProvider{Name: name, Labels: labels,
		Endpoint: sim.URL, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: secret, Secret: creds, Grant: true,
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
