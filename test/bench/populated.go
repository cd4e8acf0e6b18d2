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
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"
)

// Memory is what one server holds per stored object.
type Memory struct {
	Server        string  `json:"server"`
	Objects       int     `json:"objects"`
	RSSPerObject  float64 `json:"rssBytesPerObject"`
	HeapPerObject float64 `json:"heapBytesPerObject"`
}

// ListResult is one list measurement.
type ListResult struct {
	Path     string  `json:"path"`
	Mode     string  `json:"mode"`
	Encoding string  `json:"encoding"`
	Offered  bool    `json:"offered"`
	P50ms    float64 `json:"p50ms"`
	Bytes    int     `json:"bytes"`
	// Note replaces the figures of a list not measured.
	Note string `json:"note,omitempty"`
}

const memNamespace = "bench-mem"

// populated stores N VMs in banlieue and N CRs in kube-apiserver, measuring
// each server's memory growth, then lists them every way the servers offer
// and compares /resolved and /placement with GET; then deletes them.
func (h *harness) populated(ctx context.Context, r *report) error {
	if err := h.namespace(ctx, memNamespace); err != nil {
		return err
	}
	for _, step := range []struct {
		server string
		p      *apiPath
	}{{"banlieue", h.b}, {"kube-apiserver", h.c}} {
		m, err := h.memoryOf(ctx, step.server, step.p)
		if err != nil {
			return err
		}
		logf("  %s: %.0f B RSS, %.0f B heap per stored object", m.Server, m.RSSPerObject, m.HeapPerObject)
		r.memory = append(r.memory, m)
	}
	reps := max(3, min(10, 20000/h.cfg.N))
	for _, p := range []struct {
		name  string
		cfg   *restclient.Config
		group string
	}{{h.a.Name(), h.admin, "banlieue.io"}, {h.b.Name(), h.direct, "banlieue.io"}, {h.c.Name(), h.admin, BenchGroup}} {
		for _, mode := range []string{"cache", "consistent"} {
			for _, enc := range []string{"application/json", "application/yaml", "application/cbor", "application/vnd.kubernetes.protobuf"} {
				n := reps
				if enc != "application/json" {
					// Other encodings of N objects take seconds (YAML) and
					// read the same data: one sample, from the cache only.
					if mode != "cache" {
						continue
					}
					n = 1
					if p.name == h.a.Name() && enc == "application/yaml" {
						// banlieue's YAML (B) passed through the proxy: 15 s
						// of the run that says nothing B does not.
						r.lists = append(r.lists, ListResult{Path: p.name, Mode: mode, Encoding: enc, Note: "not measured (B's, proxied)"})
						continue
					}
				}
				lr, err := h.list(ctx, p.cfg, p.group, memNamespace, mode, enc, n)
				if err != nil {
					return fmt.Errorf("listing through %s: %w", p.name, err)
				}
				lr.Path = p.name
				if lr.Offered {
					logf("  list %-12s %-10s %-36s p50 %7.1f ms  %9d bytes", p.name, mode, enc, lr.P50ms, lr.Bytes)
				}
				r.lists = append(r.lists, lr)
			}
		}
	}
	if err := h.subresources(ctx, r); err != nil {
		return err
	}
	// Clean-up, not a measurement: one range delete per server in etcd
	// (both servers see the deletions through their etcd watches) instead
	// of 2N API deletes, which took about a minute of the run.
	if err := h.deleteInEtcd(ctx, "/virtualmachines/"+memNamespace+"/", 2); err != nil {
		return err
	}
	time.Sleep(h.cfg.Settle) // the servers' watch caches take in the deletions
	return nil
}

// deleteInEtcd deletes every etcd key under the prefixes that contain
// segment (one per server storing it), and checks there were want of them.
func (h *harness) deleteInEtcd(ctx context.Context, segment string, want int) error {
	resp, err := h.etcd.Get(ctx, "/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return err
	}
	prefixes := map[string]bool{}
	for _, kv := range resp.Kvs {
		if k := string(kv.Key); strings.Contains(k, segment) {
			prefixes[k[:strings.Index(k, segment)+len(segment)]] = true
		}
	}
	if len(prefixes) != want {
		return fmt.Errorf("found %d etcd prefixes holding %s, want %d: %v", len(prefixes), segment, want, prefixes)
	}
	for p := range prefixes {
		if _, err := h.etcd.Delete(ctx, p, clientv3.WithPrefix()); err != nil {
			return fmt.Errorf("deleting %s: %w", p, err)
		}
	}
	return nil
}

// memoryOf creates N objects through p and returns how much the server's
// RSS and Go heap grew per object, after settling.
func (h *harness) memoryOf(ctx context.Context, server string, p *apiPath) (Memory, error) {
	cfg := h.admin
	if server == "banlieue" {
		cfg = h.direct
	}
	time.Sleep(h.cfg.Settle)
	rss0, _ := rss(h.pids[server])
	heap0, err := heapInUse(ctx, cfg)
	if err != nil {
		return Memory{}, err
	}
	res := run(ctx, h.pids, p.Name(), "create", 0, h.cfg.N, h.cfg.C, func(ctx context.Context, i int) error { return p.create(ctx, memNamespace, i) })
	if res.Errors > 0 {
		return Memory{}, fmt.Errorf("%d creates failed", res.Errors)
	}
	time.Sleep(h.cfg.Settle)
	rss1, _ := rss(h.pids[server])
	heap1, err := heapInUse(ctx, cfg)
	if err != nil {
		return Memory{}, err
	}
	if h.cfg.Profile != "" && h.cfg.ProfilePhases["populated"] {
		heapProfile(ctx, cfg, h.cfg.Profile, "populated-heap-"+server)
	}
	n := float64(h.cfg.N)
	return Memory{Server: server, Objects: h.cfg.N, RSSPerObject: float64(rss1-rss0) / n, HeapPerObject: float64(heap1-heap0) / n}, nil
}

// heapInUse reads go_memstats_heap_inuse_bytes from a server's /metrics,
// after making it collect garbage (a heap profile with gc=1 runs
// runtime.GC first), so what is measured is live data, not GC timing.
func heapInUse(ctx context.Context, cfg *restclient.Config) (float64, error) {
	if _, _, err := rawGet(ctx, cfg, "/debug/pprof/heap?gc=1", "*/*"); err != nil {
		return 0, fmt.Errorf("forcing a GC: %w", err)
	}
	body, _, err := rawGet(ctx, cfg, "/metrics", "text/plain")
	if err != nil {
		return 0, err
	}
	s := bufio.NewScanner(strings.NewReader(string(body)))
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		if f := strings.Fields(s.Text()); len(f) == 2 && f[0] == "go_memstats_heap_inuse_bytes" {
			return strconv.ParseFloat(f[1], 64)
		}
	}
	return 0, fmt.Errorf("no go_memstats_heap_inuse_bytes in /metrics")
}

// rawGet GETs path with accept, returning the body and status.
func rawGet(ctx context.Context, cfg *restclient.Config, path, accept string) ([]byte, int, error) {
	hc, err := restclient.HTTPClientFor(cfg)
	if err != nil {
		return nil, 0, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(cfg.Host, "/")+path, nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusNotAcceptable && resp.StatusCode != http.StatusUnsupportedMediaType {
		err = fmt.Errorf("GET %s (%s): %s: %.200s", path, accept, resp.Status, body)
	}
	return body, resp.StatusCode, err
}

// list measures the list of the objects stored in ns: from the watch cache
// (resourceVersion=0) or consistent, in one encoding. Offered is false when
// the server does not speak it.
func (h *harness) list(ctx context.Context, cfg *restclient.Config, group, ns, mode, accept string, reps int) (ListResult, error) {
	path := "/apis/" + group + "/v1alpha1/namespaces/" + ns + "/virtualmachines"
	if mode == "cache" {
		path += "?resourceVersion=0"
	}
	lr := ListResult{Mode: mode, Encoding: accept}
	var lat latencies
	for i := 0; i < reps; i++ {
		t0 := time.Now()
		body, status, err := rawGet(ctx, cfg, path, accept)
		if err != nil {
			return lr, err
		}
		if status != http.StatusOK {
			return lr, nil
		}
		lat.add(time.Since(t0))
		lr.Bytes = len(body)
	}
	lr.Offered, lr.P50ms = true, lat.quantile(0.5)
	return lr, nil
}

// subresources compares /resolved and /placement with a plain GET of the
// same VMs through the aggregator, in two rounds (G,R,P then P,R,G): each
// kind alone for its rate and CPU, then the three interleaved request by
// request for their tails (p99s of runs one after another compared the
// later runs' busier moments, not the paths).
func (h *harness) subresources(ctx context.Context, r *report) error {
	get := func(sub ...string) func(ctx context.Context, i int) error {
		return func(ctx context.Context, i int) error {
			_, err := h.a.client.Resource(h.a.gvr).Namespace(memNamespace).Get(ctx, vmName(i%h.cfg.N), metav1.GetOptions{}, sub...)
			return err
		}
	}
	kinds := map[string]func(ctx context.Context, i int) error{"get": get(), "resolved": get("resolved"), "placement": get("placement")}
	for round, order := range [][]string{{"get", "resolved", "placement"}, {"placement", "resolved", "get"}} {
		for _, k := range order {
			res := run(ctx, h.pids, h.a.Name(), k, round+1, h.cfg.Samples, h.cfg.C, kinds[k])
			if res.Errors > 0 {
				return fmt.Errorf("%s: %d errors", k, res.Errors)
			}
			logf("  %-9s round %d: %8.0f ops/s  p50 %6.2f ms  p99 %7.2f ms", k, round+1, res.OpsPerS, res.P50ms, res.P99ms)
			r.subresources = append(r.subresources, res)
		}
		for _, res := range runInterleaved(ctx, h.a.Name(), round+1, len(order)*h.cfg.Samples, h.cfg.C, order, kinds) {
			if res.Errors > 0 {
				return fmt.Errorf("%s interleaved: %d errors", res.Verb, res.Errors)
			}
			logf("  %-9s round %d, interleaved: p50 %6.2f ms  p99 %7.2f ms", res.Verb, round+1, res.P50ms, res.P99ms)
			r.subresourceTails = append(r.subresourceTails, res)
		}
	}
	return nil
}
