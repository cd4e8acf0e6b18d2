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

package ippool

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/ipam"
)

// statusReconciler counts each pool's addresses from its reservations: a
// reservation made or freed by either replica, or a pool edited, counts
// again.
type statusReconciler struct {
	Client client.Client
}

func (r *statusReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("ippool-status").
		For(&infrav1.IPPool{}).
		Watches(&infrav1.IPAddressReservation{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.(*infrav1.IPAddressReservation).Spec.Pool}}}
		})).
		Complete(conflict.Requeue(r))
}

func (r *statusReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	pool := &infrav1.IPPool{}
	if err := r.Client.Get(ctx, req.NamespacedName, pool); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var reservations infrav1.IPAddressReservationList
	if err := r.Client.List(ctx, &reservations, client.MatchingLabels{PoolLabel: pool.Name}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the reservations of IPPool %s: %w", pool.Name, err)
	}
	total := 0
	if parsed, err := ipam.Parse(pool.Spec.Addresses, pool.Spec.ExcludedAddresses, pool.Spec.Gateway); err == nil {
		total = parsed.Size()
	}
	base := pool.DeepCopy()
	pool.Status.Total, pool.Status.Used, pool.Status.Free = total, len(reservations.Items), max(total-len(reservations.Items), 0)
	cond := metav1.Condition{Type: "Exhausted", Status: metav1.ConditionFalse, Reason: "FreeAddresses",
		Message: fmt.Sprintf("%d of %d addresses free", pool.Status.Free, total), ObservedGeneration: pool.Generation}
	if pool.Status.Free == 0 {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonPoolExhausted
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	if err := r.Client.Status().Patch(ctx, pool, client.MergeFrom(base)); err != nil {
		return ctrl.Result{}, fmt.Errorf("counting IPPool %s: %w", pool.Name, err)
	}
	return ctrl.Result{}, nil
}
