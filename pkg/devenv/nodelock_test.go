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

package devenv

import (
	"path/filepath"
	"testing"
	"time"
)

// TestNodesTakeTurns: a second environment's node waits while the first
// holds the machine, and starts once it stops.
func TestNodesTakeTurns(t *testing.T) {
	nodeLock = filepath.Join(t.TempDir(), "node.lock")
	first, err := lockNode()
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *node)
	go func() {
		f, err := lockNode()
		if err != nil {
			t.Error(err)
		}
		got <- &node{lock: f}
	}()
	select {
	case <-got:
		t.Fatal("the second node started while the first held the machine")
	case <-time.After(200 * time.Millisecond):
	}
	(&node{lock: first}).unlock()
	select {
	case second := <-got:
		second.unlock()
	case <-time.After(10 * time.Second):
		t.Fatal("the second node never started after the first stopped")
	}
}
