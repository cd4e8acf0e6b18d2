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
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

// WatchResult is one fan-out measurement: every watcher sees every write.
// Latency runs from the write's acknowledgement to each delivery (0 when
// the event arrived before the writer saw its response), and from the
// write's start to each delivery.
type WatchResult struct {
	Path         string  `json:"path"`
	Watchers     int     `json:"watchers"`
	Writes       int     `json:"writes"`
	Delivered    int     `json:"delivered"`
	P50ms        float64 `json:"p50ms"`
	P99ms        float64 `json:"p99ms"`
	FromIssueP50 float64 `json:"fromIssueP50ms"`
	FromIssueP99 float64 `json:"fromIssueP99ms"`
}

// arrivals records when each watcher saw each write.
type arrivals struct {
	mu   sync.Mutex
	at   [][]time.Time // [watcher][write]
	seen int
}

func (a *arrivals) saw(w, j int) {
	a.mu.Lock()
	if a.at[w][j].IsZero() {
		a.at[w][j] = time.Now()
		a.seen++
	}
	a.mu.Unlock()
}

func (a *arrivals) count() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.seen
}

func (h *harness) watchFanOut(ctx context.Context, r *report) error {
	for _, name := range []string{h.a.Name(), h.b.Name(), h.c.Name(), h.d.Name()} {
		res, err := h.fanOut(ctx, name)
		if err != nil {
			return fmt.Errorf("watch %s: %w", name, err)
		}
		logf("  %-12s %d/%d delivered  after ack p50 %6.2f ms  p99 %7.2f ms; after issue p50 %6.2f ms  p99 %7.2f ms",
			res.Path, res.Delivered, res.Watchers*res.Writes, res.P50ms, res.P99ms, res.FromIssueP50, res.FromIssueP99)
		r.watches = append(r.watches, res)
	}
	// Clean-up, not a measurement: the VMs written would otherwise be
	// provisioned with the provisioning phase's own once the controller
	// starts (they were: 1 400 machines for its 1 000 VMs, every per-VM
	// figure 1.4 times too high). One range delete per server in etcd.
	return h.deleteInEtcd(ctx, "/virtualmachines/bench-watch-", 2)
}

func (h *harness) fanOut(ctx context.Context, pathName string) (WatchResult, error) {
	w, m := h.cfg.Watchers, h.cfg.WatchEvents
	ns := "bench-watch-" + strings.ToLower(pathName[:1])
	if err := h.namespace(ctx, ns); err != nil {
		return WatchResult{}, err
	}
	arr := &arrivals{at: make([][]time.Time, w)}
	for i := range arr.at {
		arr.at[i] = make([]time.Time, m)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	index := func(name string) int {
		var j int
		if _, err := fmt.Sscanf(name[strings.LastIndexByte(name, '/')+1:], "vm-%06d", &j); err != nil || j >= m {
			return -1
		}
		return j
	}
	var write func(ctx context.Context, j int) error
	switch pathName {
	case h.d.Name():
		prefix := "/bench/" + ns + "/"
		for i := 0; i < w; i++ {
			ch := h.d.client.Watch(wctx, prefix, clientv3.WithPrefix())
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				for resp := range ch {
					for _, ev := range resp.Events {
						if j := index(string(ev.Kv.Key)); j >= 0 && ev.Type == clientv3.EventTypePut {
							arr.saw(i, j)
						}
					}
				}
			}(i)
		}
		write = func(ctx context.Context, j int) error { return h.d.create(ctx, ns, j) }
	default:
		p := map[string]*apiPath{h.a.Name(): h.a, h.b.Name(): h.b, h.c.Name(): h.c}[pathName]
		for i := 0; i < w; i++ {
			wi, err := p.client.Resource(p.gvr).Namespace(ns).Watch(wctx, metav1.ListOptions{})
			if err != nil {
				return WatchResult{}, err
			}
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				defer wi.Stop()
				for {
					select {
					case <-wctx.Done():
						return
					case ev, ok := <-wi.ResultChan():
						if !ok {
							return
						}
						if u, isObj := ev.Object.(*unstructured.Unstructured); isObj && ev.Type == watch.Added {
							if j := index(u.GetName()); j >= 0 {
								arr.saw(i, j)
							}
						}
					}
				}
			}(i)
		}
		write = func(ctx context.Context, j int) error { return p.create(ctx, ns, j) }
	}
	// etcd watches are registered asynchronously: give every watcher a moment.
	time.Sleep(time.Second)
	acked, issued := make([]time.Time, m), make([]time.Time, m)
	for j := 0; j < m; j++ {
		issued[j] = time.Now()
		if err := write(ctx, j); err != nil {
			return WatchResult{}, err
		}
		acked[j] = time.Now()
	}
	deadline := time.Now().Add(time.Minute)
	for arr.count() < w*m && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	wg.Wait()
	var lat, fromIssue latencies
	for i := range arr.at {
		for j, t := range arr.at[i] {
			if !t.IsZero() {
				lat.add(max(0, t.Sub(acked[j])))
				fromIssue.add(t.Sub(issued[j]))
			}
		}
	}
	return WatchResult{Path: pathName, Watchers: w, Writes: m, Delivered: arr.count(), P50ms: lat.quantile(0.5), P99ms: lat.quantile(0.99),
		FromIssueP50: fromIssue.quantile(0.5), FromIssueP99: fromIssue.quantile(0.99)}, nil
}
