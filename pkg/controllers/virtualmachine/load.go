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
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/placement"
)

// placedAt is a VM's UID and where it is placed, as placement.Load counts
// it ("" when it is not).
func placedAt(obj any) (types.UID, string, bool) {
	vm, ok := obj.(*v1alpha1.VirtualMachine)
	if !ok {
		return "", "", false
	}
	key := ""
	if s := vm.Status.Scheduled; s != nil {
		key = placement.Key(placement.QualifiedProvider(vm.Namespace, s.Provider), s.FailureDomain)
	}
	return vm.UID, key, true
}

// watchLoad keeps r.placed current from the shared VM informer's events,
// so a placement decision reads a count per failure domain instead of
// listing every VM (which made scheduling quadratic). The handler is added
// once the manager runs: an embedded controller's API server (this
// process) serves banlieue.io only then, and the informer needs its
// mapping. Until the handler has seen the initial list, load fails and the
// VM is requeued.
func (r *Reconciler) watchLoad(mgr ctrl.Manager) error {
	r.placed = placement.NewLoad()
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		var inf crcache.Informer
		if err := wait.PollUntilContextCancel(ctx, time.Second, true, func(ctx context.Context) (bool, error) {
			var err error
			inf, err = mgr.GetCache().GetInformer(ctx, &v1alpha1.VirtualMachine{}, crcache.BlockUntilSynced(false))
			if err != nil {
				log.FromContext(ctx).V(1).Info("Waiting for the VirtualMachine informer", "err", err)
			}
			return err == nil, nil
		}); err != nil {
			return nil // stopping
		}
		reg, err := inf.AddEventHandler(r.placed.Handler(placedAt, r.forget))
		if err != nil {
			return fmt.Errorf("counting the scheduling load: %w", err)
		}
		r.loadSynced.Store(&reg)
		<-ctx.Done()
		return nil
	}))
}

// forget drops what this controller assumed of a deleted VM.
func (r *Reconciler) forget(uid types.UID) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.assumed, uid)
}

// load is the number of placed VMs per failure domain — those the cache
// shows plus those this controller placed that it does not show yet — and,
// when vm has anti-affinity terms, the placed VMs of its namespace.
func (r *Reconciler) load(ctx context.Context, vm *v1alpha1.VirtualMachine) (map[string]int, []placement.Peer, error) {
	// The informer may be synced before this handler saw its initial list.
	if reg := r.loadSynced.Load(); reg == nil || !(*reg).HasSynced() {
		return nil, nil, fmt.Errorf("the scheduling load has not seen every VirtualMachine yet")
	}
	load := r.placed.Counts(vm.UID)
	r.mu.Lock()
	pending := map[types.UID]assumption{}
	for uid, a := range r.assumed {
		if _, seen := r.placed.Placed(uid); seen {
			delete(r.assumed, uid) // the cache caught up
			continue
		}
		if uid != vm.UID {
			load[placement.Key(a.provider, a.failureDomain)]++
			pending[uid] = a
		}
	}
	r.mu.Unlock()
	if len(vm.Spec.Placement.AntiAffinityTerms()) == 0 {
		return load, nil, nil
	}
	peers, err := r.peers(ctx, vm, pending)
	return load, peers, err
}

// peers are the placed (or assumed) VMs of vm's namespace, from the cache.
func (r *Reconciler) peers(ctx context.Context, vm *v1alpha1.VirtualMachine, pending map[types.UID]assumption) ([]placement.Peer, error) {
	var vms v1alpha1.VirtualMachineList
	// Read-only: the cache's objects are not copied.
	if err := r.Client.List(ctx, &vms, client.InNamespace(vm.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	var peers []placement.Peer
	for _, other := range vms.Items {
		if other.UID == vm.UID {
			continue
		}
		a := pending[other.UID]
		if s := other.Status.Scheduled; s != nil {
			a = assumption{provider: placement.QualifiedProvider(other.Namespace, s.Provider), failureDomain: s.FailureDomain}
		}
		if a.provider != "" {
			peers = append(peers, placement.Peer{Name: other.Name, Labels: other.Labels, Provider: a.provider, FailureDomain: a.failureDomain})
		}
	}
	return peers, nil
}
