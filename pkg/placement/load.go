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

package placement

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"
)

// Load counts the placed VMs of every Provider and failure domain (by
// Key), kept current from a watch of VirtualMachines: the input both the
// scheduler and /placement weigh failure domains by. Counting is O(1) per
// event and reading O(failure domains), so placing one VM never lists
// every VM.
type Load struct {
	mu    sync.RWMutex
	byUID map[types.UID]string
	count map[string]int
}

// NewLoad returns an empty count.
func NewLoad() *Load { return &Load{byUID: map[types.UID]string{}, count: map[string]int{}} }

// Set records where uid is placed: key, or nowhere ("").
func (l *Load) Set(uid types.UID, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if old, ok := l.byUID[uid]; ok {
		if old == key {
			return
		}
		l.drop(old)
		delete(l.byUID, uid)
	}
	if key != "" {
		l.byUID[uid] = key
		l.count[key]++
	}
}

// Handler keeps l current from a VirtualMachine informer's events, the
// one way the scheduler and /placement feed it: placedAt reads an object's
// UID and Key ("" when not placed; false for anything but a VM), and gone,
// when set, hears of every VM deleted.
func (l *Load) Handler(placedAt func(obj any) (types.UID, string, bool), gone func(types.UID)) cache.ResourceEventHandlerFuncs {
	set := func(obj any) {
		if uid, key, ok := placedAt(obj); ok {
			l.Set(uid, key)
		}
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    set,
		UpdateFunc: func(_, obj any) { set(obj) },
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if uid, _, ok := placedAt(obj); ok {
				l.Delete(uid)
				if gone != nil {
					gone(uid)
				}
			}
		},
	}
}

// Delete forgets uid (its VM is gone).
func (l *Load) Delete(uid types.UID) { l.Set(uid, "") }

func (l *Load) drop(key string) {
	if l.count[key]--; l.count[key] <= 0 {
		delete(l.count, key)
	}
}

// Placed is where uid is placed, if it is.
func (l *Load) Placed(uid types.UID) (string, bool) {
	l.mu.RLock()
	defer l.mu.RUnlock()
	key, ok := l.byUID[uid]
	return key, ok
}

// Counts is the number of placed VMs per key, leaving out self (a VM's own
// placement must not count against it).
func (l *Load) Counts(self types.UID) map[string]int {
	l.mu.RLock()
	defer l.mu.RUnlock()
	out := make(map[string]int, len(l.count))
	for k, n := range l.count {
		out[k] = n
	}
	if key, ok := l.byUID[self]; ok {
		if out[key]--; out[key] <= 0 {
			delete(out, key)
		}
	}
	return out
}
