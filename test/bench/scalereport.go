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
	"fmt"
	"io"
	"maps"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"
)

// The projection's target: the fleet the issue sizes banlieue for.
const (
	projectedVMs      = 100_000
	projectedVCenters = 50
	// etcdQuota is etcd's default space quota (--quota-backend-bytes).
	etcdQuota = 8 << 30
)

// Projection is one projected figure and the measured rows it comes from.
type Projection struct {
	Name  string `json:"name"`
	Value string `json:"value"`
	Basis string `json:"basis"`
}

// extrapolate continues the line through (na, va) and (nb, vb) to n; a
// falling line is taken as flat at vb (a cost measured to shrink with size
// is not promised to keep shrinking).
func extrapolate(na, va, nb, vb, n float64) float64 {
	if nb == na {
		return vb / nb * n
	}
	slope := max(0, (vb-va)/(nb-na))
	return vb + slope*(n-nb)
}

func mib(b float64) string { return fmt.Sprintf("%.0f MiB", b/(1<<20)) }

// projection turns the measured rows into figures at projectedVMs over
// projectedVCenters.
func (sr *scaleReport) projection() []Projection {
	if len(sr.stored) == 0 {
		return nil
	}
	b := sr.stored[len(sr.stored)-1]
	a := b
	if len(sr.stored) > 1 {
		a = sr.stored[len(sr.stored)-2]
	}
	N := float64(projectedVMs)
	na, nb := float64(a.VMs), float64(b.VMs)
	line := func(f func(Stored) float64) float64 { return extrapolate(na, f(a), nb, f(b), N) }
	between := fmt.Sprintf("stored %d → %d, extrapolated", a.VMs, b.VMs)
	at := fmt.Sprintf("stored %d", b.VMs)
	// etcd reuses the pages its compactions free, so the growth in use per
	// VM reads low at some sizes: the largest of the rows is projected.
	var etcdPerVM float64
	for _, s := range sr.stored {
		etcdPerVM = max(etcdPerVM, s.EtcdPerVM)
	}
	etcdStored := etcdPerVM * N
	out := []Projection{
		{"etcd data in use for the VirtualMachines", fmt.Sprintf("%s (%.1f%% of the 8 GiB default quota)", mib(etcdStored), 100*etcdStored/etcdQuota), "stored: the largest etcd B/VM of the rows × 100 000"},
		{"banlieue heap", mib(line(func(s Stored) float64 { return s.Heap })), between},
		{"banlieue RSS", mib(line(func(s Stored) float64 { return s.RSS })), between},
		{"of which the watch cache", mib(b.WatchCachePerVM * N), at + ": watch cache B/VM × 100 000"},
		{"list of every VM from the watch cache (JSON)", fmt.Sprintf("%.0f ms, %s", line(func(s Stored) float64 { return s.ListCacheJSON }), mib(line(func(s Stored) float64 { return float64(s.ListBytes) }))), between},
		{"list of every VM from the watch cache (protobuf)", fmt.Sprintf("%.0f ms", line(func(s Stored) float64 { return s.ListCacheProtobuf })), between},
		{fmt.Sprintf("paged list (limit %d), watch cache / none", pageSize), fmt.Sprintf("%.0f ms / %.0f ms", line(func(s Stored) float64 { return s.ListPaged }), line(func(s Stored) float64 { return s.ListPagedNoCache })), between},
		{"/placement p99 (GET p99)", fmt.Sprintf("%.2f ms (%.2f ms)", line(func(s Stored) float64 { return s.PlacementP99 }), line(func(s Stored) float64 { return s.GetP99 })), between},
	}
	single, operator := sr.fleetOf(fleetSingle), sr.fleetOf(fleetOperator)
	if f := single; f != nil {
		prov := f.RSSPerVM["provider-vsphere"]
		provBase := f.RSS["provider-vsphere"] - prov*float64(f.VMs)
		fleetRow := fmt.Sprintf("fleet, %s: %d VMs on %d vCenters", f.Mode, f.VMs, f.VCenters)
		out = append(out,
			Projection{"etcd growth from provisioning them (machines, Events, revisions before compaction)", fmt.Sprintf("%s (%.1f%% of the quota)", mib(f.EtcdPerVM*N), 100*f.EtcdPerVM*N/etcdQuota), fleetRow + ": etcd B/VM × 100 000"},
			Projection{"vSphere provider RSS, one process for all 50 vCenters", mib(provBase + prov*N), fleetRow + ": provider RSS at start + RSS/VM × 100 000"},
			Projection{"control-plane CPU to provision them, one provider process", fmt.Sprintf("%.1f core-hours", controlPlaneCPU(f.CPUms)*N/3.6e6), fleetRow + ": CPU ms/VM of every server, controller and provider × 100 000"},
			Projection{"time to provision them at the measured rate (these cores), one provider process", fmt.Sprintf("%.1f h", N/f.ReadyPerS/3600), fleetRow + ": Ready/s"},
		)
	}
	if f := operator; f != nil {
		perVCenter := N / projectedVCenters
		g := groupProviders(f)
		fleetRow := fmt.Sprintf("fleet, %s: %d VMs on %d vCenters", f.Mode, f.VMs, f.VCenters)
		// Each process's RSS is its share of the base (the RSS at the end
		// less the growth) and, per machine it serves, the growth per VM.
		baseEach := (g.rss - g.rssPerVM*float64(f.VMs)) / float64(max(1, g.processes))
		each := baseEach + g.rssPerVM*perVCenter
		out = append(out,
			Projection{"vSphere provider RSS per Provider's process (2 000 machines each)", mib(each),
				fleetRow + ": the processes' RSS at the end less their growth, per process, + growth per VM × 2 000"},
			Projection{"vSphere providers' RSS, 50 processes", mib(projectedVCenters * each), fleetRow + ": the row above × 50"},
			Projection{"control-plane CPU to provision them, one provider process per Provider", fmt.Sprintf("%.1f core-hours", controlPlaneCPU(f.CPUms)*N/3.6e6), fleetRow + ": CPU ms/VM of every server, controller and provider × 100 000"},
			Projection{"time to provision them at the measured rate (these cores), one provider process per Provider", fmt.Sprintf("%.1f h", N/f.ReadyPerS/3600), fleetRow + ": Ready/s"},
		)
	}
	return out
}

func (sr *scaleReport) markdown() string {
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# banlieue at scale\n\n")
	fmt.Fprintf(&b, "Run %s on %s: %d cores, %s, %s/%s. Sizes %v, %d simulated vCenters, %d VMs provisioned over them; etcd with fsync. Took %s.\n\n",
		sr.started.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		sr.cfg.Sizes, sr.cfg.VCenters, sr.cfg.FleetVMs, time.Since(sr.started).Round(time.Second))
	writeFleetComparison(&b, sr.fleets)
	for _, f := range sr.fleets {
		writeFleet(&b, f)
	}
	fmt.Fprintf(&b, "## Stored VMs\n\nVMs created on banlieue's port with no controller running; banlieue restarted before each memory reading (once with `--watch-cache=false`, then as shipped), so every figure is what holding the VMs costs. Lists and /placement on banlieue's port; list times are p50, the paged list walks every VM (limit %d, consistent).\n\n", pageSize)
	fmt.Fprintf(&b, "| VMs | create/s | etcd value (B) | etcd B/VM | heap (MiB) | heap B/VM | watch cache B/VM | RSS (MiB) | RSS B/VM | list cache JSON ms | list cache protobuf ms | list JSON MiB | paged ms | paged, no cache ms | GET p50/p99 ms | /placement p50/p99 ms | errors |\n")
	fmt.Fprintf(&b, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
	for _, s := range sr.stored {
		fmt.Fprintf(&b, "| %d | %.0f | %d | %.0f | %.0f | %.0f | %.0f | %.0f | %.0f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f / %.2f | %.2f / %.2f | %d |\n",
			s.VMs, s.CreatePerS, s.ValueBytes, s.EtcdPerVM, s.Heap/(1<<20), s.HeapPerVM, s.WatchCachePerVM, s.RSS/(1<<20), s.RSSPerVM,
			s.ListCacheJSON, s.ListCacheProtobuf, float64(s.ListBytes)/(1<<20), s.ListPaged, s.ListPagedNoCache, s.GetP50, s.GetP99, s.PlacementP50, s.PlacementP99, s.Errors)
	}
	if p := sr.projection(); len(p) > 0 {
		fmt.Fprintf(&b, "\n## Projection to %d VMs over %d vCenters\n\nEach figure from the rows above; docs/scale.md says what changes at that size.\n\n| figure | projected | from |\n|---|---|---|\n", projectedVMs, projectedVCenters)
		for _, x := range p {
			fmt.Fprintf(&b, "| %s | %s | %s |\n", x.Name, x.Value, x.Basis)
		}
	}
	return b.String()
}

// write prints the Markdown report and stores it with the raw results as
// scale.md and scale.json.
func (sr *scaleReport) write(stdout io.Writer, dir string) error {
	return writeReport(stdout, dir, "scale", sr.markdown(), map[string]any{
		"started": sr.started, "cores": runtime.NumCPU(), "go": runtime.Version(), "sizes": sr.cfg.Sizes,
		"fleets": sr.fleets, "stored": sr.stored, "projection": sr.projection(),
	})
}

// problems names every failed request of the stored steps.
func (sr *scaleReport) problems() error {
	var out []string
	for _, s := range sr.stored {
		if s.Errors > 0 {
			out = append(out, fmt.Sprintf("stored %d: %d failed requests", s.VMs, s.Errors))
		}
	}
	if len(out) > 0 {
		return fmt.Errorf("%s", strings.Join(out, "; "))
	}
	return nil
}

// fleetOf is the fleet run in mode, or nil.
func (sr *scaleReport) fleetOf(mode string) *Fleet {
	for _, f := range sr.fleets {
		if f.Mode == mode {
			return f
		}
	}
	return nil
}

// providerGroup is a fleet's vSphere provider processes taken together.
type providerGroup struct {
	processes            int
	rss, rssPerVM, cpuMs float64
}

// groupProviders sums the fleet's vSphere provider processes.
func groupProviders(f *Fleet) providerGroup {
	var g providerGroup
	for name, v := range f.RSS {
		if strings.HasPrefix(name, "provider-vsphere") {
			g.processes++
			g.rss += v
			g.rssPerVM += f.RSSPerVM[name]
			g.cpuMs += f.CPUms[name]
		}
	}
	return g
}

// writeFleetComparison puts the fleet's modes side by side.
func writeFleetComparison(b *strings.Builder, fleets []*Fleet) {
	if len(fleets) == 0 {
		return
	}
	fmt.Fprintf(b, "## Fleet: %d VMs over %d vCenters, each way the providers run\n\n", fleets[0].VMs, fleets[0].VCenters)
	fmt.Fprintf(b, "The same vcsims (1 datacenter, 2 clusters each), Providers and core controller; the VMs deleted between the runs. Processes, not pods, so CPU and RSS are read per process; every provider runs as the static install's identity (`banlieue-provider-vsphere`) with `--leader-elect`.\n\n")
	fmt.Fprintf(b, "| figure |")
	for _, f := range fleets {
		fmt.Fprintf(b, " %s |", f.Mode)
	}
	fmt.Fprintf(b, "\n|---|")
	for range fleets {
		fmt.Fprintf(b, "---:|")
	}
	row := func(name string, v func(f *Fleet) string) {
		fmt.Fprintf(b, "\n| %s |", name)
		for _, f := range fleets {
			fmt.Fprintf(b, " %s |", v(f))
		}
	}
	row("all Ready (s)", func(f *Fleet) string { return fmt.Sprintf("%.1f", f.SecondsToReady) })
	row("Ready/s", func(f *Fleet) string { return fmt.Sprintf("%.2f", f.ReadyPerS) })
	row("create to Ready p50 / p99 (s)", func(f *Fleet) string { return fmt.Sprintf("%.1f / %.1f", f.ToReadyP50, f.ToReadyP99) })
	row("requests per VM", func(f *Fleet) string { return fmt.Sprintf("%.2f", totalRequests(f.RequestsPerVM)) })
	row("vCenter calls per VM (served, vcsims' count)", func(f *Fleet) string { return fmt.Sprintf("%.2f", totalRequests(f.VCenterServedPerVM)) })
	row("vCenter sessions open at the end / Providers", func(f *Fleet) string { return fmt.Sprintf("%d / %d", f.Sessions.Open, f.Sessions.Providers) })
	row("vCenter logins, reconnects", func(f *Fleet) string { return fmt.Sprintf("%.0f, %.0f", f.Sessions.Logins, f.Sessions.Reconnects) })
	row("control-plane CPU ms per VM", func(f *Fleet) string { return fmt.Sprintf("%.1f", controlPlaneCPU(f.CPUms)) })
	for _, name := range []string{"kube-apiserver", "etcd", "banlieue", "controller-0", "kube-controller-manager"} {
		row(name+" CPU ms per VM", func(f *Fleet) string { return fmt.Sprintf("%.1f", f.CPUms[name]) })
	}
	row("vSphere providers CPU ms per VM (processes)", func(f *Fleet) string {
		g := groupProviders(f)
		return fmt.Sprintf("%.1f (%d)", g.cpuMs, g.processes)
	})
	row("vSphere providers RSS after, MiB (per process)", func(f *Fleet) string {
		g := groupProviders(f)
		return fmt.Sprintf("%.0f (%.0f)", g.rss/(1<<20), g.rss/(1<<20)/float64(max(1, g.processes)))
	})
	for _, name := range []string{"kube-apiserver", "etcd", "banlieue", "controller-0"} {
		row(name+" RSS after (MiB)", func(f *Fleet) string { return fmt.Sprintf("%.0f", f.RSS[name]/(1<<20)) })
	}
	fmt.Fprintf(b, "\n\n")
}

// writeFleet is one mode's detail: each Provider's rate, each process,
// the requests and vCenter calls by kind.
func writeFleet(b *strings.Builder, f *Fleet) {
	fmt.Fprintf(b, "### Fleet, %s\n\nAll Ready in %.1f s (%.1f VMs/s); etcd grew %.0f B per provisioned VM.\n\n", f.Mode, f.SecondsToReady, f.ReadyPerS, f.EtcdPerVM)
	fmt.Fprintf(b, "| Provider | VMs | half Ready (s) | all Ready (s) | Ready/s |\n|---|---:|---:|---:|---:|\n")
	for _, p := range f.PerProvider {
		fmt.Fprintf(b, "| %s | %d | %.1f | %.1f | %.2f |\n", p.Provider, p.VMs, p.MedianSeconds, p.Seconds, p.ReadyPerS)
	}
	fmt.Fprintf(b, "\n| process | RSS after (MiB) | RSS growth per VM (B) | CPU ms per VM |\n|---|---:|---:|---:|\n")
	for _, name := range slices.Sorted(maps.Keys(f.RSS)) {
		fmt.Fprintf(b, "| %s | %.0f | %.0f | %.1f |\n", name, f.RSS[name]/(1<<20), f.RSSPerVM[name], f.CPUms[name])
	}
	fmt.Fprintf(b, "\nRequests per VM (%.1f in all; \"(banlieue)\": proxied to banlieue, the user's create left out): ", totalRequests(f.RequestsPerVM))
	for _, k := range slices.Sorted(maps.Keys(f.RequestsPerVM)) {
		fmt.Fprintf(b, "%s %.1f; ", k, f.RequestsPerVM[k])
	}
	writeVCenterCalls(b, "by the providers", f.VCenterCallsPerVM)
	writeVCenterCalls(b, "served, as the vcsims counted them", f.VCenterServedPerVM)
	fmt.Fprintf(b, "\n\n")
}
