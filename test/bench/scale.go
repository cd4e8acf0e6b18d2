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
	"encoding/json"
	"fmt"
	"maps"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// "make bench-scale" measures how banlieue's costs grow with what it
// holds: first a fleet of simulated vCenters provisioned through the
// controllers, then VMs stored in steps (1k, 10k, 50k) with memory, etcd,
// list and /placement figures at each step. scale.md turns the measured
// per-object costs into a projection, each figure naming its source row.

const (
	fleetNS = "bench-fleet"
	scaleNS = "bench-scale"
	// pageSize is the paged list's limit, as kubectl and informers page.
	pageSize = 500
)

// Fleet is the provisioning of VMs spread over many vCenters, in one of
// the ways the providers can run.
type Fleet struct {
	// Mode is fleetSingle or fleetOperator.
	Mode           string  `json:"mode"`
	VCenters       int     `json:"vcenters"`
	VMs            int     `json:"vms"`
	SecondsToReady float64 `json:"secondsToAllReady"`
	ReadyPerS      float64 `json:"readyPerSecond"`
	// PerProvider is each Provider's VMs and the rate they became Ready.
	PerProvider []ProviderRate `json:"perProvider"`
	// RSSPerVM is how much each process's RSS grew per provisioned VM.
	RSSPerVM      map[string]float64 `json:"rssBytesPerVM"`
	RSS           map[string]float64 `json:"rssBytes"`
	CPUms         map[string]float64 `json:"cpuMsPerVM"`
	RequestsPerVM map[string]float64 `json:"requestsPerVM"`
	// VCenterCallsPerVM: the providers' calls to the vCenters per VM, as
	// they counted them; VCenterServedPerVM as the vcsims counted them.
	VCenterCallsPerVM  map[string]float64 `json:"vcenterCallsPerVM"`
	VCenterServedPerVM map[string]float64 `json:"vcenterServedPerVM"`
	// ToReadyP50 and ToReadyP99: seconds from a VM's create to its Ready.
	ToReadyP50 float64 `json:"createToReadyP50Seconds"`
	ToReadyP99 float64 `json:"createToReadyP99Seconds"`
	// Sessions open on the vCenters at the end, logins during the run.
	Sessions Sessions `json:"sessions"`
	// EtcdPerVM is the growth of etcd's data in use per provisioned VM
	// (every object the pipeline writes, their revisions and Events).
	EtcdPerVM float64 `json:"etcdBytesInUsePerVM"`
}

// ProviderRate is one Provider's share of the fleet.
type ProviderRate struct {
	Provider string `json:"provider"`
	VMs      int    `json:"vms"`
	// MedianSeconds and Seconds: from the first create until half and
	// all of its VMs were Ready.
	MedianSeconds float64 `json:"secondsToHalfReady"`
	Seconds       float64 `json:"secondsToLastReady"`
	ReadyPerS     float64 `json:"readyPerSecond"`
}

// Stored is banlieue's cost of holding VMs, at one size.
type Stored struct {
	VMs        int     `json:"vms"`
	CreatePerS float64 `json:"createPerSecond"`
	// ValueBytes is one VM's value in etcd; EtcdPerVM the growth of etcd's
	// data in use per stored VM (keys, values, index).
	ValueBytes int     `json:"etcdValueBytes"`
	EtcdPerVM  float64 `json:"etcdBytesInUsePerVM"`
	// RSS and Heap are banlieue's, freshly restarted with the VMs stored;
	// PerVM is their growth over the same server holding none.
	RSS       float64 `json:"rssBytes"`
	Heap      float64 `json:"heapBytes"`
	RSSPerVM  float64 `json:"rssBytesPerVM"`
	HeapPerVM float64 `json:"heapBytesPerVM"`
	// WatchCachePerVM is what the watch cache's heap (with less without
	// --watch-cache=false) grew per VM over the base's.
	WatchCachePerVM float64 `json:"watchCacheHeapBytesPerVM"`
	// Lists of every stored VM (p50, ms): from the watch cache in JSON and
	// protobuf, paged (limit 500) with and without the watch cache.
	ListCacheJSON     float64 `json:"listCacheJSONms"`
	ListCacheProtobuf float64 `json:"listCacheProtobufms"`
	ListPaged         float64 `json:"listPagedms"`
	ListPagedNoCache  float64 `json:"listPagedNoWatchCachems"`
	ListBytes         int     `json:"listJSONBytes"`
	// GET and /placement of one VM on banlieue's port.
	GetP50       float64 `json:"getP50ms"`
	GetP99       float64 `json:"getP99ms"`
	PlacementP50 float64 `json:"placementP50ms"`
	PlacementP99 float64 `json:"placementP99ms"`
	Errors       int     `json:"errors"`
}

type scaleReport struct {
	cfg     config
	started time.Time
	// fleets: the same fleet in each mode, in the order run.
	fleets []*Fleet
	stored []Stored
}

// The ways the fleet's providers run.
const (
	// fleetSingle: one vSphere provider process serves every Provider
	// (the static install).
	fleetSingle = "single process"
	// fleetOperator: one provider process per Provider ("--provider"), as
	// the operator's per-Provider workloads run; processes, not pods, so
	// CPU and RSS are read per process.
	fleetOperator = "operator (one process per Provider)"
)

// fleetProcess names the fleet's provider process for Provider name in
// operator mode, or the single process.
func fleetProcess(name string) string {
	if name == "" {
		return "provider-vsphere"
	}
	return "provider-vsphere-" + strings.TrimPrefix(name, "vcenter-")
}

// scale runs the fleet, then the stored sizes, and writes scale.md.
func (h *harness) scale(ctx context.Context) error {
	sr := &scaleReport{cfg: h.cfg, started: time.Now()}
	if h.cfg.VCenters > 0 && h.cfg.FleetVMs > 0 {
		logf("fleet: %d VirtualMachines over %d simulated vCenters (one Provider each)", h.cfg.FleetVMs, h.cfg.VCenters)
		if err := h.fleet(ctx, sr); err != nil {
			return err
		}
	}
	logf("stored: %v VirtualMachines on banlieue", h.cfg.Sizes)
	if err := h.storedSizes(ctx, sr); err != nil {
		return err
	}
	if err := sr.write(os.Stdout, h.cfg.Out); err != nil {
		return err
	}
	if h.cfg.Strict {
		return sr.problems()
	}
	return nil
}

// fleet provisions FleetVMs over VCenters simulators through the core
// controller, once in each mode (fleetSingle, then fleetOperator, the VMs
// deleted between), then stops everything so the stored steps measure
// storage alone.
func (h *harness) fleet(ctx context.Context, sr *scaleReport) error {
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := onlyVMsOf(ctx, bc, fleetNS); err != nil {
		return err
	}
	var names []string
	var sims []*vcsim.Simulator
	for i := 0; i < h.cfg.VCenters; i++ {
		sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 2, Template: simTemplate, Username: simUser, Password: simPassword, DHCP: true})
		if err != nil {
			return err
		}
		defer sim.Close()
		name := fmt.Sprintf("vcenter-%02d", i)
		if err := h.vsphereProvider(ctx, bc, name, sim); err != nil {
			return err
		}
		names, sims = append(names, name), append(sims, sim)
	}
	ctrl, err := h.env.StartController(0)
	if err != nil {
		return err
	}
	defer ctrl.Stop()
	if err := h.vmNamespace(ctx, fleetNS); err != nil {
		return err
	}
	for _, mode := range []string{fleetSingle, fleetOperator} {
		f, err := h.fleetIn(ctx, bc, mode, names, sims)
		if err != nil {
			return fmt.Errorf("fleet, %s: %w", mode, err)
		}
		sr.fleets = append(sr.fleets, f)
	}
	return nil
}

// fleetProviders starts the vSphere providers of mode for the Providers
// names: one process for all, or one per Provider. metrics reach each
// one's /metrics.
func (h *harness) fleetProviders(mode string, names []string) (stop func(), metrics []*restclient.Config, err error) {
	var procs []devenv.Process
	stop = func() {
		for _, p := range procs {
			p.Stop()
		}
	}
	only := []string{""}
	if mode == fleetOperator {
		only = names
	}
	for _, name := range only {
		args := []string{"--leader-elect"}
		if name != "" {
			args = append(args, "--provider="+name)
		}
		p, m, err := h.startProvider("vsphere", fleetProcess(name), args...)
		if err != nil {
			stop()
			return nil, nil, err
		}
		procs = append(procs, p)
		if err := awaitMetrics(m); err != nil {
			stop()
			return nil, nil, fmt.Errorf("%s: %w", fleetProcess(name), err)
		}
		metrics = append(metrics, m)
	}
	return stop, metrics, nil
}

// awaitMetrics waits until a provider just started serves its /metrics.
func awaitMetrics(m *restclient.Config) error {
	return wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := providerCalls(ctx, m)
		return err == nil, nil
	})
}

// fleetIn provisions the fleet with its providers running as mode says,
// measures it, and deletes its VMs.
func (h *harness) fleetIn(ctx context.Context, bc clientset.Interface, mode string, names []string, sims []*vcsim.Simulator) (*Fleet, error) {
	logf("  %s: starting the providers", mode)
	stop, metrics, err := h.fleetProviders(mode, names)
	if err != nil {
		return nil, err
	}
	defer stop()
	if err := awaitImage(ctx, bc, names...); err != nil {
		return nil, err
	}
	pids := h.env.PIDs()
	pids[benchProcess] = os.Getpid()
	for name := range pids {
		if strings.HasPrefix(name, "provider-") && !isFleetProcess(name, mode, names) {
			delete(pids, name) // a provider of the other mode, stopped
		}
	}
	sessions0, err := fleetSessions(ctx, metrics)
	if err != nil {
		return nil, err
	}
	rss0 := rssAll(pids)
	etcd0, err := h.etcdInUse(ctx)
	if err != nil {
		return nil, err
	}
	readyAt := map[string][]float64{} // per Provider, in the order its VMs became Ready
	measured, err := h.provision(ctx, bc, pids, provisionJob{ns: fleetNS, n: h.cfg.FleetVMs,
		sources: map[string]callSource{countedByProvider: sumOfProviders(metrics), countedByServer: sumOfSims(sims)},
		onReady: func(vm *v1alpha1.VirtualMachine, at time.Duration) {
			if s := vm.Status.Scheduled; s != nil {
				readyAt[s.Provider] = append(readyAt[s.Provider], at.Seconds())
			}
		}})
	if err != nil {
		return nil, err
	}
	f := &Fleet{Mode: mode, VCenters: len(names), VMs: h.cfg.FleetVMs, SecondsToReady: measured.ready.Seconds(), ReadyPerS: float64(h.cfg.FleetVMs) / measured.ready.Seconds(),
		CPUms: measured.cpuMs, RequestsPerVM: measured.requests, VCenterCallsPerVM: measured.calls[countedByProvider], VCenterServedPerVM: measured.calls[countedByServer],
		ToReadyP50: measured.toReady.quantile(0.5) / 1000, ToReadyP99: measured.toReady.quantile(0.99) / 1000,
		RSS: rssAll(pids), RSSPerVM: map[string]float64{}}
	for name, v := range f.RSS {
		f.RSSPerVM[name] = (v - rss0[name]) / float64(f.VMs)
	}
	for _, name := range slices.Sorted(maps.Keys(readyAt)) {
		at := readyAt[name]
		last := at[len(at)-1]
		f.PerProvider = append(f.PerProvider, ProviderRate{Provider: name, VMs: len(at), MedianSeconds: at[len(at)/2], Seconds: last, ReadyPerS: float64(len(at)) / last})
	}
	etcd1, err := h.etcdInUse(ctx)
	if err != nil {
		return nil, err
	}
	f.EtcdPerVM = float64(etcd1-etcd0) / float64(f.VMs)
	if f.Sessions, err = fleetSessions(ctx, metrics); err != nil {
		return nil, err
	}
	f.Sessions.Logins -= sessions0.Logins
	f.Sessions.Reconnects -= sessions0.Reconnects
	f.Sessions.Providers = len(names)
	for _, sim := range sims {
		n, err := sim.Sessions(ctx)
		if err != nil {
			return nil, err
		}
		f.Sessions.Open += n
	}
	logf("  %s: all %d Ready in %.1fs (%.1f/s) on %d Providers, create to Ready p50 %.1fs p99 %.1fs; %d vCenter sessions open",
		mode, f.VMs, measured.ready.Seconds(), f.ReadyPerS, len(f.PerProvider), f.ToReadyP50, f.ToReadyP99, f.Sessions.Open)
	return f, deleteVMs(ctx, bc, fleetNS)
}

// isFleetProcess tells whether the process name is one of mode's providers.
func isFleetProcess(name, mode string, names []string) bool {
	if mode == fleetSingle {
		return name == fleetProcess("")
	}
	for _, n := range names {
		if name == fleetProcess(n) {
			return true
		}
	}
	return false
}

// sumOfProviders sums the backend calls every provider counted.
func sumOfProviders(metrics []*restclient.Config) callSource {
	return func(ctx context.Context) (map[string]float64, error) {
		out := map[string]float64{}
		for _, m := range metrics {
			calls, err := providerCalls(ctx, m)
			if err != nil {
				return nil, err
			}
			for k, v := range calls {
				out[k] += v
			}
		}
		return out, nil
	}
}

// sumOfSims sums what every simulator served.
func sumOfSims(sims []*vcsim.Simulator) callSource {
	return func(context.Context) (map[string]float64, error) {
		out := map[string]float64{}
		for _, sim := range sims {
			for k, v := range sim.Calls() {
				out[k] += float64(v)
			}
		}
		return out, nil
	}
}

// fleetSessions sums every provider's logins and reconnects.
func fleetSessions(ctx context.Context, metrics []*restclient.Config) (Sessions, error) {
	var out Sessions
	for _, m := range metrics {
		s, err := sessionCounts(ctx, m)
		if err != nil {
			return Sessions{}, err
		}
		out.Logins += s.Logins
		out.Reconnects += s.Reconnects
	}
	return out, nil
}

// rssAll is every process's resident set size, in bytes.
func rssAll(pids map[string]int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range pids {
		if v, err := rss(pid); err == nil {
			out[name] = float64(v)
		}
	}
	return out
}

// etcdInUse is the size of etcd's data in use (its database less free
// pages), what its space quota is checked against.
func (h *harness) etcdInUse(ctx context.Context) (int64, error) {
	st, err := h.etcd.Status(ctx, h.env.EtcdURL())
	if err != nil {
		return 0, fmt.Errorf("etcd status: %w", err)
	}
	return st.DbSizeInUse, nil
}

// memorySample is banlieue's memory, read on a freshly started server
// (so the figures are what holding the VMs costs, not what earlier
// requests left behind).
type memorySample struct{ rss, heap float64 }

// restartedMemory restarts banlieue with args and reads its memory once
// its watch cache and scheduling load are filled (it is ready) and
// garbage is collected.
func (h *harness) restartedMemory(ctx context.Context, args ...string) (memorySample, error) {
	if err := h.env.RestartBanlieue(ctx, args...); err != nil {
		return memorySample{}, fmt.Errorf("restarting banlieue %v: %w", args, err)
	}
	h.pids["banlieue"] = h.env.PIDs()["banlieue"]
	time.Sleep(h.cfg.Settle)
	heap, err := heapInUse(ctx, h.direct)
	if err != nil {
		return memorySample{}, err
	}
	r, err := rss(h.pids["banlieue"])
	return memorySample{rss: float64(r), heap: heap}, err
}

// storedSizes stores VMs in steps and measures each step.
func (h *harness) storedSizes(ctx context.Context, sr *scaleReport) error {
	if err := h.namespace(ctx, scaleNS); err != nil {
		return err
	}
	// The base is the same server holding none of these VMs, with and
	// without its watch cache (which holds every other resource too).
	baseNoCache, err := h.restartedMemory(ctx, "--watch-cache=false")
	if err != nil {
		return err
	}
	base, err := h.restartedMemory(ctx)
	if err != nil {
		return err
	}
	etcd0, err := h.etcdInUse(ctx)
	if err != nil {
		return err
	}
	have := 0
	for _, size := range h.cfg.Sizes {
		from := have
		res := run(ctx, h.pids, h.b.Name(), "create", 0, size-from, h.cfg.C, func(ctx context.Context, i int) error { return h.b.create(ctx, scaleNS, from+i) })
		have = size
		s := Stored{VMs: size, CreatePerS: res.OpsPerS, Errors: res.Errors}
		if err := h.measureStored(ctx, &s, base, baseNoCache, etcd0); err != nil {
			return fmt.Errorf("at %d VMs: %w", size, err)
		}
		logf("  %6d VMs: heap %.0f B/VM (watch cache %.0f), RSS %.0f B/VM, etcd %.0f B/VM; list from cache %.1f ms, paged %.1f ms (%.1f without cache); /placement p99 %.2f ms (GET %.2f)",
			size, s.HeapPerVM, s.WatchCachePerVM, s.RSSPerVM, s.EtcdPerVM, s.ListCacheJSON, s.ListPaged, s.ListPagedNoCache, s.PlacementP99, s.GetP99)
		sr.stored = append(sr.stored, s)
	}
	return nil
}

// measureStored fills s at its size: etcd, memory with and without the
// watch cache, lists and /placement.
func (h *harness) measureStored(ctx context.Context, s *Stored, base, baseNoCache memorySample, etcd0 int64) error {
	var err error
	if s.ValueBytes, err = h.valueSize(ctx, scaleNS, 0); err != nil {
		return err
	}
	inUse, err := h.etcdInUse(ctx)
	if err != nil {
		return err
	}
	s.EtcdPerVM = float64(inUse-etcd0) / float64(s.VMs)
	noCache, err := h.restartedMemory(ctx, "--watch-cache=false")
	if err != nil {
		return err
	}
	if s.ListPagedNoCache, err = h.pagedList(ctx, s.VMs); err != nil {
		return err
	}
	withCache, err := h.restartedMemory(ctx)
	if err != nil {
		return err
	}
	n := float64(s.VMs)
	s.RSS, s.Heap = withCache.rss, withCache.heap
	s.RSSPerVM, s.HeapPerVM = (withCache.rss-base.rss)/n, (withCache.heap-base.heap)/n
	s.WatchCachePerVM = ((withCache.heap - noCache.heap) - (base.heap - baseNoCache.heap)) / n
	reps := max(3, min(10, 20000/s.VMs))
	for _, l := range []struct {
		accept string
		into   *float64
	}{{"application/json", &s.ListCacheJSON}, {"application/vnd.kubernetes.protobuf", &s.ListCacheProtobuf}} {
		lr, err := h.list(ctx, h.direct, "banlieue.io", scaleNS, "cache", l.accept, reps)
		if err != nil {
			return err
		}
		*l.into = lr.P50ms
		if l.accept == "application/json" {
			s.ListBytes = lr.Bytes
		}
	}
	if s.ListPaged, err = h.pagedList(ctx, s.VMs); err != nil {
		return err
	}
	get := func(sub ...string) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			_, err := h.b.client.Resource(h.b.gvr).Namespace(scaleNS).Get(ctx, vmName(i*7919%s.VMs), metav1.GetOptions{}, sub...)
			return err
		}
	}
	g := run(ctx, h.pids, h.b.Name(), "get", 0, h.cfg.Samples, h.cfg.C, get())
	p := run(ctx, h.pids, h.b.Name(), "placement", 0, h.cfg.Samples, h.cfg.C, get("placement"))
	s.GetP50, s.GetP99, s.PlacementP50, s.PlacementP99 = g.P50ms, g.P99ms, p.P50ms, p.P99ms
	s.Errors += g.Errors + p.Errors
	return nil
}

// pagedList walks every stored VM in pages of pageSize (a consistent list,
// as a client without resourceVersion pages) and returns the walk's p50
// time; a walk that does not see want VMs is an error.
func (h *harness) pagedList(ctx context.Context, want int) (ms float64, err error) {
	var lat latencies
	for rep := 0; rep < 3; rep++ {
		t0 := time.Now()
		cont, items := "", 0
		for {
			path := fmt.Sprintf("/apis/banlieue.io/v1alpha1/namespaces/%s/virtualmachines?limit=%d&continue=%s", scaleNS, pageSize, url.QueryEscape(cont))
			body, _, err := rawGet(ctx, h.direct, path, "application/json")
			if err != nil {
				return 0, err
			}
			var page struct {
				Metadata struct {
					Continue string `json:"continue"`
				} `json:"metadata"`
				Items []json.RawMessage `json:"items"`
			}
			if err := json.Unmarshal(body, &page); err != nil {
				return 0, fmt.Errorf("decoding a page: %w", err)
			}
			items += len(page.Items)
			if cont = page.Metadata.Continue; cont == "" {
				break
			}
		}
		lat.add(time.Since(t0))
		if items != want {
			return 0, fmt.Errorf("a paged list saw %d VMs of %d", items, want)
		}
	}
	return lat.quantile(0.5), nil
}
