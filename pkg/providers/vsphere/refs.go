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
	"sync"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/vim25/types"
)

// refTTL bounds how long a looked-up reference is reused: an object
// renamed or replaced under the same name (a template an image pipeline
// swapped) is seen within it, as the inventory walk sees changes within
// its resync.
const refTTL = time.Minute

// refCache remembers the managed object references a session looked up by
// name or instance UUID (datacenters, templates, pools, folders,
// datastores, the machines themselves). A lookup by name walks a folder's
// children, and a VM folder holds every machine: without the cache each
// build listed them all, several times. Entries expire after refTTL and
// all are dropped when vCenter says an object is gone (forget), so a stale
// reference costs one failed reconcile at most.
type refCache struct {
	mu      sync.Mutex
	entries map[string]refEntry
	now     func() time.Time
}

type refEntry struct {
	obj cachedObject
	at  time.Time
}

// cachedObject is an object's reference and its inventory path (which
// govmomi's object types carry for the paths they build from it).
type cachedObject struct {
	ref  types.ManagedObjectReference
	path string
	// value is what was read of the object once, where a lookup caches
	// more than its reference (a network's NIC backing, a template's
	// devices); read only.
	value any
}

// objectOf is what a lookup found, as cached.
func objectOf(o interface {
	Reference() types.ManagedObjectReference
}, path string) cachedObject {
	return cachedObject{ref: o.Reference(), path: path}
}

func newRefCache() *refCache {
	return &refCache{entries: map[string]refEntry{}, now: time.Now}
}

// get returns key's reference, from fetch when not cached or expired;
// a failed fetch caches nothing.
func (r *refCache) get(key string, fetch func() (cachedObject, error)) (cachedObject, error) {
	r.mu.Lock()
	e, ok := r.entries[key]
	r.mu.Unlock()
	if ok && r.now().Sub(e.at) < refTTL {
		return e.obj, nil
	}
	obj, err := fetch()
	if err != nil {
		return cachedObject{}, err
	}
	r.put(key, obj)
	return obj, nil
}

// put remembers key's object (one learned another way: a clone's result).
func (r *refCache) put(key string, obj cachedObject) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.entries[key] = refEntry{obj: obj, at: r.now()}
}

// forget drops every entry: some object is gone, which may be any.
func (r *refCache) forget() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.entries)
}

// forgetIfGone drops every entry when err says an object is gone, and
// returns err.
func (r *refCache) forgetIfGone(err error) error {
	if err != nil && fault.Is(err, &types.ManagedObjectNotFound{}) {
		r.forget()
	}
	return err
}

// drop forgets key alone (a machine destroyed).
func (r *refCache) drop(key string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.entries, key)
}
