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
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux this runs on).
const clockTicks = 100

// cpuTime is the user+system CPU time a process has used.
func cpuTime(pid int) (time.Duration, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name (field 2) may hold spaces; fields after its ')' are fixed.
	s := string(raw)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+2:])
	// utime and stime are fields 14 and 15 of the whole line, 12 and 13 here.
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("parsing /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / clockTicks, nil
}

// rss is a process's resident set size in bytes.
func rss(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// cpuMeter measures the CPU each process spends over a phase.
type cpuMeter struct {
	pids  map[string]int
	start map[string]time.Duration
}

func startCPU(pids map[string]int) *cpuMeter {
	m := &cpuMeter{pids: pids, start: map[string]time.Duration{}}
	for name, pid := range pids {
		m.start[name], _ = cpuTime(pid)
	}
	return m
}

// perOp is each process's CPU milliseconds per operation since start.
func (m *cpuMeter) perOp(ops int) map[string]float64 {
	out := map[string]float64{}
	for name, pid := range m.pids {
		end, err := cpuTime(pid)
		if err != nil || ops == 0 {
			continue
		}
		out[name] = float64(end-m.start[name]) / float64(time.Millisecond) / float64(ops)
	}
	return out
}

// Result is one measured phase.
type Result struct {
	Path    string             `json:"path"`
	Verb    string             `json:"verb"`
	Round   int                `json:"round"`
	Ops     int                `json:"ops"`
	Seconds float64            `json:"seconds"`
	OpsPerS float64            `json:"opsPerSecond"`
	P50ms   float64            `json:"p50ms"`
	P99ms   float64            `json:"p99ms"`
	CPUms   map[string]float64 `json:"cpuMsPerOp,omitempty"`
	Bytes   int                `json:"bytes,omitempty"`
	Errors  int                `json:"errors"`
}

// latencies collects per-operation durations from many goroutines.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) add(d time.Duration) {
	l.mu.Lock()
	l.d = append(l.d, d)
	l.mu.Unlock()
}

// quantile q (0..1) in milliseconds.
func (l *latencies) quantile(q float64) float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	i := int(q * float64(len(l.d)-1))
	return float64(l.d[i]) / float64(time.Millisecond)
}

// run calls op for 0..n-1 from c goroutines and measures the phase: wall
// time, per-op latency and every process's CPU.
func run(ctx context.Context, pids map[string]int, path, verb string, round, n, c int, op func(ctx context.Context, i int) error) Result {
	var (
		next   atomic.Int64
		errs   atomic.Int64
		lat    latencies
		wg     sync.WaitGroup
		firstE atomic.Value
	)
	cpu := startCPU(pids)
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				t0 := time.Now()
				if err := op(ctx, i); err != nil {
					errs.Add(1)
					firstE.CompareAndSwap(nil, err.Error())
					continue
				}
				lat.add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	if e := firstE.Load(); e != nil {
		fmt.Fprintf(os.Stderr, "bench: %s %s: %d errors, first: %s\n", path, verb, errs.Load(), e)
	}
	return Result{
		Path: path, Verb: verb, Round: round, Ops: n, Seconds: elapsed.Seconds(),
		OpsPerS: float64(n-int(errs.Load())) / elapsed.Seconds(),
		P50ms:   lat.quantile(0.50), P99ms: lat.quantile(0.99),
		CPUms: cpu.perOp(n), Errors: int(errs.Load()),
	}
}

// runInterleaved runs n operations from c clients cycling through kinds
// (operation i is of kind kinds[i%len(kinds)], on item i/len(kinds)), so
// every kind meets the same moments of the servers (a collection, a
// compaction) and their tails compare; run one kind after another and the
// later kinds met a busier server. One Result per kind: latencies and
// errors (no CPU: a process's CPU cannot be told apart by kind).
func runInterleaved(ctx context.Context, path string, round, n, c int, kinds []string, ops map[string]func(ctx context.Context, i int) error) []Result {
	lat := make([]latencies, len(kinds))
	errs := make([]atomic.Int64, len(kinds))
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < c; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				k := i % len(kinds)
				t0 := time.Now()
				if err := ops[kinds[k]](ctx, i/len(kinds)); err != nil {
					errs[k].Add(1)
					continue
				}
				lat[k].add(time.Since(t0))
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(start).Seconds()
	out := make([]Result, len(kinds))
	for k, kind := range kinds {
		ops := n / len(kinds)
		if k < n%len(kinds) {
			ops++
		}
		out[k] = Result{Path: path, Verb: kind, Round: round, Ops: ops, Seconds: elapsed,
			OpsPerS: float64(ops-int(errs[k].Load())) / elapsed,
			P50ms:   lat[k].quantile(0.50), P99ms: lat[k].quantile(0.99), Errors: int(errs[k].Load())}
	}
	return out
}
