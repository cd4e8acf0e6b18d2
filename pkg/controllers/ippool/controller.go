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

// Package ippool is banlieue's in-cluster IP pool provider for Cluster
// API's IPAM contract: an IPAddressClaim whose poolRef names an IPPool
// (infrastructure.banlieue.io) gets an IPAddress of the pool, named as the
// claim and owned by it, so deleting the claim frees the address. Claims are
// served one at a time against every address of the pool the cache holds
// plus those handed out since, so no address is given twice.
package ippool

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/ipam"
)

// PoolLabel on an IPAddress names the IPPool it came from.
const PoolLabel = "infrastructure.banlieue.io/ippool"

// Reasons of a claim's Ready condition and the pool's.
const (
	ReasonAllocated     = "Allocated"
	ReasonPoolNotFound  = "PoolNotFound"
	ReasonPoolInvalid   = "PoolInvalid"
	ReasonPoolExhausted = "PoolExhausted"
)

// exhaustedPoll looks again at a claim its pool could not serve.
const exhaustedPoll = 10 * time.Second

// Reconciler serves IPAddressClaims of banlieue's IPPools.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder

	mu sync.Mutex
	// handedOut are addresses given since the cache last showed them, by
	// pool: the claim they went to.
	handedOut map[string]map[string]types.NamespacedName
}

func ours(o client.Object) bool {
	c, ok := o.(*ipamv1.IPAddressClaim)
	return ok && c.Spec.PoolRef.APIGroup == infrav1.GroupName && c.Spec.PoolRef.Kind == infrav1.IPPoolKind
}

// SetupWithManager registers the controller: one worker, claims of our
// pools only; an address deleted (its claim gone) frees it for the claims
// a pool could not serve, which are polled.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.handedOut = map[string]map[string]types.NamespacedName{}
	return ctrl.NewControllerManagedBy(mgr).
		Named("ippool").
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(ours))).
		Watches(&infrav1.IPPool{}, handler.EnqueueRequestsFromMapFunc(r.claimsOf)).
		Complete(conflict.Requeue(r))
}

func (r *Reconciler) claimsOf(ctx context.Context, pool client.Object) []reconcile.Request {
	var claims ipamv1.IPAddressClaimList
	if err := r.Client.List(ctx, &claims); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range claims.Items {
		if ours(&c) && c.Spec.PoolRef.Name == pool.GetName() && c.Status.AddressRef.Name == "" {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
		}
	}
	return out
}

// Reconcile gives one claim its address.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ours(claim) || !claim.DeletionTimestamp.IsZero() || claim.Status.AddressRef.Name != "" {
		return ctrl.Result{}, nil
	}
	pool := &infrav1.IPPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: claim.Spec.PoolRef.Name}, pool); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.refuse(ctx, claim, ReasonPoolNotFound, fmt.Sprintf("IPPool %s does not exist", claim.Spec.PoolRef.Name))
	} else if err != nil {
		return ctrl.Result{}, err
	}
	parsed, err := ipam.Parse(pool.Spec.Addresses, pool.Spec.ExcludedAddresses, pool.Spec.Gateway)
	if err != nil {
		return ctrl.Result{}, r.refuse(ctx, claim, ReasonPoolInvalid, fmt.Sprintf("IPPool %s: %v", pool.Name, err))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	used, mine, err := r.used(ctx, pool.Name, claim)
	if err != nil {
		return ctrl.Result{}, err
	}
	if mine == nil {
		address, ok := parsed.Next(used)
		if !ok {
			r.poolStatus(ctx, pool, parsed.Size(), len(used), true)
			return ctrl.Result{RequeueAfter: exhaustedPoll}, r.refuse(ctx, claim, ReasonPoolExhausted,
				fmt.Sprintf("IPPool %s has no free address (all %d are in use)", pool.Name, parsed.Size()))
		}
		if mine, err = r.create(ctx, claim, pool, address); err != nil {
			return ctrl.Result{}, err
		}
		used[address] = true
	}
	r.poolStatus(ctx, pool, parsed.Size(), len(used), false)
	return ctrl.Result{}, r.bind(ctx, claim, mine)
}

// used are the pool's addresses in use: those the cache shows and those
// handed out since; mine is the claim's own when it has one already (a
// crash between creating it and binding the claim).
func (r *Reconciler) used(ctx context.Context, pool string, claim *ipamv1.IPAddressClaim) (map[string]bool, *ipamv1.IPAddress, error) {
	var list ipamv1.IPAddressList
	if err := r.Client.List(ctx, &list, client.MatchingLabels{PoolLabel: pool}); err != nil {
		return nil, nil, err
	}
	used := map[string]bool{}
	var mine *ipamv1.IPAddress
	seen := map[string]bool{}
	for i := range list.Items {
		a := &list.Items[i]
		used[a.Spec.Address], seen[a.Spec.Address] = true, true
		if a.Namespace == claim.Namespace && a.Spec.ClaimRef.Name == claim.Name {
			mine = a
		}
	}
	for address := range r.handedOut[pool] {
		if seen[address] {
			delete(r.handedOut[pool], address) // the cache caught up
			continue
		}
		used[address] = true
	}
	return used, mine, nil
}

// create makes the claim's IPAddress, named as the claim and owned by it.
func (r *Reconciler) create(ctx context.Context, claim *ipamv1.IPAddressClaim, pool *infrav1.IPPool, address string) (*ipamv1.IPAddress, error) {
	a := &ipamv1.IPAddress{
		ObjectMeta: metav1.ObjectMeta{Name: claim.Name, Namespace: claim.Namespace, Labels: map[string]string{PoolLabel: pool.Name}},
		Spec: ipamv1.IPAddressSpec{
			ClaimRef: ipamv1.IPAddressClaimReference{Name: claim.Name},
			PoolRef:  ipamv1.IPPoolReference{APIGroup: infrav1.GroupName, Kind: infrav1.IPPoolKind, Name: pool.Name},
			Address:  address, Prefix: ptr.To(pool.Spec.Prefix), Gateway: pool.Spec.Gateway,
		},
	}
	if err := controllerutil.SetControllerReference(claim, a, r.Client.Scheme()); err != nil {
		return nil, err
	}
	err := r.Client.Create(ctx, a)
	if apierrors.IsAlreadyExists(err) {
		// Made by an earlier pass the cache does not show yet: that one.
		err = r.Client.Get(ctx, client.ObjectKeyFromObject(a), a)
	}
	if err != nil {
		return nil, fmt.Errorf("creating IPAddress %s: %w", a.Name, err)
	}
	if r.handedOut[pool.Name] == nil {
		r.handedOut[pool.Name] = map[string]types.NamespacedName{}
	}
	r.handedOut[pool.Name][a.Spec.Address] = client.ObjectKeyFromObject(claim)
	return a, nil
}

func (r *Reconciler) bind(ctx context.Context, claim *ipamv1.IPAddressClaim, a *ipamv1.IPAddress) error {
	base := claim.DeepCopy()
	claim.Status.AddressRef = ipamv1.IPAddressReference{Name: a.Name}
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: ReasonAllocated,
		Message: fmt.Sprintf("%s/%d from IPPool %s", a.Spec.Address, ptr.Deref(a.Spec.Prefix, 0), a.Spec.PoolRef.Name), ObservedGeneration: claim.Generation})
	if err := r.Client.Status().Patch(ctx, claim, client.MergeFrom(base)); err != nil {
		return fmt.Errorf("binding IPAddressClaim %s: %w", claim.Name, err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeNormal, ReasonAllocated, "Allocate", "address %s from IPPool %s", a.Spec.Address, a.Spec.PoolRef.Name)
	}
	return nil
}

// refuse says why a claim has no address (once per reason).
func (r *Reconciler) refuse(ctx context.Context, claim *ipamv1.IPAddressClaim, reason, msg string) error {
	if c := meta.FindStatusCondition(claim.Status.Conditions, "Ready"); c != nil && c.Reason == reason && c.Message == msg {
		return nil
	}
	base := claim.DeepCopy()
	meta.SetStatusCondition(&claim.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionFalse, Reason: reason, Message: msg, ObservedGeneration: claim.Generation})
	if r.Recorder != nil {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, reason, "Allocate", "%s", msg)
	}
	return r.Client.Status().Patch(ctx, claim, client.MergeFrom(base))
}

// poolStatus counts the pool's addresses; best effort (the next claim
// writes it again).
func (r *Reconciler) poolStatus(ctx context.Context, pool *infrav1.IPPool, total, used int, exhausted bool) {
	base := pool.DeepCopy()
	pool.Status.Total, pool.Status.Used, pool.Status.Free = total, used, max(total-used, 0)
	cond := metav1.Condition{Type: "Exhausted", Status: metav1.ConditionFalse, Reason: "FreeAddresses",
		Message: fmt.Sprintf("%d of %d addresses free", pool.Status.Free, total), ObservedGeneration: pool.Generation}
	if exhausted {
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonPoolExhausted
	}
	meta.SetStatusCondition(&pool.Status.Conditions, cond)
	if err := r.Client.Status().Patch(ctx, pool, client.MergeFrom(base)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Updating the pool's status", "pool", pool.Name)
	}
}
