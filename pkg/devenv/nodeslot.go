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
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// Real nodes of environments that go test runs at once (one per test
// package) each take a slot: a lock file, a bridge with its own subnet and
// gateway, and a cgroup root for its pods, so that no kubelet sees another's
// pods as orphans and no tear-down removes another's bridge or rules. What
// the kubelets set machine-wide (their iptables chains, a few sysctls) the
// slots share: the first node in records the machine's state, and the last
// one out puts it back and checks that the machine is as the first found
// it; each node checks on its way out that nothing of its own is left.

// NodeSlotsEnv is the environment variable that sets how many real nodes
// may run on the machine at once (defaultNodeSlots when unset).
const NodeSlotsEnv = "BANLIEUE_NODE_SLOTS"

// defaultNodeSlots matches go test's default -p on the 2-core machines
// CI runs on: one node per test package running.
const defaultNodeSlots = 2

// nodeLockDir holds the slots' lock files and the state the first node
// recorded (tests point it elsewhere).
var nodeLockDir = "/run"

// slot is a real node's share of the machine.
type slot struct {
	index int
	// lock is held while the node runs; the kernel releases it when the
	// process ends, however it ends.
	lock *os.File
}

// bridge is the pods' bridge, subnet and gateway their network and the
// host as pods see it: 10.88/16 for slot 0, 10.89/16 for slot 1, ...
// (below the Service range, 10.96/12).
func (s *slot) bridge() string  { return "cni" + strconv.Itoa(s.index) }
func (s *slot) subnet() string  { return fmt.Sprintf("10.%d.0.0/16", 88+s.index) }
func (s *slot) gateway() string { return fmt.Sprintf("10.%d.0.1", 88+s.index) }

// cgroupRoot is the cgroup the node's kubelet puts every pod under.
func (s *slot) cgroupRoot() string { return "/banlieue-node-" + strconv.Itoa(s.index) }

// slotLock is slot i's lock file; slot 0's is the one the machine's single
// node took before there were slots, so older checkouts still take turns.
func slotLock(i int) string {
	if i == 0 {
		return filepath.Join(nodeLockDir, "banlieue-node.lock")
	}
	return filepath.Join(nodeLockDir, "banlieue-node-"+strconv.Itoa(i)+".lock")
}

// nodeSlots is how many nodes may run at once here.
func nodeSlots() (int, error) {
	v := os.Getenv(NodeSlotsEnv)
	if v == "" {
		return defaultNodeSlots, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 8 {
		return 0, fmt.Errorf("%s=%q: want a number from 1 to 8", NodeSlotsEnv, v)
	}
	return n, nil
}

// takeSlot takes the first free one of slots, waiting (and saying so once)
// while all are taken.
func takeSlot(ctx context.Context, slots int) (*slot, error) {
	var taken *slot
	said := false
	err := wait.PollUntilContextCancel(ctx, time.Second, true, func(context.Context) (bool, error) {
		for i := range slots {
			f, err := tryLock(slotLock(i))
			if err != nil {
				return false, err
			}
			if f != nil {
				taken = &slot{index: i, lock: f}
				return true, nil
			}
		}
		if !said {
			klog.InfoS("Waiting for other environments' real nodes to stop", "slots", slots, "locks", nodeLockDir)
			said = true
		}
		return false, nil
	})
	return taken, err
}

// tryLock locks path without waiting: the open file holding the lock, or
// nil when another holds it.
func tryLock(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, nil
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	return f, nil
}

func (s *slot) release() {
	if s != nil && s.lock != nil {
		_ = s.lock.Close() // closing the descriptor releases the lock
		s.lock = nil
	}
}

// othersRunning tells whether a node holds any slot but s (of up to 8, so
// a change of NodeSlotsEnv between packages still sees them).
func (s *slot) othersRunning() (bool, error) {
	for i := range 8 {
		if i == s.index {
			continue
		}
		held, err := heldByOther(slotLock(i))
		if err != nil || held {
			return held, err
		}
	}
	return false, nil
}

// heldByOther tells whether another holds the lock at path, without
// making a lock file for a slot never used.
func heldByOther(path string) (bool, error) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	f, err := tryLock(path)
	if err != nil {
		return false, err
	}
	if f == nil {
		return true, nil
	}
	_ = f.Close()
	return false, nil
}

// shared runs f holding the machine-wide lock that orders nodes' arrivals
// and departures, told whether another node runs.
func (s *slot) shared(f func(others bool) error) error {
	path := filepath.Join(nodeLockDir, "banlieue-nodes.lock")
	l, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return err
	}
	defer l.Close()
	if err := syscall.Flock(int(l.Fd()), syscall.LOCK_EX); err != nil {
		return fmt.Errorf("locking %s: %w", path, err)
	}
	others, err := s.othersRunning()
	if err != nil {
		return err
	}
	return f(others)
}

// firstState is where the first node in records the machine's state.
func firstState() string { return filepath.Join(nodeLockDir, "banlieue-nodes-before.json") }

// arrive returns the machine's state before the first of the nodes now
// running started: read now when s is the only one (and recorded for the
// others), else the one recorded.
func (s *slot) arrive(read func() (MachineState, error)) (MachineState, error) {
	var before MachineState
	err := s.shared(func(others bool) error {
		if others {
			data, err := os.ReadFile(firstState())
			if err == nil {
				return json.Unmarshal(data, &before)
			}
			if !errors.Is(err, os.ErrNotExist) {
				return err
			}
			// A node of a checkout without slots runs: it checks the
			// machine itself; this one reads it as it is now.
		}
		var err error
		if before, err = read(); err != nil {
			return err
		}
		data, err := json.Marshal(before)
		if err != nil {
			return err
		}
		return os.WriteFile(firstState(), data, 0o600)
	})
	return before, err
}

// leave calls last when s is the last node running, holding the
// machine-wide lock, and forgets the first node's state afterwards.
func (s *slot) leave(last func()) error {
	return s.shared(func(others bool) error {
		if others {
			return nil
		}
		last()
		if err := os.Remove(firstState()); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	})
}
