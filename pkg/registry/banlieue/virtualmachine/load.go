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
// VM per request. It keeps only what counting needs of each VM.
type schedulingLoad struct {
	source listWatcher
	// placed counts placements as the scheduler's does (placement.Load).
	placed *placement.Load
	once   sync.Once
	stop   context.CancelFunc
	store  cache.Indexer
	synced cache.InformerSynced
	// mu guards synced for Synced, which may run before start.
	mu sync.Mutex
}

func newSchedulingLoad(source listWatcher) *schedulingLoad {
	return &schedulingLoad{source: source, placed: placement.NewLoad()}
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
				// encodings; the informer wants the objects.
				return watch.Filter(w, func(ev watch.Event) (watch.Event, bool) {
					if c, ok := ev.Object.(runtime.CacheableObject); ok {
						ev.Object = c.GetObject()
					}
					return ev, true
				}), nil
			},
		}
		store, informer := cache.NewInformerWithOptions(cache.InformerOptions{
			ListerWatcher: lw,
			ObjectType:    &banlieue.VirtualMachine{},
			Handler:       l.placed.Handler(placedAt, nil),
			Indexers:      cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc},
			Transform:     keepSchedulingOnly,
		})
		l.mu.Lock()
		l.store, l.synced = store.(cache.Indexer), informer.HasSynced
		l.mu.Unlock()
		go informer.RunWithContext(ctx)
	})
}

// Synced tells whether the watch started and has listed every VM.
func (l *schedulingLoad) Synced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.synced != nil && l.synced()
}

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
	if !cache.WaitForCacheSync(ctx.Done(), l.synced) {
		return nil, fmt.Errorf("the scheduling load is not known yet: %w", ctx.Err())
	}
	return l.placed.Counts(self), nil
}

// Peers are the scheduled VMs of namespace other than self, as
// anti-affinity sees them.
func (l *schedulingLoad) Peers(ctx context.Context, namespace string, self types.UID) ([]placement.Peer, error) {
	l.start()
	if !cache.WaitForCacheSync(ctx.Done(), l.synced) {
		return nil, fmt.Errorf("the scheduling load is not known yet: %w", ctx.Err())
	}
	objs, err := l.store.ByIndex(cache.NamespaceIndex, namespace)
	if err != nil {
		return nil, err
	}
	var out []placement.Peer
	for _, o := range objs {
		vm := o.(*banlieue.VirtualMachine)
		if s := vm.Status.Scheduled; s != nil && vm.UID != self {
			out = append(out, placement.Peer{Name: vm.Name, Labels: vm.Labels, Provider: placement.QualifiedProvider(vm.Namespace, s.Provider), FailureDomain: s.FailureDomain})
		}
	}
	return out, nil
}

// placedAt is a watched VM's UID and where it is placed, as
// placement.Load counts it ("" when it is not).
func placedAt(obj any) (types.UID, string, bool) {
	vm, ok := obj.(*banlieue.VirtualMachine)
	if !ok {
		return "", "", false
	}
	key := ""
	if s := vm.Status.Scheduled; s != nil {
		key = placement.Key(placement.QualifiedProvider(vm.Namespace, s.Provider), s.FailureDomain)
	}
	return vm.UID, key, true
}

// keepSchedulingOnly drops everything counting and anti-affinity do not
// need, so the tracker holds a few dozen bytes per VM (and its labels),
// not a second copy of each.
func keepSchedulingOnly(obj any) (any, error) {
	vm, ok := obj.(*banlieue.VirtualMachine)
	if !ok {
		return obj, nil // a tombstone
	}
	return &banlieue.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: vm.Namespace, UID: vm.UID, ResourceVersion: vm.ResourceVersion, Labels: vm.Labels},
		Status:     banlieue.VirtualMachineStatus{Scheduled: vm.Status.Scheduled},
	}, nil
}

func internalListOptions(o metav1.ListOptions) (*metainternalversion.ListOptions, error) {
	out := &metainternalversion.ListOptions{}
	if err := metainternalversion.Convert_v1_ListOptions_To_internalversion_ListOptions(&o, out, nil); err != nil {
		return nil, err
	}
	return out, nil
}
