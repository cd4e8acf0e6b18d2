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
package main

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// Provisioning is the controllers' and the provider's throughput against
// what the simulator itself can do in the same run.
type Provisioning struct {
	VMs               int     `json:"vms"`
	CreatePerS        float64 `json:"createPerSecond"`
	ScheduledPerS     float64 `json:"scheduledPerSecond"`
	ReadyPerS         float64 `json:"readyPerSecond"`
	VCSimBuildsPerS   float64 `json:"vcsimBuildsPerSecond"`
	SecondsToSchedule float64 `json:"secondsToAllScheduled"`
	SecondsToReady    float64 `json:"secondsToAllReady"`
	// CPUms is each process's CPU milliseconds per VM, creation to Ready.
	CPUms map[string]float64 `json:"cpuMsPerVM"`
	// RequestsPerVM counts the requests per VM by "verb resource" that
	// the controllers and the provider sent (requestMeter).
	RequestsPerVM map[string]float64 `json:"requestsPerVM"`
	// VCenterCallsPerVM counts the provider's calls to the vCenter per VM
	// by SOAP method, as the provider's own metric counts them;
	// VCenterServedPerVM as vcsim counted what it served.
	VCenterCallsPerVM  map[string]float64 `json:"vcenterCallsPerVM"`
	VCenterServedPerVM map[string]float64 `json:"vcenterServedPerVM"`
	// ToReadyP50 and ToReadyP99: seconds from a VM's create to its Ready.
	ToReadyP50 float64  `json:"createToReadyP50Seconds"`
	ToReadyP99 float64  `json:"createToReadyP99Seconds"`
	Sessions   Sessions `json:"sessions"`
}

// Sessions are the provider's vCenter sessions over a provisioning: those
// vcsim holds for it at the end, the logins and reconnects it counted.
type Sessions struct {
	Providers  int     `json:"providers"`
	Open       int     `json:"openAtEnd"`
	Logins     float64 `json:"logins"`
	Reconnects float64 `json:"reconnects"`
}

const (
	simUser     = "administrator@vsphere.local"
	simPassword = "bench-REPLACE-ME"
	simTemplate = "ubuntu-22.04-cloudinit"
	provNS      = "bench-prov"
	// The provider's default; the raw build rate is measured with as many.
	providerWorkers = 8
)

// provisioning starts vcsim, the core controllers and the vSphere
// provider, measures vcsim's raw rate at the provider's work (clone,
// reconfigure, power-on over every cluster), then creates VMs and
// times them to Scheduled and to Ready.
func (h *harness) provisioning(ctx context.Context, r *report) error {
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 2, Clusters: 3, Template: simTemplate, Username: simUser, Password: simPassword, DHCP: true})
	if err != nil {
		return err
	}
	defer sim.Close()
	raw, err := sim.BuildRate(ctx, simUser, simPassword, simTemplate, min(h.cfg.VMs, 200), providerWorkers)
	if err != nil {
		return fmt.Errorf("raw build rate: %w", err)
	}
	logf("  vcsim alone: %.1f clone+reconfigure+power-on per second over every cluster (%d workers)", raw, providerWorkers)

	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := onlyVMsOf(ctx, bc, provNS); err != nil {
		return err
	}
	if err := h.vsphereProvider(ctx, bc, "bench-vsphere", sim); err != nil {
		return err
	}
	// With -profile, the controller and the provider serve /debug/pprof.
	var ctrlArgs, provArgs []string
	profiles := map[string]*restclient.Config{}
	if h.cfg.Profile != "" && h.cfg.ProfilePhases["provision"] {
		for _, p := range []struct {
			name string
			args *[]string
		}{{"controller", &ctrlArgs}, {"provider-vsphere", &provArgs}} {
			addr, err := pprofAddr()
			if err != nil {
				return err
			}
			*p.args = []string{"--pprof-bind-address=" + addr}
			profiles[p.name] = &restclient.Config{Host: "http://" + addr}
		}
		profiles["banlieue"], profiles["kube-apiserver"] = h.direct, h.admin
	}
	if _, err := h.env.StartController(0, ctrlArgs...); err != nil {
		return err
	}
	h.controllerStarted = true
	prov, err := h.startVSphereProvider(provArgs...)
	if err != nil {
		return err
	}
	// Stopped before vcsim closes (deferred after it, so run before it):
	// it would retry a vCenter gone for the rest of the run.
	defer prov.Stop()
	if err := awaitImage(ctx, bc, "bench-vsphere"); err != nil {
		return err
	}
	if err := h.vmNamespace(ctx, provNS); err != nil {
		return err
	}

	pids := h.env.PIDs() // a fresh map: every process, controllers and provider included
	pids[benchProcess] = os.Getpid()
	var waits []func()
	for name, cfg := range profiles {
		// The first 20 s: creation, scheduling and the first clones.
		waits = append(waits, startProfile(ctx, cfg, h.cfg.Profile, "provision-"+name, 20))
	}
	if len(profiles) > 0 {
		// This process too: vcsim serving the provider, and the clients.
		waits = append(waits, profileSelf(h.cfg.Profile, "provision-bench", 20*time.Second))
	}
	defer func() {
		for _, w := range waits {
			w()
		}
	}()
	sessions0, err := sessionCounts(ctx, h.providerMetrics)
	if err != nil {
		return err
	}
	measured, err := h.provision(ctx, bc, pids, provisionJob{ns: provNS, n: h.cfg.VMs,
		sources: map[string]callSource{countedByProvider: h.vcenterCalls, countedByServer: servedCalls(sim.Calls)}})
	if err != nil {
		return err
	}
	sessions, err := sessionCounts(ctx, h.providerMetrics)
	if err != nil {
		return err
	}
	sessions.Logins -= sessions0.Logins
	sessions.Reconnects -= sessions0.Reconnects
	sessions.Providers = 1
	if sessions.Open, err = sim.Sessions(ctx); err != nil {
		return err
	}
	logf("  CPU ms per VM provisioned: %v", measured.cpuMs)
	logf("  requests per VM: %v", measured.requests)
	n := float64(h.cfg.VMs)
	logf("  vCenter calls per VM: %v (provider), %v (vcsim); sessions %+v", measured.calls[countedByProvider], measured.calls[countedByServer], sessions)
	r.provisioning = &Provisioning{VMs: h.cfg.VMs, CPUms: measured.cpuMs, RequestsPerVM: measured.requests,
		VCenterCallsPerVM: measured.calls[countedByProvider], VCenterServedPerVM: measured.calls[countedByServer], Sessions: sessions,
		ToReadyP50: measured.toReady.quantile(0.5) / 1000, ToReadyP99: measured.toReady.quantile(0.99) / 1000,
		CreatePerS: n / measured.created.Seconds(), ScheduledPerS: n / measured.scheduled.Seconds(),
		ReadyPerS: n / measured.ready.Seconds(), VCSimBuildsPerS: raw, SecondsToSchedule: measured.scheduled.Seconds(), SecondsToReady: measured.ready.Seconds()}
	r.backends = append(r.backends, costOf("vSphere (vcsim)", h.cfg.VMs, measured, countedByServer, "vcsim, the SOAP methods it served"))
	logf("  created %.0f/s, all Scheduled in %.1fs (%.0f/s), all Ready in %.1fs (%.1f/s)", r.provisioning.CreatePerS,
		measured.scheduled.Seconds(), r.provisioning.ScheduledPerS, measured.ready.Seconds(), r.provisioning.ReadyPerS)
	return deleteVMs(ctx, bc, provNS)
}

// provisionRun is one measured provisioning: how long the creates took
// and until every VM was Scheduled and Ready, each VM's time from its
// create to Ready, every process's CPU per VM, both servers' requests per
// VM and each call source's backend calls per VM.
type provisionRun struct {
	created, scheduled, ready time.Duration
	toReady                   *latencies
	cpuMs, requests           map[string]float64
	// calls are each callSource's calls per VM, by method.
	calls map[string]map[string]float64
}

// callSource counts a backend's calls by method since it started: a
// provider's own metric, or a simulator's count of what it served.
type callSource func(ctx context.Context) (map[string]float64, error)

// Where backend calls are counted (provisionRun.calls' keys).
const (
	countedByProvider = "provider"
	countedByServer   = "server"
)

// startVSphereProvider starts the vSphere provider with its metrics on a
// loopback port, which h.providerMetrics reaches.
func (h *harness) startVSphereProvider(args ...string) (devenv.Process, error) {
	p, metrics, err := h.startProvider("vsphere", "provider-vsphere", args...)
	if err != nil {
		return devenv.Process{}, err
	}
	h.providerMetrics = metrics
	return p, nil
}

// vcenterCalls reads the provider's count of its vCenter calls by method.
func (h *harness) vcenterCalls(ctx context.Context) (map[string]float64, error) {
	return providerCalls(ctx, h.providerMetrics)
}

// providerCalls reads a provider's count of its backend calls by method
// from its /metrics.
func providerCalls(ctx context.Context, metrics *restclient.Config) (map[string]float64, error) {
	body, _, err := rawGet(ctx, metrics, "/metrics", "text/plain")
	if err != nil {
		return nil, fmt.Errorf("reading the provider's metrics: %w", err)
	}
	return parseBackendCounts(string(body)), nil
}

// sessionCounts reads a provider's successful logins and reconnects
// (every backend's) from its /metrics; Open is left to the caller.
func sessionCounts(ctx context.Context, metrics *restclient.Config) (Sessions, error) {
	body, _, err := rawGet(ctx, metrics, "/metrics", "text/plain")
	if err != nil {
		return Sessions{}, fmt.Errorf("reading the provider's metrics: %w", err)
	}
	return parseSessions(string(body)), nil
}

// parseSessions reads the successful logins and the reconnects of every
// backend from a provider's /metrics page.
func parseSessions(body string) Sessions {
	var s Sessions
	for _, c := range counterSamples(body, "banlieue_provider_session_logins_total") {
		if c.labels["result"] == "success" {
			s.Logins += c.value
		}
	}
	for _, c := range counterSamples(body, "banlieue_provider_session_reconnects_total") {
		s.Reconnects += c.value
	}
	return s
}

// servedCalls is a simulator's count of what it served, as a callSource.
func servedCalls(counts func() map[string]int) callSource {
	return func(context.Context) (map[string]float64, error) {
		out := map[string]float64{}
		for k, v := range counts() {
			out[k] = float64(v)
		}
		return out, nil
	}
}

// perVMGrowth is each key's growth from before to after per VM, of those
// at 0.05 per VM or more.
func perVMGrowth(before, after map[string]float64, vms int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := (v - before[k]) / float64(vms); d >= 0.05 {
			out[k] = d
		}
	}
	return out
}

// provisionJob is what provision creates and measures: n VMs in ns, the
// benchmark's VM (path A's create, vmName) unless create and name say
// otherwise; sources count the backend's calls; onReady is
// awaitProgress's.
type provisionJob struct {
	ns      string
	n       int
	create  func(ctx context.Context, i int) error
	name    func(i int) string
	sources map[string]callSource
	onReady func(*v1alpha1.VirtualMachine, time.Duration)
}

// provision creates the job's VMs and follows them until all are Ready,
// measuring the processes of pids, both servers' requests and each
// source's backend calls meanwhile. Progress comes from one watch on
// banlieue's own port, so observing costs the servers almost nothing
// (polling lists of every VM did).
func (h *harness) provision(ctx context.Context, bc clientset.Interface, pids map[string]int, job provisionJob) (provisionRun, error) {
	if job.create == nil {
		job.create = func(ctx context.Context, i int) error { return h.a.create(ctx, job.ns, i) }
		job.name = vmName
	}
	w, err := watchVMs(ctx, bc, job.ns)
	if err != nil {
		return provisionRun{}, err
	}
	defer w.Stop()
	cpu := startCPU(pids)
	reqs, err := h.startRequests(ctx)
	if err != nil {
		return provisionRun{}, err
	}
	calls0, err := readCalls(ctx, job.sources)
	if err != nil {
		return provisionRun{}, err
	}
	start := time.Now()
	createdAt := make([]time.Duration, job.n)
	res := run(ctx, h.pids, h.a.Name(), "create", 0, job.n, h.cfg.C, func(ctx context.Context, i int) error {
		err := job.create(ctx, i)
		createdAt[i] = time.Since(start) // each i is one goroutine's alone
		return err
	})
	if res.Errors > 0 {
		return provisionRun{}, fmt.Errorf("%d creates failed", res.Errors)
	}
	out := provisionRun{created: time.Since(start), toReady: &latencies{}}
	index := make(map[string]int, job.n)
	for i := range job.n {
		index[job.name(i)] = i
	}
	if out.scheduled, out.ready, err = awaitProgress(ctx, w, start, job.n, func(vm *v1alpha1.VirtualMachine, at time.Duration) {
		if i, ok := index[vm.Name]; ok {
			out.toReady.add(at - createdAt[i])
		}
		if job.onReady != nil {
			job.onReady(vm, at)
		}
	}); err != nil {
		return provisionRun{}, err
	}
	out.cpuMs = cpu.perOp(job.n)
	if out.requests, err = reqs.perVM(ctx, job.n); err != nil {
		return provisionRun{}, err
	}
	calls1, err := readCalls(ctx, job.sources)
	out.calls = map[string]map[string]float64{}
	for name := range job.sources {
		out.calls[name] = perVMGrowth(calls0[name], calls1[name], job.n)
	}
	return out, err
}

// readCalls reads every source.
func readCalls(ctx context.Context, sources map[string]callSource) (map[string]map[string]float64, error) {
	out := map[string]map[string]float64{}
	for name, read := range sources {
		counts, err := read(ctx)
		if err != nil {
			return nil, fmt.Errorf("backend calls counted by the %s: %w", name, err)
		}
		out[name] = counts
	}
	return out, nil
}

// onlyVMsOf fails when VMs exist outside ns: the controller would
// provision them too, and the figures per VM of ns would count their cost.
func onlyVMsOf(ctx context.Context, bc clientset.Interface, ns string) error {
	list, err := bc.BanlieueV1alpha1().VirtualMachines(metav1.NamespaceAll).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return err
	}
	others := map[string]int{}
	for _, vm := range list.Items {
		if vm.Namespace != ns {
			others[vm.Namespace]++
		}
	}
	if len(others) > 0 {
		return fmt.Errorf("VirtualMachines left by earlier phases would be provisioned too (per namespace): %v", others)
	}
	return nil
}

// watchVMs watches the VMs of ns from now on, resuming from the last event
// seen when the server ends a watch: a run on a slow machine outlives one
// (the fleet's 2 000 VMs once lost theirs mid-run).
func watchVMs(ctx context.Context, bc clientset.Interface, ns string) (watch.Interface, error) {
	vms := bc.BanlieueV1alpha1().VirtualMachines(ns)
	list, err := vms.List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return nil, err
	}
	return watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return vms.Watch(ctx, o) },
	})
}

// awaitProgress follows w until n VMs are Ready, returning when all were
// Scheduled and all Ready since start; onReady, when set, hears of each VM
// the first time it is seen Ready.
func awaitProgress(ctx context.Context, w watch.Interface, start time.Time, n int, onReady func(vm *v1alpha1.VirtualMachine, at time.Duration)) (scheduled, ready time.Duration, err error) {
	isScheduled, isReady := map[string]bool{}, map[string]bool{}
	timeout := time.After(30 * time.Minute)
	for ready == 0 {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-timeout:
			return 0, 0, fmt.Errorf("only %d of %d VMs became Ready in 30 minutes", len(isReady), n)
		case ev, ok := <-w.ResultChan():
			if !ok {
				return 0, 0, fmt.Errorf("the watch of VirtualMachines ended")
			}
			vm, isVM := ev.Object.(*v1alpha1.VirtualMachine)
			if !isVM {
				continue
			}
			if meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled) {
				isScheduled[vm.Name] = true
			}
			if meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) && !isReady[vm.Name] {
				isReady[vm.Name] = true
				if onReady != nil {
					onReady(vm, time.Since(start))
				}
			}
			if len(isScheduled) == n && scheduled == 0 {
				scheduled = time.Since(start)
			}
			if len(isReady) == n {
				ready = time.Since(start)
			}
		}
	}
	return scheduled, ready, nil
}

// vsphereProvider registers sim as the Provider name in the environment's
// namespace, with its credentials Secret and the storage and network
// classes the benchmark VMs ask for.
func (h *harness) vsphereProvider(ctx context.Context, bc clientset.Interface, name string, sim *vcsim.Simulator) error {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: devenv.Namespace, Labels: map[string]string{"dc": "dc1", "env": "prod"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.Endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: name + "-credentials"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
			},
		},
	}
	return h.createProvider(ctx, bc, p, map[string]string{"username": simUser, "password": simPassword})
}

// createProvider creates p in the environment's namespace and the Secret
// its spec names with creds, which its class's provider may read.
func (h *harness) createProvider(ctx context.Context, bc clientset.Interface, p *v1alpha1.Provider, creds map[string]string) error {
	secret := p.Spec.Connection.CredentialsRef.Name
	if _, err := h.kube.CoreV1().Secrets(devenv.Namespace).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: secret},
		StringData: creds}, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Secret %s: %w", secret, err)
	}
	// The static install reads credentials by name: named in the
	// provider's credentials Role, as an administrator does.
	if err := h.env.GrantCredentials(ctx, p.Spec.ProviderClassRef.Name, "secrets", secret); err != nil {
		return err
	}
	if _, err := bc.BanlieueV1alpha1().Providers(devenv.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("creating Provider %s: %w", p.Name, err)
	}
	return nil
}

// awaitImage waits until the benchmark image is ready on every named
// Provider: then they are connected and their inventories walked.
func awaitImage(ctx context.Context, bc clientset.Interface, providers ...string) error {
	want := map[string]bool{}
	for _, p := range providers {
		want[devenv.Namespace+"/"+p] = true
	}
	var ready int
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		img, err := bc.BanlieueV1alpha1().VMImages().Get(ctx, "bench-image", metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		ready = 0
		for _, s := range img.Status.PerProvider {
			if want[s.Provider] && s.Ready {
				ready++
			}
		}
		return ready == len(want), nil
	})
	if err != nil {
		return fmt.Errorf("the image became ready on %d of %d Providers: %w", ready, len(want), err)
	}
	return nil
}

// vmNamespace makes ns ready for the benchmark's VMs on vSphere.
func (h *harness) vmNamespace(ctx context.Context, ns string) error {
	return h.userDataFor(ctx, ns, "vsphere")
}

// requestMeter counts what provisioning costs the API servers: the
// requests kube-apiserver served itself and those it proxied to banlieue
// (counted by banlieue: kube-apiserver's own count leaves them out), the
// benchmark's creates of the VMs excluded (the user's, not the pipeline's).
type requestMeter struct {
	h          *harness
	kube, mine map[string]float64
}

// benchProcess names this process in provisioning's CPU figures: it runs
// vcsim besides the clients, so it is no part of the control plane.
const benchProcess = "bench (vcsim, clients)"

// userCreate is the benchmark's own create of each VM, as banlieue counts it.
const userCreate = "POST banlieue.io/virtualmachines"

func (h *harness) startRequests(ctx context.Context) (*requestMeter, error) {
	m := &requestMeter{h: h}
	var err error
	if m.kube, err = requestCounts(ctx, h.admin); err != nil {
		return nil, err
	}
	m.mine, err = requestCounts(ctx, h.direct)
	return m, err
}

// perVM is each request kind's count per VM since the meter started, of
// those at 0.05 per VM or more, banlieue's marked "(banlieue)"; vms VMs
// were created once each by the benchmark.
func (m *requestMeter) perVM(ctx context.Context, vms int) (map[string]float64, error) {
	kube, err := requestCounts(ctx, m.h.admin)
	if err != nil {
		return nil, err
	}
	mine, err := requestCounts(ctx, m.h.direct)
	if err != nil {
		return nil, err
	}
	return requestsPerVM(m.kube, kube, m.mine, mine, vms), nil
}

// requestsPerVM is the growth from the first counts to the second per VM,
// kube-apiserver's and banlieue's apart, less the user's one create of each
// of the vms VMs, dropping kinds under 0.05 per VM.
func requestsPerVM(kube0, kube1, mine0, mine1 map[string]float64, vms int) map[string]float64 {
	mine1 = maps.Clone(mine1)
	if mine1 != nil {
		mine1[userCreate] -= float64(vms)
	}
	out := perVMGrowth(kube0, kube1, vms)
	for k, v := range perVMGrowth(mine0, mine1, vms) {
		out[k+" (banlieue)"] = v
	}
	return out
}

// totalRequests sums every request kind per VM.
func totalRequests(perVM map[string]float64) float64 {
	var n float64
	for _, v := range perVM {
		n += v
	}
	return n
}

// requestCounts sums kube-apiserver's apiserver_request_total by verb and
// resource (group/resource/subresource).
func requestCounts(ctx context.Context, cfg *restclient.Config) (map[string]float64, error) {
	body, _, err := rawGet(ctx, cfg, "/metrics", "text/plain")
	if err != nil {
		return nil, err
	}
	return parseRequestCounts(string(body)), nil
}

// parseRequestCounts reads apiserver_request_total from a /metrics page
// by "VERB group/resource/subresource", refused requests apart by code;
// watches and lists of no resource (discovery) are left out.
func parseRequestCounts(body string) map[string]float64 {
	out := map[string]float64{}
	for _, c := range counterSamples(body, "apiserver_request_total") {
		l := c.labels
		if l["verb"] == "WATCH" || l["verb"] == "LIST" && l["resource"] == "" {
			continue
		}
		key := l["verb"] + " " + strings.Trim(l["group"]+"/"+l["resource"]+"/"+l["subresource"], "/")
		// Refused requests apart, by code: a 409 is a round trip spent for
		// nothing (a create the cache did not know was done, a conflict).
		if code := l["code"]; code != "" && !strings.HasPrefix(code, "2") {
			key += " (" + code + ")"
		}
		out[key] += c.value
	}
	return out
}

// parseBackendCounts reads banlieue_provider_backend_requests_total from a
// provider's /metrics page by method.
func parseBackendCounts(body string) map[string]float64 {
	out := map[string]float64{}
	for _, c := range counterSamples(body, "banlieue_provider_backend_requests_total") {
		out[c.labels["method"]] += c.value
	}
	return out
}

// sample is one line of a counter on a /metrics page.
type sample struct {
	labels map[string]string
	value  float64
}

// counterSamples are the samples of the counter name on a /metrics page
// (label values hold no commas or quotes in the counters read here).
func counterSamples(body, name string) []sample {
	var out []sample
	for _, line := range strings.Split(body, "\n") {
		labels, value, ok := strings.Cut(strings.TrimPrefix(line, name+"{"), "} ")
		if !ok || !strings.HasPrefix(line, name+"{") {
			continue
		}
		n, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		l := map[string]string{}
		for _, kv := range strings.Split(labels, ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				l[k] = strings.Trim(v, `"`)
			}
		}
		out = append(out, sample{l, n})
	}
	return out
}
