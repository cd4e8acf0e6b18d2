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
	"errors"
	"sync/atomic"
	"testing"
	"time"
)

// TestRunInterleaved: operations alternate between the kinds, each kind's
// items are its own (0, 1, 2 … for each), and errors and latencies are
// counted per kind: a kind that always fails counts every one of its
// operations as an error and no other kind's, and a slow kind's tail is
// its own.
func TestRunInterleaved(t *testing.T) {
	var fastItems, failed atomic.Int64
	ops := map[string]func(context.Context, int) error{
		"fast": func(_ context.Context, i int) error { fastItems.Add(int64(i)); return nil },
		"slow": func(context.Context, int) error { time.Sleep(20 * time.Millisecond); return nil },
		"bad":  func(context.Context, int) error { failed.Add(1); return errors.New("crafted") },
	}
	res := runInterleaved(context.Background(), "X", 1, 30, 3, []string{"fast", "slow", "bad"}, ops)
	byKind := map[string]Result{}
	for _, r := range res {
		byKind[r.Verb] = r
	}
	if got := fastItems.Load(); got != 45 { // items 0..9
		t.Errorf("the fast kind's items sum to %d, want 45 (0 to 9, each once)", got)
	}
	if byKind["bad"].Errors != 10 || failed.Load() != 10 || byKind["fast"].Errors != 0 || byKind["slow"].Errors != 0 {
		t.Errorf("errors: bad %d (of %d calls), fast %d, slow %d; want 10, 0, 0", byKind["bad"].Errors, failed.Load(), byKind["fast"].Errors, byKind["slow"].Errors)
	}
	if byKind["slow"].P99ms < 20 || byKind["fast"].P99ms >= 20 {
		t.Errorf("p99: slow %.2f ms, fast %.2f ms; want the slow kind's own 20 ms tail", byKind["slow"].P99ms, byKind["fast"].P99ms)
	}
	if byKind["fast"].Ops != 10 || byKind["bad"].Ops != 10 {
		t.Errorf("ops per kind %d, %d; want 10", byKind["fast"].Ops, byKind["bad"].Ops)
	}
}
