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
package pvesim

import (
	"fmt"
	"sort"
	"time"
)

// task is a worker: it runs for the simulator's TaskDelay, then its effect
// runs (under the lock) and it stops with exitstatus OK, or the effect's
// error text, or an injected failure.
type task struct {
	upid, node, typ, id, user string
	pid, pstart               int
	start, end                time.Time
	effect                    func() string
	// work, when set, is background work (a download) the task waits
	// for: it ends at its time or when work is closed, the later.
	work chan struct{}
	// undo cleans up when an injected failure stops the task before its
	// effect (an upload's file, a created VM).
	undo  func()
	done  bool
	exit  string
	lines []string
}

// startTask starts a task of typ on node for object id and returns its UPID.
func (s *Simulator) startTask(node, typ, id string, effect func() string) string {
	s.seq++
	now := time.Now()
	// PVE writes the caller, a token as USER@REALM!TOKENID, as the
	// task's user.
	user := s.callerID()
	t := &task{node: node, typ: typ, id: id, user: user, pid: 4000 + s.seq, pstart: 100000 + s.seq, start: now,
		end: now.Add(s.opts.TaskDelay), effect: effect}
	t.upid = fmt.Sprintf("UPID:%s:%08X:%08X:%08X:%s:%s:%s:", node, t.pid, t.pstart, now.Unix(), typ, id, user)
	t.lines = []string{fmt.Sprintf("task %s started", typ)}
	s.tasks[t.upid] = t
	return t.upid
}

// tick completes, in start order, every task whose time has come.
func (s *Simulator) tick(now time.Time) {
	var due []*task
	for _, t := range s.tasks {
		if t.done || now.Before(t.end) {
			continue
		}
		if t.work != nil {
			select {
			case <-t.work:
			default:
				continue // still downloading
			}
			if t.end.Before(now) {
				t.end = now
			}
		}
		due = append(due, t)
	}
	sort.Slice(due, func(i, j int) bool { return due[i].pid < due[j].pid })
	for _, t := range due {
		t.done = true
		if msg, ok := s.failing[t.typ]; ok {
			t.exit = msg
			if t.effect != nil {
				// A failed task undoes what it began (a clone's
				// half-made VM); effects see the failure through it.
				s.failed(t)
			}
		} else if t.effect != nil {
			t.exit = t.effect()
		}
		if t.exit == "" {
			t.exit = "OK"
		}
		if t.exit != "OK" {
			t.lines = append(t.lines, "TASK ERROR: "+t.exit)
		} else {
			t.lines = append(t.lines, "TASK OK")
		}
	}
}

// failed cleans up after an injected failure: a clone's target goes.
func (s *Simulator) failed(t *task) {
	if t.undo != nil {
		t.undo()
	}
	if t.typ != "qmclone" {
		return
	}
	for id, v := range s.vms {
		if v.lock == "clone" && v.cloneTask == t.upid {
			s.dropVolumes(v)
			delete(s.vms, id)
		}
	}
}

func (t *task) status() map[string]any {
	st := map[string]any{"upid": t.upid, "node": t.node, "pid": t.pid, "pstart": t.pstart, "starttime": t.start.Unix(),
		"type": t.typ, "id": t.id, "user": t.user, "status": "running"}
	if t.done {
		st["status"] = "stopped"
		st["exitstatus"] = t.exit
		st["endtime"] = t.end.Unix()
	}
	return st
}

func (t *task) log() []map[string]any {
	out := make([]map[string]any, 0, len(t.lines))
	for i, l := range t.lines {
		out = append(out, map[string]any{"n": i + 1, "t": l})
	}
	return out
}
