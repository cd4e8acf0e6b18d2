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
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report gathers every measurement of one run.
type report struct {
	cfg          config
	started      time.Time
	crud         []Result
	memory       []Memory
	lists        []ListResult
	subresources []Result
	// subresourceTails: GET, /resolved and /placement interleaved.
	subresourceTails []Result
	watches          []WatchResult
	provisioning     *Provisioning
	libvirt          *LibvirtProvisioning
	// backends: each backend's provisioning cost per VM, side by side.
	backends  []BackendCost
	encodings []Result
	storage   []StorageResult
	tenant    []Result
}

// Ratio is one comparison, with its target when the issue sets one.
type Ratio struct {
	Name   string  `json:"name"`
	Value  float64 `json:"value"`
	Target string  `json:"target,omitempty"`
	Met    *bool   `json:"met,omitempty"`
}

// mean averages a field over the rounds of one path and verb.
func mean(rs []Result, path, verb string, f func(Result) float64) float64 {
	var sum float64
	n := 0
	for _, r := range rs {
		if strings.HasPrefix(r.Path, path) && r.Verb == verb {
			sum += f(r)
			n++
		}
	}
	if n == 0 {
		return 0
	}
	return sum / float64(n)
}

func opsPerS(r Result) float64 { return r.OpsPerS }
func p99(r Result) float64     { return r.P99ms }

func (r *report) listP50(path, mode, enc string) float64 {
	for _, l := range r.lists {
		if strings.HasPrefix(l.Path, path) && l.Mode == mode && l.Encoding == enc && l.Offered {
			return l.P50ms
		}
	}
	return 0
}

func (r *report) memoryOf(server string) Memory {
	for _, m := range r.memory {
		if m.Server == server {
			return m
		}
	}
	return Memory{}
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return 0
	}
	return a / b
}

func atLeast(name string, v, target float64) Ratio {
	met := v >= target
	return Ratio{Name: name, Value: v, Target: fmt.Sprintf("≥ %.2g", target), Met: &met}
}

func atMost(name string, v, target float64) Ratio {
	met := v <= target && v > 0
	return Ratio{Name: name, Value: v, Target: fmt.Sprintf("≤ %.2g", target), Met: &met}
}

func (r *report) ratios() []Ratio {
	c := r.crud
	out := []Ratio{
		atLeast("create A/C (aggregated vs CRD, ops/s)", ratio(mean(c, "A", "create", opsPerS), mean(c, "C", "create", opsPerS)), 1.0),
		atLeast("create B/C (direct vs CRD, ops/s)", ratio(mean(c, "B", "create", opsPerS), mean(c, "C", "create", opsPerS)), 1.5),
		atMost("banlieue CPU ms per create (direct)", mean(c, "B", "create", func(r Result) float64 { return r.CPUms["banlieue"] }), 0.7),
		atMost("banlieue CPU per create (B) / kube-apiserver CPU per CRD create (C)", ratio(mean(c, "B", "create", func(r Result) float64 { return r.CPUms["banlieue"] }),
			mean(c, "C", "create", func(r Result) float64 { return r.CPUms["kube-apiserver"] })), 0.3),
		atLeast("get A/C (ops/s)", ratio(mean(c, "A", "get", opsPerS), mean(c, "C", "get", opsPerS)), 0.7),
		atMost("list of N from cache B/C (JSON latency)", ratio(r.listP50("B", "cache", "application/json"), r.listP50("C", "cache", "application/json")), 0.5),
		// The CRD offers JSON at most: banlieue in protobuf against it.
		atMost("list of N from cache B protobuf / C JSON (latency)", ratio(r.listP50("B", "cache", "application/vnd.kubernetes.protobuf"), r.listP50("C", "cache", "application/json")), 0.15),
		atLeast("create B/D (direct vs raw etcd put, ops/s)", ratio(mean(c, "B", "create", opsPerS), mean(c, "D", "create", opsPerS)), 0.2),
		atMost("/resolved p99 / GET p99 (interleaved)", ratio(mean(r.subresourceTails, "A", "resolved", p99), mean(r.subresourceTails, "A", "get", p99)), 1.1),
		atMost("/placement p99 / GET p99 (interleaved)", ratio(mean(r.subresourceTails, "A", "placement", p99), mean(r.subresourceTails, "A", "get", p99)), 1.1),
	}
	// Each round's tail ratio too: a mean can hide one bad round.
	for _, sub := range []string{"resolved", "placement"} {
		for round := 1; round <= 2; round++ {
			out = append(out, Ratio{Name: fmt.Sprintf("/%s p99 / GET p99, round %d (interleaved)", sub, round),
				Value: ratio(r.subresourceP99(sub, round), r.subresourceP99("get", round))})
		}
	}
	if len(r.encodings) > 0 {
		e, banlieueCPU := r.encodings, func(r Result) float64 { return r.CPUms["banlieue"] }
		for _, enc := range []string{"protobuf", "CBOR"} {
			out = append(out,
				Ratio{Name: "create B " + enc + "/JSON (ops/s)", Value: ratio(mean(e, "B direct "+enc, "create", opsPerS), mean(e, "B direct JSON", "create", opsPerS))},
				Ratio{Name: "banlieue CPU per create B " + enc + "/JSON", Value: ratio(mean(e, "B direct "+enc, "create", banlieueCPU), mean(e, "B direct JSON", "create", banlieueCPU))},
				Ratio{Name: "get B " + enc + "/JSON (ops/s)", Value: ratio(mean(e, "B direct "+enc, "get", opsPerS), mean(e, "B direct JSON", "get", opsPerS))})
		}
	}
	if len(r.tenant) > 0 {
		t := r.tenant
		out = append(out,
			atLeast("tenant create A/C (edit role, ops/s)", ratio(mean(t, "A tenant", "create", opsPerS), mean(t, "C tenant", "create", opsPerS)), 1.0),
			Ratio{Name: "tenant get A/C (edit role, ops/s)", Value: ratio(mean(t, "A tenant", "get", opsPerS), mean(t, "C tenant", "get", opsPerS))},
			Ratio{Name: "tenant create A / admin create A (ops/s)", Value: ratio(mean(t, "A tenant", "create", opsPerS), mean(r.crud, "A", "create", opsPerS))})
	}
	if len(r.storage) == 2 {
		js, pb := r.storage[0], r.storage[1]
		out = append(out,
			Ratio{Name: "etcd bytes per VM, stored protobuf/JSON", Value: ratio(float64(pb.BytesPerVM), float64(js.BytesPerVM))},
			Ratio{Name: "banlieue CPU per create, stored protobuf/JSON", Value: ratio(pb.Results[0].CPUms["banlieue"], js.Results[0].CPUms["banlieue"])},
			Ratio{Name: "banlieue CPU per update, stored protobuf/JSON", Value: ratio(pb.Results[2].CPUms["banlieue"], js.Results[2].CPUms["banlieue"])})
	}
	if p := r.provisioning; p != nil {
		out = append(out,
			atLeast("scheduled rate / create rate", ratio(p.ScheduledPerS, p.CreatePerS), 1.0),
			atLeast("Ready rate / raw vcsim rate (clone, reconfigure, power-on over six clusters)", ratio(p.ReadyPerS, p.VCSimBuildsPerS), 0.8),
			atMost("requests per provisioned VM (kube-apiserver and banlieue)", totalRequests(p.RequestsPerVM), 10),
			atMost("vCenter calls per provisioned VM (served, vcsim's count)", totalRequests(p.VCenterServedPerVM), 10),
			Ratio{Name: "vCenter calls per provisioned VM (sent, the provider's count)", Value: totalRequests(p.VCenterCallsPerVM)},
			atMost("vCenter sessions per Provider open after provisioning (vcsim's sessionList)", ratio(float64(p.Sessions.Open), float64(p.Sessions.Providers)), 1),
			Ratio{Name: "vCenter logins / reconnects during provisioning (the provider's count)", Value: p.Sessions.Logins + p.Sessions.Reconnects},
			Ratio{Name: "control-plane CPU ms per provisioned VM", Value: controlPlaneCPU(p.CPUms)},
			Ratio{Name: "priced floor, CPU ms per provisioned VM (docs/provisioning.md)", Value: pricedFloor(c, p.RequestsPerVM)},
			atMost("control-plane CPU per provisioned VM / priced floor", ratio(controlPlaneCPU(p.CPUms), pricedFloor(c, p.RequestsPerVM)), 1.5))
	}
	if l := r.libvirt; l != nil && l.Skipped == "" {
		out = append(out, atLeast("libvirt VMs Ready per minute / raw define+start per minute", ratio(l.ReadyPerMin, l.RawPerMin), 0.8))
	}
	out = append(out,
		atMost("memory per stored VM, banlieue/CRD (RSS)", ratio(r.memoryOf("banlieue").RSSPerObject, r.memoryOf("kube-apiserver").RSSPerObject), 0.3),
		Ratio{Name: "memory per stored VM, banlieue/CRD (Go heap)", Value: ratio(r.memoryOf("banlieue").HeapPerObject, r.memoryOf("kube-apiserver").HeapPerObject)},
		Ratio{Name: "update A/C (ops/s)", Value: ratio(mean(c, "A", "update", opsPerS), mean(c, "C", "update", opsPerS))},
		Ratio{Name: "delete A/C (ops/s)", Value: ratio(mean(c, "A", "delete", opsPerS), mean(c, "C", "delete", opsPerS))},
		Ratio{Name: "get B/C (ops/s)", Value: ratio(mean(c, "B", "get", opsPerS), mean(c, "C", "get", opsPerS))},
		Ratio{Name: "list of N consistent B/C (JSON latency)", Value: ratio(r.listP50("B", "consistent", "application/json"), r.listP50("C", "consistent", "application/json"))},
	)
	return out
}

// pricedFloor is docs/provisioning.md's lower bound of the servers' CPU per
// provisioned VM: each machine create priced as the CRUD phase's CRD
// create, each machine write as its CRD update, each VirtualMachine write
// as its aggregated update (kube-apiserver, banlieue and etcd alike);
// Events, reads and the controllers themselves at nothing. 0 without a
// CRUD phase.
func pricedFloor(crud []Result, perVM map[string]float64) float64 {
	servers := func(r Result) float64 { return r.CPUms["kube-apiserver"] + r.CPUms["banlieue"] + r.CPUms["etcd"] }
	create, update, vmUpdate := mean(crud, "C", "create", servers), mean(crud, "C", "update", servers), mean(crud, "A", "update", servers)
	if create == 0 || update == 0 || vmUpdate == 0 {
		return 0
	}
	var floor float64
	for kind, n := range perVM {
		verb, resource, _ := strings.Cut(kind, " ")
		switch {
		case strings.Contains(resource, "(409)"), strings.HasPrefix(resource, "events"):
		case strings.HasPrefix(resource, "infrastructure.banlieue.io/") && verb == "POST":
			floor += n * create
		case strings.HasPrefix(resource, "infrastructure.banlieue.io/") && (verb == "PATCH" || verb == "PUT"):
			floor += n * update
		case strings.HasPrefix(resource, "banlieue.io/virtualmachines") && (verb == "PATCH" || verb == "PUT"):
			floor += n * vmUpdate
		}
	}
	return floor
}

// controlPlaneCPU sums the CPU per VM of every server, controller and
// provider: all processes but the benchmark's own (vcsim and the clients).
func controlPlaneCPU(perProcess map[string]float64) float64 {
	var ms float64
	for name, v := range perProcess {
		if name != benchProcess {
			ms += v
		}
	}
	return ms
}

// subresourceP99 is the p99 of one kind in one round's interleaved run.
func (r *report) subresourceP99(kind string, round int) float64 {
	for _, res := range r.subresourceTails {
		if res.Verb == kind && res.Round == round {
			return res.P99ms
		}
	}
	return 0
}

func (r *report) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# banlieue benchmark\n\n")
	fmt.Fprintf(&b, "Run %s on %s: %d cores, %s, %s/%s. N=%d objects, C=%d clients, %d watchers x %d writes, %d VMs provisioned; etcd with fsync. Took %s.\n\n",
		r.started.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		r.cfg.N, r.cfg.C, r.cfg.Watchers, r.cfg.WatchEvents, r.cfg.VMs, time.Since(r.started).Round(time.Second))
	fmt.Fprintf(&b, "Paths: **A** through kube-apiserver's aggregation proxy, **B** banlieue's own port, **C** the same schema as a CRD on the same kube-apiserver and etcd, **D** raw etcd (values of the size banlieue stores). Each figure is the mean of two rounds run A,B,C,D then D,C,B,A.\n\n")

	fmt.Fprintf(&b, "## Targets\n\n| ratio | value | target | met |\n|---|---:|---|---|\n")
	for _, x := range r.ratios() {
		met := ""
		if x.Met != nil {
			met = map[bool]string{true: "yes", false: "**no**"}[*x.Met]
		}
		fmt.Fprintf(&b, "| %s | %.2f | %s | %s |\n", x.Name, x.Value, x.Target, met)
	}

	fmt.Fprintf(&b, "\n## CRUD\n\n| path | verb | ops/s (r1, r2) | p50 ms | p99 ms | CPU ms/op kube-apiserver | banlieue | etcd | client | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, p := range []string{"A", "B", "C", "D"} {
		for _, v := range verbs {
			var rounds []string
			var name string
			errs := 0
			for _, res := range r.crud {
				if strings.HasPrefix(res.Path, p) && res.Verb == v {
					rounds = append(rounds, fmt.Sprintf("%.0f", res.OpsPerS))
					name = res.Path
					errs += res.Errors
				}
			}
			cpu := func(proc string) string {
				return fmt.Sprintf("%.2f", mean(r.crud, p, v, func(r Result) float64 { return r.CPUms[proc] }))
			}
			fmt.Fprintf(&b, "| %s | %s | %.0f (%s) | %.2f | %.2f | %s | %s | %s | %s | %d |\n", name, v, mean(r.crud, p, v, opsPerS), strings.Join(rounds, ", "),
				mean(r.crud, p, v, func(r Result) float64 { return r.P50ms }), mean(r.crud, p, v, p99), cpu("kube-apiserver"), cpu("banlieue"), cpu("etcd"), cpu(clientProcess), errs)
		}
	}

	fmt.Fprintf(&b, "\n## List of N stored objects\n\n| path | mode | encoding | p50 ms | bytes |\n|---|---|---|---:|---:|\n")
	for _, l := range r.lists {
		if !l.Offered {
			note := "not offered"
			if l.Note != "" {
				note = l.Note
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | |\n", l.Path, l.Mode, l.Encoding, note)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %s | %.1f | %d |\n", l.Path, l.Mode, l.Encoding, l.P50ms, l.Bytes)
	}

	if len(r.encodings) > 0 {
		fmt.Fprintf(&b, "\n## Encodings (one round each, JSON again beside them)\n\n| path | verb | ops/s | p50 ms | p99 ms | CPU ms/op kube-apiserver | banlieue | client | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, res := range r.encodings {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %d |\n", res.Path, res.Verb, res.OpsPerS, res.P50ms, res.P99ms,
				res.CPUms["kube-apiserver"], res.CPUms["banlieue"], res.CPUms[clientProcess], res.Errors)
		}
	}
	if len(r.tenant) > 0 {
		fmt.Fprintf(&b, "\n## A tenant (a ServiceAccount bound to edit; one round)\n\n| path | verb | ops/s | p50 ms | p99 ms | CPU ms/op kube-apiserver | banlieue | etcd | client | errors |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, res := range r.tenant {
			fmt.Fprintf(&b, "| %s | %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f | %.2f | %d |\n", res.Path, res.Verb, res.OpsPerS, res.P50ms, res.P99ms,
				res.CPUms["kube-apiserver"], res.CPUms["banlieue"], res.CPUms["etcd"], res.CPUms[clientProcess], res.Errors)
		}
	}
	if len(r.storage) > 0 {
		fmt.Fprintf(&b, "\n## Storage encoding (banlieue restarted with --storage-media-type; path B, JSON requests)\n\n| stored as | etcd bytes/VM | verb | ops/s | CPU ms/op banlieue | etcd | errors |\n|---|---:|---|---:|---:|---:|---:|\n")
		for _, s := range r.storage {
			for _, res := range s.Results {
				fmt.Fprintf(&b, "| %s | %d | %s | %.0f | %.2f | %.2f | %d |\n", s.MediaType, s.BytesPerVM, res.Verb, res.OpsPerS, res.CPUms["banlieue"], res.CPUms["etcd"], res.Errors)
			}
		}
	}

	fmt.Fprintf(&b, "\n## GET, /resolved and /placement (through the aggregator)\n\nEach kind alone (rate, latency, CPU), then the three interleaved request by request (tails that met the same moments of the servers).\n\n"+
		"| request | ops/s | p50 ms | p99 ms | CPU ms/op banlieue | interleaved p50 ms | interleaved p99 ms |\n|---|---:|---:|---:|---:|---:|---:|\n")
	for _, k := range []string{"get", "resolved", "placement"} {
		fmt.Fprintf(&b, "| %s | %.0f | %.2f | %.2f | %.2f | %.2f | %.2f |\n", k, mean(r.subresources, "A", k, opsPerS), mean(r.subresources, "A", k, func(r Result) float64 { return r.P50ms }),
			mean(r.subresources, "A", k, p99), mean(r.subresources, "A", k, func(r Result) float64 { return r.CPUms["banlieue"] }),
			mean(r.subresourceTails, "A", k, func(r Result) float64 { return r.P50ms }), mean(r.subresourceTails, "A", k, p99))
	}

	fmt.Fprintf(&b, "\n## Watch fan-out\n\nAcknowledged → delivered is 0 for an event that arrived before the writer saw its response.\n\n"+
		"| path | watchers | writes | delivered | ack→delivered p50 ms | p99 ms | issued→delivered p50 ms | p99 ms |\n|---|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, w := range r.watches {
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %.2f | %.2f | %.2f | %.2f |\n", w.Path, w.Watchers, w.Writes, w.Delivered, w.P50ms, w.P99ms, w.FromIssueP50, w.FromIssueP99)
	}

	fmt.Fprintf(&b, "\n## Memory per stored object (after settling %s)\n\n| server | objects | RSS bytes/object | Go heap bytes/object |\n|---|---:|---:|---:|\n", r.cfg.Settle)
	for _, m := range r.memory {
		fmt.Fprintf(&b, "| %s | %d | %.0f | %.0f |\n", m.Server, m.Objects, m.RSSPerObject, m.HeapPerObject)
	}

	if p := r.provisioning; p != nil {
		fmt.Fprintf(&b, "\n## Provisioning on vcsim (core controllers + vSphere provider as processes)\n\n| VMs | create/s | all Scheduled (s) | scheduled/s | all Ready (s) | Ready/s | vcsim alone clone+reconfigure+power-on/s |\n|---:|---:|---:|---:|---:|---:|---:|\n")
		fmt.Fprintf(&b, "| %d | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f |\n", p.VMs, p.CreatePerS, p.SecondsToSchedule, p.ScheduledPerS, p.SecondsToReady, p.ReadyPerS, p.VCSimBuildsPerS)
		fmt.Fprintf(&b, "\nCPU ms per VM, creation to Ready:")
		for _, name := range slices.Sorted(maps.Keys(p.CPUms)) {
			fmt.Fprintf(&b, " %s %.1f;", name, p.CPUms[name])
		}
		fmt.Fprintf(&b, "\n\nRequests per VM (%.1f in all; \"(banlieue)\": proxied to banlieue, the user's create left out):", totalRequests(p.RequestsPerVM))
		for _, name := range slices.Sorted(maps.Keys(p.RequestsPerVM)) {
			fmt.Fprintf(&b, " %s %.1f;", name, p.RequestsPerVM[name])
		}
		writeVCenterCalls(&b, "by the provider", p.VCenterCallsPerVM)
		writeVCenterCalls(&b, "served, as vcsim counted them", p.VCenterServedPerVM)
		fmt.Fprintf(&b, "\n\nvCenter sessions: %d open for %d Provider after provisioning (vcsim's sessionList); %.0f logins and %.0f reconnects during it (the provider's count). Create to Ready: p50 %.1f s, p99 %.1f s.\n",
			p.Sessions.Open, p.Sessions.Providers, p.Sessions.Logins, p.Sessions.Reconnects, p.ToReadyP50, p.ToReadyP99)
	}
	writeBackendCosts(&b, r.backends)
	if l := r.libvirt; l != nil {
		fmt.Fprintf(&b, "\n## Provisioning on a real libvirtd (controller + libvirt provider as processes; QEMU under software emulation)\n\n")
		if l.Skipped != "" {
			fmt.Fprintf(&b, "Not measured: %s.\n", l.Skipped)
		} else {
			fmt.Fprintf(&b, "| VMs | all Ready (s) | Ready/min | libvirt alone define+start/min |\n|---:|---:|---:|---:|\n")
			fmt.Fprintf(&b, "| %d | %.1f | %.0f | %.0f |\n", l.VMs, l.SecondsToReady, l.ReadyPerMin, l.RawPerMin)
		}
	}
	return b.String()
}

// write prints the Markdown report and stores it with the raw results.
func (r *report) write(stdout io.Writer, dir string) error {
	return writeReport(stdout, dir, "latest", r.markdown(), map[string]any{
		"started": r.started, "cores": runtime.NumCPU(), "go": runtime.Version(),
		"n": r.cfg.N, "c": r.cfg.C, "ratios": r.ratios(), "crud": r.crud, "lists": r.lists, "subresources": r.subresources, "subresourceTails": r.subresourceTails,
		"watches": r.watches, "memory": r.memory, "provisioning": r.provisioning, "libvirt": r.libvirt, "backends": r.backends,
		"encodings": r.encodings, "storage": r.storage, "tenant": r.tenant,
	})
}

// writeReport prints md and stores it, with raw as JSON, as name.md and
// name.json in dir.
func writeReport(stdout io.Writer, dir, name, md string, raw map[string]any) error {
	fmt.Fprint(stdout, md)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(raw, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, name+".md"), []byte(md), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, name+".json"), append(data, '\n'), 0o644)
}

// problems is an error naming every failed operation, lost watch event or
// list the servers would not serve as JSON.
func (r *report) problems() error {
	var out []string
	all := slices.Concat(r.crud, r.subresources, r.subresourceTails, r.encodings, r.tenant)
	for _, s := range r.storage {
		all = append(all, s.Results...)
	}
	for _, res := range all {
		if res.Errors > 0 {
			out = append(out, fmt.Sprintf("%s %s round %d: %d errors", res.Path, res.Verb, res.Round, res.Errors))
		}
	}
	for _, w := range r.watches {
		if w.Delivered != w.Watchers*w.Writes {
			out = append(out, fmt.Sprintf("watch %s: %d of %d events delivered", w.Path, w.Delivered, w.Watchers*w.Writes))
		}
	}
	for _, l := range r.lists {
		if l.Encoding == "application/json" && !l.Offered {
			out = append(out, fmt.Sprintf("list %s %s: JSON not served", l.Path, l.Mode))
		}
	}
	if len(out) > 0 {
		return fmt.Errorf("%s", strings.Join(out, "; "))
	}
	return nil
}

// writeBackendCosts is each backend's provisioning cost per VM, side by
// side, then each one's requests and backend calls by kind.
func writeBackendCosts(b *strings.Builder, costs []BackendCost) {
	if len(costs) == 0 {
		return
	}
	fmt.Fprintf(b, "\n## Provisioning cost per VM, by backend (controller + that backend's provider as processes)\n\n")
	fmt.Fprintf(b, "| backend | VMs | requests per VM | backend calls per VM | backend calls counted by | create to Ready p50 / p99 (s) | control-plane CPU ms per VM |\n|---|---:|---:|---:|---|---:|---:|\n")
	for _, c := range costs {
		fmt.Fprintf(b, "| %s | %d | %.2f | %.2f | %s | %.1f / %.1f | %.1f |\n", c.Backend, c.VMs, totalRequests(c.RequestsPerVM), totalRequests(c.CallsPerVM),
			c.CountedBy, c.ToReadyP50, c.ToReadyP99, controlPlaneCPU(c.CPUms))
	}
	for _, c := range costs {
		fmt.Fprintf(b, "\n%s: requests per VM:", c.Backend)
		for _, name := range slices.Sorted(maps.Keys(c.RequestsPerVM)) {
			fmt.Fprintf(b, " %s %.1f;", name, c.RequestsPerVM[name])
		}
		fmt.Fprintf(b, " backend calls per VM:")
		for _, name := range slices.Sorted(maps.Keys(c.CallsPerVM)) {
			fmt.Fprintf(b, " %s %.1f;", name, c.CallsPerVM[name])
		}
		fmt.Fprintln(b)
	}
}

// writeVCenterCalls lists vCenter calls per VM by method, counted as how
// says.
func writeVCenterCalls(b *strings.Builder, how string, calls map[string]float64) {
	fmt.Fprintf(b, "\n\nvCenter calls per VM %s (%.1f in all):", how, totalRequests(calls))
	for _, name := range slices.Sorted(maps.Keys(calls)) {
		fmt.Fprintf(b, " %s %.1f;", name, calls[name])
	}
}
