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
package vsphere

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/task"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/types"
)

// The task waits of a session share one read: every task in flight is
// read in one RetrievePropertiesEx on the session's own property
// collector, soon after it starts and then less and less often. govmomi's
// Task.WaitForResult makes and destroys a collector and a filter per wait
// (four calls per task on top of its polls), the vCenter load CAPV's users
// meet at scale. A filter on TaskManager.recentTask shared by every wait
// was tried: govmomi's simulator deadlocks under it (its TaskManager's
// lock taken in both orders with the collector's), so every suite on
// vcsim would stall; a read per round of the tasks in flight has no such
// part, and costs one call per round whatever the number of tasks.
const (
	// taskFirstRead is how long after a task starts it is first read:
	// the tasks started meanwhile by other waits share that read.
	taskFirstRead = 100 * time.Millisecond
	// taskMaxInterval bounds the interval between reads, which doubles
	// while no new task arrives: a long clone costs a read every few
	// seconds, not one per progress change.
	taskMaxInterval = 2 * time.Second
)

// taskProperties are what a wait needs of a task: its end, and its outcome.
var taskProperties = []string{"info.state", "info.error", "info.result"}

// taskWatch reads the session's tasks in flight for their waits. The zero
// value is not usable: newTaskWatch.
type taskWatch struct {
	c *vim25.Client
	// ended is the session's end: the reads stop with it.
	ended context.Context

	mu sync.Mutex
	// waits are the tasks waited for, by reference value.
	waits   map[string]*taskWait
	running bool
	// arrived wakes the reader for a new task.
	arrived chan struct{}
	// first is taskFirstRead (shorter in tests).
	first time.Duration
}

// taskWait is one task's outcome, shared by its waiters.
type taskWait struct {
	ref     types.ManagedObjectReference
	waiters int
	done    chan struct{}
	info    *types.TaskInfo
	err     error
}

func newTaskWatch(c *vim25.Client, ended context.Context) *taskWatch {
	return &taskWatch{c: c, ended: ended, waits: map[string]*taskWait{}, arrived: make(chan struct{}, 1), first: taskFirstRead}
}

// watchOf is the task watch of the session c belongs to, or nil (a client
// not made by Connect).
func watchOf(c *vim25.Client) *taskWatch {
	if s, ok := c.RoundTripper.(*counting); ok {
		return s.tasks
	}
	return nil
}

// await waits for the task to end and returns its outcome, as govmomi's
// Task.WaitForResult does: a task that failed returns its info and a
// task.Error carrying its fault.
func (w *taskWatch) await(ctx context.Context, ref types.ManagedObjectReference) (*types.TaskInfo, error) {
	tw := w.join(ref)
	defer w.leave(tw)
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-tw.done:
		return tw.info, tw.err
	}
}

// join registers a waiter of ref and starts the reader if it is idle.
func (w *taskWatch) join(ref types.ManagedObjectReference) *taskWait {
	w.mu.Lock()
	defer w.mu.Unlock()
	tw, ok := w.waits[ref.Value]
	if !ok {
		tw = &taskWait{ref: ref, done: make(chan struct{})}
		w.waits[ref.Value] = tw
		select {
		case w.arrived <- struct{}{}:
		default:
		}
	}
	tw.waiters++
	if !w.running {
		w.running = true
		go w.read()
	}
	return tw
}

// leave drops a waiter; a task nobody waits for any more is not read.
func (w *taskWatch) leave(tw *taskWait) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tw.waiters--; tw.waiters == 0 && w.waits[tw.ref.Value] == tw {
		delete(w.waits, tw.ref.Value)
	}
}

// read reads the tasks waited for, in rounds, until none is left or the
// session ends.
func (w *taskWatch) read() {
	interval := w.first
	timer := time.NewTimer(interval)
	defer timer.Stop()
	for {
		select {
		case <-w.ended.Done():
			w.finishAll(w.ended.Err())
			return
		case <-w.arrived:
			// A new task: read soon, with those that arrive meanwhile.
			interval = w.first
			timer.Reset(interval)
			continue
		case <-timer.C:
		}
		refs := w.inFlight()
		if len(refs) == 0 && w.stopIfIdle() {
			return
		}
		if len(refs) > 0 {
			w.round(refs)
		}
		interval = min(2*interval, taskMaxInterval)
		timer.Reset(interval)
	}
}

// inFlight are the references of the tasks waited for.
func (w *taskWatch) inFlight() []types.ManagedObjectReference {
	w.mu.Lock()
	defer w.mu.Unlock()
	refs := make([]types.ManagedObjectReference, 0, len(w.waits))
	for _, tw := range w.waits {
		refs = append(refs, tw.ref)
	}
	return refs
}

// stopIfIdle marks the reader stopped when no task is waited for (a wait
// that joins later starts another).
func (w *taskWatch) stopIfIdle() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.waits) > 0 {
		return false
	}
	w.running = false
	return true
}

// round reads refs in one call (readTasks) and ends the waits of the
// tasks that ended; a task whose own read failed (one vCenter no longer
// knows) ends its waits with the fault.
func (w *taskWatch) round(refs []types.ManagedObjectReference) {
	ctx, cancel := context.WithTimeout(w.ended, callTimeout)
	defer cancel()
	tasks, failed, err := readTasks(ctx, w.c, refs, taskProperties)
	switch {
	case err != nil && w.ended.Err() != nil:
		// The session ended: read exits next.
		return
	case err != nil:
		failed = map[string]error{}
		for _, ref := range refs {
			failed[ref.Value] = err
		}
	}
	for _, t := range tasks {
		if ended(t.Info.State) {
			info, err := outcome(t.Info)
			w.finish(t.Self.Value, info, err)
		}
	}
	for ref, err := range failed {
		w.finish(ref, nil, fmt.Errorf("reading task %s: %w", ref, err))
	}
}

// finish ends the waits of ref with its outcome.
func (w *taskWatch) finish(ref string, info *types.TaskInfo, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if tw, ok := w.waits[ref]; ok {
		tw.info, tw.err = info, err
		close(tw.done)
		delete(w.waits, ref)
	}
}

// finishAll ends every wait with err and stops the reader.
func (w *taskWatch) finishAll(err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for ref, tw := range w.waits {
		tw.err = fmt.Errorf("waiting for task %s: the vCenter session ended: %w", ref, err)
		close(tw.done)
		delete(w.waits, ref)
	}
	w.running = false
}

// ended tells that a task in state s will not change any more.
func ended(s types.TaskInfoState) bool {
	return s == types.TaskInfoStateSuccess || s == types.TaskInfoStateError
}

// outcome is what Task.WaitForResult returns for a task that ended.
func outcome(info types.TaskInfo) (*types.TaskInfo, error) {
	if info.State == types.TaskInfoStateError {
		if info.Error == nil {
			return &info, errors.New("the task failed without a fault")
		}
		return &info, task.Error{LocalizedMethodFault: info.Error, Description: info.Description}
	}
	return &info, nil
}

// waitTask waits for t through its session's watch; a task of a client
// Connect did not make waits as govmomi does.
func waitTask(ctx context.Context, t *object.Task) (*types.TaskInfo, error) {
	if w := watchOf(t.Client()); w != nil {
		return w.await(ctx, t.Reference())
	}
	return t.WaitForResult(ctx)
}
