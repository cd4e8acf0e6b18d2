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
// claim and owned by it, so deleting the claim frees the address.
//
// No address is given twice, whatever the replica or the state of its
// cache: before the IPAddress, the controller creates an
// IPAddressReservation whose name is the pool and the address, which the
// API server lets exist once (AlreadyExists: taken, the next one is tried).
// Two leaders overlapping in a failover, or a cache behind the API server,
// cost a retry, never a duplicate. A reservation is deleted once the API
// server itself says its claim and the claim's IPAddress are gone.
package ippool

import (
	"context"
	"errors"
	"fmt"
	"slices"
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

// PoolLabel on an IPAddress or an IPAddressReservation names the IPPool it
// came from.
const PoolLabel = "infrastructure.banlieue.io/ippool"

// Reasons of a claim's Ready condition and the pool's.
const (
	ReasonAllocated           = "Allocated"
	ReasonPoolNotFound        = "PoolNotFound"
	ReasonPoolInvalid         = "PoolInvalid"
	ReasonPoolExhausted       = "PoolExhausted"
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
)

const (
	// exhaustedPoll looks again at a claim its pool could not serve.
	exhaustedPoll = 10 * time.Second
	// gonePoll looks again at a reservation whose claim is gone while the
	// claim's IPAddress is not yet (the garbage collector deletes it; its
	// deletion is watched too, this is in case that event is missed).
	gonePoll = 5 * time.Second
	// claimIndex indexes reservations by their claim's NAMESPACE/NAME.
	claimIndex = "spec.claim"
)

// Reconciler serves IPAddressClaims of banlieue's IPPools.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache. A reservation is freed only on what
	// the API server says: a cache that has not seen a new claim yet would
	// free its address under it. The manager's when unset.
	APIReader client.Reader
	Recorder  events.EventRecorder
}

func ours(o client.Object) bool {
	c, ok := o.(*ipamv1.IPAddressClaim)
	return ok && c.Spec.PoolRef.APIGroup == infrav1.GroupName && c.Spec.PoolRef.Kind == infrav1.IPPoolKind
}

// Allows tells whether pool serves claims of namespace: those its
// spec.allowedNamespaces lists, or any when it lists none.
func Allows(pool *infrav1.IPPool, namespace string) bool {
	return len(pool.Spec.AllowedNamespaces) == 0 || slices.Contains(pool.Spec.AllowedNamespaces, namespace)
}

func claimKey(r *infrav1.IPAddressReservation) string {
	return types.NamespacedName{Namespace: r.Spec.Claim.Namespace, Name: r.Spec.Claim.Name}.String()
}

// SetupWithManager registers the controller: one worker, claims of our
// pools only. A reservation or an IPAddress changing (a claim's
// IPAddress deleted after it) brings its claim back, to free what it held;
// a pool changing, its unbound claims. Claims a pool could not serve are
// polled. The pools' counts are the "ippool-status" controller's.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &infrav1.IPAddressReservation{}, claimIndex, func(o client.Object) []string {
		return []string{claimKey(o.(*infrav1.IPAddressReservation))}
	}); err != nil {
		return fmt.Errorf("indexing IPAddressReservations by claim: %w", err)
	}
	err := ctrl.NewControllerManagedBy(mgr).
		Named("ippool").
		For(&ipamv1.IPAddressClaim{}, builder.WithPredicates(predicate.NewPredicateFuncs(ours))).
		Watches(&infrav1.IPPool{}, handler.EnqueueRequestsFromMapFunc(r.claimsOf)).
		Watches(&infrav1.IPAddressReservation{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			res := o.(*infrav1.IPAddressReservation)
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: res.Spec.Claim.Namespace, Name: res.Spec.Claim.Name}}}
		})).
		Watches(&ipamv1.IPAddress{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			a := o.(*ipamv1.IPAddress)
			if a.Labels[PoolLabel] == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: a.Namespace, Name: a.Spec.ClaimRef.Name}}}
		})).
		Complete(conflict.Requeue(r))
	if err != nil {
		return err
	}
	return (&statusReconciler{Client: mgr.GetClient()}).SetupWithManager(mgr)
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

// Reconcile gives one claim its address, and frees the addresses reserved
// under its name that it no longer holds.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var reservations infrav1.IPAddressReservationList
	if err := r.Client.List(ctx, &reservations, client.MatchingFields{claimIndex: req.String()}); err != nil {
		return ctrl.Result{}, fmt.Errorf("listing the reservations of %s: %w", req, err)
	}
	claim := &ipamv1.IPAddressClaim{}
	if err := r.Client.Get(ctx, req.NamespacedName, claim); apierrors.IsNotFound(err) {
		claim = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	// Reservations of an earlier claim of this name (or of none now).
	var mine []*infrav1.IPAddressReservation
	var waiting bool
	for i := range reservations.Items {
		res := &reservations.Items[i]
		if claim != nil && res.Spec.Claim.UID == claim.UID {
			mine = append(mine, res)
			continue
		}
		freed, err := r.freeIfGone(ctx, res)
		if err != nil {
			return ctrl.Result{}, err
		}
		waiting = waiting || !freed
	}
	result := ctrl.Result{}
	if waiting {
		result.RequeueAfter = gonePoll
	}
	if claim == nil || !ours(claim) || !claim.DeletionTimestamp.IsZero() {
		return result, nil
	}
	if claim.Status.AddressRef.Name != "" {
		return result, r.keepBound(ctx, claim, mine)
	}
	res, err := r.serve(ctx, claim, mine)
	if res.RequeueAfter > 0 && (result.RequeueAfter == 0 || res.RequeueAfter < result.RequeueAfter) {
		result.RequeueAfter = res.RequeueAfter
	}
	return result, err
}

// serve gives an unbound claim an address: the one an earlier pass
// reserved or made its IPAddress with (it did not get to bind the claim),
// else the pool's first that it can reserve.
func (r *Reconciler) serve(ctx context.Context, claim *ipamv1.IPAddressClaim, mine []*infrav1.IPAddressReservation) (ctrl.Result, error) {
	pool := &infrav1.IPPool{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: claim.Spec.PoolRef.Name}, pool); apierrors.IsNotFound(err) {
		return ctrl.Result{}, r.refuse(ctx, claim, ReasonPoolNotFound, fmt.Sprintf("IPPool %s does not exist", claim.Spec.PoolRef.Name))
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !Allows(pool, claim.Namespace) {
		return ctrl.Result{}, r.refuse(ctx, claim, ReasonNamespaceNotAllowed,
			fmt.Sprintf("IPPool %s serves no claim of namespace %s: it is not in the pool's spec.allowedNamespaces", pool.Name, claim.Namespace))
	}
	parsed, err := ipam.Parse(pool.Spec.Addresses, pool.Spec.ExcludedAddresses, pool.Spec.Gateway)
	if err != nil {
		return ctrl.Result{}, r.refuse(ctx, claim, ReasonPoolInvalid, fmt.Sprintf("IPPool %s: %v", pool.Name, err))
	}
	existing := &ipamv1.IPAddress{}
	switch err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Name}, existing); {
	case err == nil && metav1.IsControlledBy(existing, claim):
		// Made by an earlier pass: hold its address, then bind it.
		if held, err := r.reserve(ctx, claim, pool.Name, existing.Spec.Address); err != nil {
			return ctrl.Result{}, err
		} else if !held {
			return ctrl.Result{}, fmt.Errorf("IPAddress %s/%s has %s, which IPPool %s reserves for another claim", existing.Namespace, existing.Name, existing.Spec.Address, pool.Name)
		}
		return ctrl.Result{}, r.bind(ctx, claim, existing)
	case err == nil:
		// An earlier claim's of this name, which the garbage collector
		// has yet to delete.
		return ctrl.Result{RequeueAfter: gonePoll}, nil
	case !apierrors.IsNotFound(err):
		return ctrl.Result{}, err
	}
	var address string
	if len(mine) > 0 {
		address = mine[0].Spec.Address
	} else {
		var ok bool
		if address, ok, err = r.reserveNext(ctx, claim, pool.Name, parsed); err != nil {
			return ctrl.Result{}, err
		} else if !ok {
			return ctrl.Result{RequeueAfter: exhaustedPoll}, r.refuse(ctx, claim, ReasonPoolExhausted,
				fmt.Sprintf("IPPool %s has no free address (all %d are in use)", pool.Name, parsed.Size()))
		}
	}
	a, err := r.create(ctx, claim, pool, address)
	if err != nil {
		return ctrl.Result{}, err
	}
	if a.Spec.Address != address {
		// Another replica made the IPAddress first, with an address it
		// reserved for this claim: that one, and this one is free again.
		if err := r.release(ctx, pool.Name, address, claim.UID); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, r.bind(ctx, claim, a)
}

// reserveNext reserves the pool's first address no reservation holds for
// claim. The cache's reservations are skipped at once; one it does not show
// yet makes the create fail with AlreadyExists, and the next is tried.
func (r *Reconciler) reserveNext(ctx context.Context, claim *ipamv1.IPAddressClaim, pool string, parsed *ipam.Pool) (string, bool, error) {
	var taken infrav1.IPAddressReservationList
	if err := r.Client.List(ctx, &taken, client.MatchingLabels{PoolLabel: pool}); err != nil {
		return "", false, fmt.Errorf("listing the reservations of IPPool %s: %w", pool, err)
	}
	used := map[string]bool{}
	for _, res := range taken.Items {
		used[res.Spec.Address] = true
	}
	for {
		address, ok := parsed.Next(used)
		if !ok {
			return "", false, nil
		}
		held, err := r.reserve(ctx, claim, pool, address)
		if err != nil || held {
			return address, held, err
		}
		used[address] = true
	}
}

// reserve creates the reservation of address for claim; held is false if
// another claim has it.
func (r *Reconciler) reserve(ctx context.Context, claim *ipamv1.IPAddressClaim, pool, address string) (held bool, err error) {
	name, err := infrav1.ReservationName(pool, address)
	if err != nil {
		return false, err
	}
	res := &infrav1.IPAddressReservation{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{PoolLabel: pool}},
		Spec: infrav1.IPAddressReservationSpec{Pool: pool, Address: address,
			Claim: infrav1.ReservationClaim{Namespace: claim.Namespace, Name: claim.Name, UID: claim.UID}},
	}
	err = r.Client.Create(ctx, res)
	if !apierrors.IsAlreadyExists(err) {
		if err != nil {
			return false, fmt.Errorf("reserving %s of IPPool %s: %w", address, pool, err)
		}
		return true, nil
	}
	// Taken, maybe by this claim in an earlier pass the cache does not show.
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(res), res); apierrors.IsNotFound(err) {
		return false, nil // freed since: the next pass may take it
	} else if err != nil {
		return false, fmt.Errorf("reading IPAddressReservation %s: %w", name, err)
	}
	return res.Spec.Claim.UID == claim.UID, nil
}

// release deletes the reservation of address in pool if it is still
// claim's (the UID precondition: never another's reservation made since).
func (r *Reconciler) release(ctx context.Context, pool, address string, claim types.UID) error {
	name, err := infrav1.ReservationName(pool, address)
	if err != nil {
		return err
	}
	res := &infrav1.IPAddressReservation{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, res); err != nil {
		return client.IgnoreNotFound(err)
	}
	if res.Spec.Claim.UID != claim {
		return nil
	}
	return r.delete(ctx, res)
}

func (r *Reconciler) delete(ctx context.Context, res *infrav1.IPAddressReservation) error {
	err := r.Client.Delete(ctx, res, client.Preconditions{UID: ptr.To(res.UID)})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("freeing %s of IPPool %s: %w", res.Spec.Address, res.Spec.Pool, err)
	}
	return nil
}

// freeIfGone deletes res once the API server says its claim is gone (or is
// another claim of the same name) and no IPAddress of that claim holds its
// address any more; freed is false while one does.
func (r *Reconciler) freeIfGone(ctx context.Context, res *infrav1.IPAddressReservation) (freed bool, err error) {
	key := client.ObjectKey{Namespace: res.Spec.Claim.Namespace, Name: res.Spec.Claim.Name}
	live := &ipamv1.IPAddressClaim{}
	switch err := r.APIReader.Get(ctx, key, live); {
	case err == nil && live.UID == res.Spec.Claim.UID:
		return true, nil // there after all: the cache is behind; nothing to free
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("reading IPAddressClaim %s: %w", key, err)
	}
	// The IPAddress is named as the claim; owned by it, it outlives it
	// until the garbage collector gets to it.
	a := &ipamv1.IPAddress{}
	switch err := r.APIReader.Get(ctx, key, a); {
	case err == nil && a.Spec.Address == res.Spec.Address:
		return false, nil
	case err != nil && !apierrors.IsNotFound(err):
		return false, fmt.Errorf("reading IPAddress %s: %w", key, err)
	}
	return true, r.delete(ctx, res)
}

// keepBound makes sure a bound claim holds the reservation of its address
// (a claim bound before reservations existed gets one) and no other.
func (r *Reconciler) keepBound(ctx context.Context, claim *ipamv1.IPAddressClaim, mine []*infrav1.IPAddressReservation) error {
	a := &ipamv1.IPAddress{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: claim.Namespace, Name: claim.Status.AddressRef.Name}, a); err != nil {
		return client.IgnoreNotFound(err) // the cache has yet to show it
	}
	held := false
	for _, res := range mine {
		if res.Spec.Address == a.Spec.Address {
			held = true
			continue
		}
		// Reserved by a replica that lost the race to make the IPAddress.
		if err := r.delete(ctx, res); err != nil {
			return err
		}
	}
	if held {
		return nil
	}
	ok, err := r.reserve(ctx, claim, claim.Spec.PoolRef.Name, a.Spec.Address)
	if err == nil && !ok && r.Recorder != nil {
		r.Recorder.Eventf(claim, nil, corev1.EventTypeWarning, "AddressConflict", "Allocate",
			"address %s of IPPool %s is reserved for another claim too", a.Spec.Address, claim.Spec.PoolRef.Name)
	}
	return err
}

// create makes the claim's IPAddress, named as the claim and owned by it;
// if it exists (made by another replica), that one.
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
		if err = r.APIReader.Get(ctx, client.ObjectKeyFromObject(a), a); err == nil && !metav1.IsControlledBy(a, claim) {
			err = errors.New("it belongs to an earlier claim of that name")
		}
	}
	if err != nil {
		return nil, fmt.Errorf("creating IPAddress %s: %w", a.Name, err)
	}
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
