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
package virtualmachine

import (
	"context"
	"fmt"
	"sync"

	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/placement"
)

// listWatcher is the VirtualMachine storage as /placement reads it.
type listWatcher interface {
	rest.Lister
	rest.Watcher
}

// schedulingLoad counts the scheduled VMs of every Provider and failure
// domain, kept current by a watch of the server's own storage (its watch
// cache), so /placement costs a few map lookups instead of a list of every
// VM per request. Its store keeps a scheduled VM's few fields (name,
// labels, where it is placed) and nothing of an unscheduled one.
type schedulingLoad struct {
	source listWatcher
	store  *placedStore
	once   sync.Once
	stop   context.CancelFunc
}

func newSchedulingLoad(source listWatcher) *schedulingLoad {
	return &schedulingLoad{source: source, store: newPlacedStore()}
}

// start begins watching on first use: the storage serves only once the
// server runs.
func (l *schedulingLoad) start() {
	l.once.Do(func() {
		var ctx context.Context
		ctx, l.stop = context.WithCancel(context.Background())
		ctx = genericapirequest.WithNamespace(ctx, metav1.NamespaceAll)
		lw := &cache.ListWatch{
			ListWithContextFunc: func(_ context.Context, o metav1.ListOptions) (runtime.Object, error) {
				in, err := internalListOptions(o)
				if err != nil {
					return nil, err
				}
				return l.source.List(ctx, in)
			},
			WatchFuncWithContext: func(_ context.Context, o metav1.ListOptions) (watch.Interface, error) {
				in, err := internalListOptions(o)
				if err != nil {
					return nil, err
				}
				w, err := l.source.Watch(ctx, in)
				if err != nil {
					return nil, err
				}
				// The watch cache shares its objects wrapped with their
				// encodings; the store wants the objects.
				return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
					if c, ok := ev.Object.(runtime.CacheableObject); ok {
						ev.Object = c.GetObject()
					}
					return ev, true
				}), nil
			},
		}
		go cache.NewReflector(lw, &banlieue.VirtualMachine{}, l.store, 0).RunWithContext(ctx)
	})
}

// Synced tells whether the watch started and has listed every VM.
func (l *schedulingLoad) Synced() bool { return l.store.HasSynced() }

// Stop ends the watch.
func (l *schedulingLoad) Stop() {
	if l.stop != nil {
		l.stop()
	}
}

// Load is the number of scheduled VMs per placement.Key, leaving out the
// VM with UID self (its own placement must not count against it).
func (l *schedulingLoad) Load(ctx context.Context, self types.UID) (map[string]int, error) {
	l.start()
	if !cache.WaitForCacheSync(ctx.Done(), l.store.HasSynced) {
		return nil, fmt.Errorf("the scheduling load is not known yet: %w", ctx.Err())
	}
	return l.store.placed.Counts(self), nil
}

// Peers are the scheduled VMs of namespace other than self, as
// anti-affinity sees them.
func (l *schedulingLoad) Peers(ctx context.Context, namespace string, self types.UID) ([]placement.Peer, error) {
	l.start()
	if !cache.WaitForCacheSync(ctx.Done(), l.store.HasSynced) {
		return nil, fmt.Errorf("the scheduling load is not known yet: %w", ctx.Err())
	}
	return l.store.peers(namespace, self), nil
}

// placedStore is the scheduling load's reflector store: of every
// scheduled VM its peer entry (labels shared with the watched object,
// not copied) and its placement counted in placed; an unscheduled VM
// leaves nothing behind.
type placedStore struct {
	placed *placement.Load
	mu     sync.RWMutex
	// byNamespace holds the scheduled VMs of each namespace by UID.
	byNamespace map[string]map[types.UID]placement.Peer
	synced      bool
}

var _ cache.ReflectorStore = &placedStore{}

func newPlacedStore() *placedStore {
	return &placedStore{placed: placement.NewLoad(), byNamespace: map[string]map[types.UID]placement.Peer{}}
}

func (s *placedStore) Add(obj any) error    { s.set(obj); return nil }
func (s *placedStore) Update(obj any) error { s.set(obj); return nil }
func (s *placedStore) Resync() error        { return nil }

func (s *placedStore) Delete(obj any) error {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if vm, ok := obj.(*banlieue.VirtualMachine); ok {
		s.mu.Lock()
		s.forgetLocked(vm.Namespace, vm.UID)
		s.mu.Unlock()
	}
	return nil
}

// Replace starts over from a full list (the reflector's relist).
func (s *placedStore) Replace(list []any, _ string) error {
	s.mu.Lock()
	for ns, vms := range s.byNamespace {
		for uid := range vms {
			s.forgetLocked(ns, uid)
		}
	}
	s.synced = true
	s.mu.Unlock()
	for _, obj := range list {
		s.set(obj)
	}
	return nil
}

// HasSynced tells whether the first full list was taken in.
func (s *placedStore) HasSynced() bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.synced
}

// set records obj's VM as it is now: placed, or forgotten.
func (s *placedStore) set(obj any) {
	vm, ok := obj.(*banlieue.VirtualMachine)
	if !ok {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	sched := vm.Status.Scheduled
	if sched == nil {
		s.forgetLocked(vm.Namespace, vm.UID)
		return
	}
	provider := placement.QualifiedProvider(vm.Namespace, sched.Provider)
	vms := s.byNamespace[vm.Namespace]
	if vms == nil {
		vms = map[types.UID]placement.Peer{}
		s.byNamespace[vm.Namespace] = vms
	}
	vms[vm.UID] = placement.Peer{Name: vm.Name, Labels: vm.Labels, Provider: provider, FailureDomain: sched.FailureDomain}
	s.placed.Set(vm.UID, placement.Key(provider, sched.FailureDomain))
}

func (s *placedStore) forgetLocked(namespace string, uid types.UID) {
	if vms := s.byNamespace[namespace]; vms != nil {
		delete(vms, uid)
		if len(vms) == 0 {
			delete(s.byNamespace, namespace)
		}
	}
	s.placed.Delete(uid)
}

// peers are the scheduled VMs of namespace but self.
func (s *placedStore) peers(namespace string, self types.UID) []placement.Peer {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := make([]placement.Peer, 0, len(s.byNamespace[namespace]))
	for uid, p := range s.byNamespace[namespace] {
		if uid != self {
			out = append(out, p)
		}
	}
	return out
}

func internalListOptions(o metav1.ListOptions) (*metainternalversion.ListOptions, error) {
	out := &metainternalversion.ListOptions{}
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&o, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
