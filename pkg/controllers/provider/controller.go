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

// Package provider reconciles Provider objects of one provider class: it
// reads the credentials (and CA bundle) from the Provider's own namespace,
// logs in through the backend, walks the inventory and publishes the
// failure domains (pkg/failuredomain) with a Ready condition whose reason
// says what failed: SecretMissing, SecretInvalid, ConnectFailed,
// InventoryFailed, or a failure-domain name collision.
package provider

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/controllers/finalizers"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/redact"
	"github.com/firestoned/banlieue/pkg/snapshots"
)

// ReasonFailureDomainNameCollision: two (datacenter, cluster) pairs resolve to one name.
const (
	ReasonFailureDomainNameCollision = "FailureDomainNameCollision"
	ReasonInventoryWalked            = "InventoryWalked"
)

// Connector returns a logged-in backend for the Provider named owner.
type Connector func(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error)

// Reconciler reconciles the Providers of one class.
type Reconciler struct {
	Client client.Client
	// Class is the providerClassRef.name this reconciler serves ("vsphere").
	Class string
	// Only, when set, is the one Provider (by name) this process serves:
	// the operator's per-Provider workloads, whose identity may read that
	// Provider and its credentials only. Its manager's cache holds that
	// Provider alone.
	Only    string
	Connect Connector
	// Forget drops the backend session of the Provider named owner (it
	// is gone); nil when the backend keeps none.
	Forget func(owner string)
	// Kind is the class's machine type (whose machines hold a deleted Provider).
	Kind providers.MachineKind
	// Credentials reads the class's credentials out of the Provider's
	// Secret; an error is the Secret's SecretInvalid message.
	Credentials func(*corev1.Secret) (providers.Credentials, error)
	// Resync re-walks the inventory of a Ready Provider this often.
	Resync time.Duration
	// NotReadyRetry tries a Provider that is not Ready again this often
	// (its Secret may have been fixed); min(Resync, 10 s) when zero.
	NotReadyRetry time.Duration
	// CredentialsTTL is how long machines and image checks reuse a
	// Provider's credentials before reading its Secret again (30 s when
	// zero). The Secret may only be read by name, uncached: without this,
	// every machine reconcile cost kube-apiserver a Secret GET. The
	// Provider's own reconcile always reads it afresh.
	CredentialsTTL time.Duration
	// Snapshots are what the class's backend snapshots can do (nil: it
	// takes none), published on each Provider with its bound.
	Snapshots *providers.SnapshotLimits
	// Console is the console endpoint this process serves (its leader
	// publishes it on each Provider it serves); nil for none.
	Console *v1alpha1.ProviderConsole

	connMu sync.Mutex
	conns  map[string]cachedConnection
	// ready exports each Provider's Ready condition (ProviderReady).
	ready readiness
}

// cachedConnection is a Provider's connection as read at a time, for one
// generation of the Provider.
type cachedConnection struct {
	conn       providers.Connection
	generation int64
	at         time.Time
}

// cachedConnectionOf returns p's connection, read afresh when fresh, when
// older than CredentialsTTL or when p changed since.
func (r *Reconciler) cachedConnectionOf(ctx context.Context, p *v1alpha1.Provider, fresh bool) (*providers.Connection, error) {
	key := placement.ImageStatusKey(p)
	ttl := r.CredentialsTTL
	if ttl <= 0 {
		ttl = 30 * time.Second
	}
	r.connMu.Lock()
	c, ok := r.conns[key]
	r.connMu.Unlock()
	if ok && !fresh && c.generation == p.Generation && time.Since(c.at) < ttl {
		conn := c.conn
		return &conn, nil
	}
	conn, err := r.connection(ctx, p)
	r.connMu.Lock()
	defer r.connMu.Unlock()
	if r.conns == nil {
		r.conns = map[string]cachedConnection{}
	}
	if err != nil {
		delete(r.conns, key)
		return nil, err
	}
	r.conns[key] = cachedConnection{conn: *conn, generation: p.Generation, at: time.Now()}
	return conn, nil
}

// ProtectionFinalizer keeps a deleted Provider, as PersistentVolume
// protection keeps a volume, until no machine uses it: its machines can
// still reach the backend to destroy their VMs.
const ProtectionFinalizer = "banlieue.io/provider-protection"

// ReasonDeleting is the Ready reason of a deleted Provider that machines
// still use.
const ReasonDeleting = "Deleting"

// reconcileDelete releases a deleted Provider once no machine uses it;
// until then Ready is False (so nothing new is placed on it), naming them.
func (r *Reconciler) reconcileDelete(ctx context.Context, p *v1alpha1.Provider) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(p, ProtectionFinalizer) {
		return ctrl.Result{}, nil
	}
	users, err := r.machinesUsing(ctx, p)
	if err != nil {
		return ctrl.Result{}, err
	}
	if len(users) > 0 {
		shown := users
		if len(shown) > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", len(users)-10))
		}
		before := p.Status.DeepCopy()
		meta.SetStatusCondition(&p.Status.Conditions, metav1.Condition{Type: v1alpha1.ProviderReady, Status: metav1.ConditionFalse,
			Reason: ReasonDeleting, ObservedGeneration: p.Generation,
			Message: fmt.Sprintf("deleted; waiting for %d machine(s) using it to be deleted: %s", len(users), strings.Join(shown, ", "))})
		if !apiequality.Semantic.DeepEqual(before, &p.Status) {
			if err := r.Client.Status().Update(ctx, p); err != nil {
				return ctrl.Result{}, err
			}
		}
		r.ready.set(placement.ImageStatusKey(p), *meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady))
		return ctrl.Result{}, nil // a machine's deletion requeues it
	}
	r.forget(placement.ImageStatusKey(p))
	return ctrl.Result{}, finalizers.Remove(ctx, r.Client, p, ProtectionFinalizer)
}

// forget drops a deleted Provider's credentials, backend session (its
// logout runs in the background) and metrics.
func (r *Reconciler) forget(owner string) {
	r.ready.forget(owner)
	r.connMu.Lock()
	delete(r.conns, owner)
	r.connMu.Unlock()
	if r.Forget != nil {
		r.Forget(owner)
	}
}

// machinesUsing lists, as namespace/name, the machines p serves.
func (r *Reconciler) machinesUsing(ctx context.Context, p *v1alpha1.Provider) ([]string, error) {
	list := r.Kind.NewList()
	if err := r.Client.List(ctx, list); err != nil {
		return nil, err
	}
	var out []string
	for _, m := range r.Kind.Items(list) {
		if servedBy(m, p) {
			out = append(out, m.GetNamespace()+"/"+m.GetName())
		}
	}
	sort.Strings(out)
	return out, nil
}

// servedBy tells whether p is the Provider of m (see MachineReconciler.provider).
func servedBy(m infrav1.Machine, p *v1alpha1.Provider) bool {
	if key, named := annotatedProvider(m); named {
		return key == client.ObjectKeyFromObject(p)
	}
	for _, fd := range p.Status.FailureDomains {
		if fd.Name == builtFailureDomain(m) {
			return true
		}
	}
	return false
}

// providerOfMachine requeues the deleted Provider a deleted machine used.
func (r *Reconciler) providerOfMachine(ctx context.Context, o client.Object) []reconcile.Request {
	m, ok := o.(infrav1.Machine)
	if !ok {
		return nil
	}
	var list v1alpha1.ProviderList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if p := &list.Items[i]; !p.DeletionTimestamp.IsZero() && servedBy(m, p) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)})
		}
	}
	return out
}

// SetupWithManager registers the controller. Secrets and ConfigMaps are
// not watched: this identity may only get them by name (a watch would need
// list and watch on every Secret of the namespace), so a Provider that is
// not Ready is looked at again every NotReadyRetry and a Ready one every
// Resync, reading its Secret afresh each time.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("provider-"+r.Class).
		For(&v1alpha1.Provider{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(r.Kind.New(), handler.EnqueueRequestsFromMapFunc(r.providerOfMachine),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc: func(event.CreateEvent) bool { return false }, UpdateFunc: func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false }})).
		Complete(conflict.Requeue(r))
}

// Serves tells whether this process serves Provider p: one of its class,
// and the one it is limited to, if any. Namespaces are the manager's.
func (r *Reconciler) Serves(p *v1alpha1.Provider) bool {
	return p.Spec.ProviderClassRef.Name == r.Class && (r.Only == "" || p.Name == r.Only)
}

// notReadyRetry is how soon a Provider that is not Ready is tried again.
func (r *Reconciler) notReadyRetry() time.Duration {
	if r.NotReadyRetry > 0 {
		return r.NotReadyRetry
	}
	return min(r.Resync, 10*time.Second)
}

// notReady is a failure with a Ready reason.
type notReady struct {
	reason, message string
}

func (e *notReady) Error() string { return e.reason + ": " + e.message }

// Reconcile walks one Provider.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.Provider{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		if apierrors.IsNotFound(err) {
			r.forget(req.Namespace + "/" + req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !r.Serves(p) {
		return ctrl.Result{}, nil
	}
	if !p.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, p)
	}
	if err := finalizers.Add(ctx, r.Client, p, ProtectionFinalizer); err != nil {
		return ctrl.Result{}, err
	}
	before := p.Status.DeepCopy()
	fds, degraded, err := r.walk(ctx, p)
	cond := metav1.Condition{Type: v1alpha1.ProviderReady, ObservedGeneration: p.Generation}
	var nr *notReady
	switch {
	case err == nil:
		p.Status.FailureDomains = fds
		cond.Status, cond.Reason = metav1.ConditionTrue, ReasonInventoryWalked
		cond.Message = fmt.Sprintf("%d failure domains", len(fds))
		if degraded != nil {
			log.FromContext(ctx).Info("Provider degraded", "detail", degraded.Error())
			cond.Message += "; " + redact.Message(degraded.Error())
		}
	case errors.As(err, &nr):
		// Providers are read by tenants (banlieue-view): the condition
		// keeps the reason and a message without the endpoint, addresses
		// or user name, which the log has.
		log.FromContext(ctx).Info("Provider not Ready", "reason", nr.reason, "detail", nr.message)
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, nr.reason, redact.Message(nr.message)
	default:
		return ctrl.Result{}, err
	}
	meta.SetStatusCondition(&p.Status.Conditions, cond)
	if err == nil && degraded == nil {
		// A degraded walk misses its dead hosts' locations: their
		// overrides are not unused.
		overridesApplied(p)
	}
	p.Status.ObservedGeneration = p.Generation
	p.Status.Console = r.Console
	p.Status.Snapshots = snapshotStatus(p, r.Snapshots)
	if !apiequality.Semantic.DeepEqual(before, &p.Status) {
		if err := r.Client.Status().Update(ctx, p); err != nil {
			return ctrl.Result{}, err
		}
	}
	r.ready.set(placement.ImageStatusKey(p), cond)
	if cond.Status != metav1.ConditionTrue {
		return ctrl.Result{RequeueAfter: r.notReadyRetry()}, nil
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

// overridesApplied reports, on a Provider with failureDomainNameOverrides,
// each one that matches no failure domain the walk found.
func overridesApplied(p *v1alpha1.Provider) {
	overrides := p.Spec.FailureDomainNameOverrides
	if len(overrides) == 0 {
		meta.RemoveStatusCondition(&p.Status.Conditions, v1alpha1.ProviderOverridesApplied)
		return
	}
	cond := metav1.Condition{Type: v1alpha1.ProviderOverridesApplied, Status: metav1.ConditionTrue, ObservedGeneration: p.Generation,
		Reason: v1alpha1.ProviderReasonOverridesUsed, Message: fmt.Sprintf("all %d overrides name a failure domain", len(overrides))}
	if unused := failuredomain.UnusedOverrides(p.Status.FailureDomains, overrides); len(unused) > 0 {
		var names []string
		for _, i := range unused {
			o := overrides[i]
			names = append(names, fmt.Sprintf("spec.failureDomainNameOverrides[%d]: the backend reports no %s (name %s unused)", i,
				failuredomain.Location{Datacenter: o.Datacenter, Cluster: o.Cluster, Host: o.Host}, o.Name))
		}
		cond.Status, cond.Reason = metav1.ConditionFalse, v1alpha1.ProviderReasonOverrideUnused
		cond.Message = strings.Join(names, "; ")
	}
	meta.SetStatusCondition(&p.Status.Conditions, cond)
}

// backend reads p's credentials and returns its logged-in backend. Failures
// are *notReady with the Provider's reason (SecretMissing, SecretInvalid,
// ConnectFailed).
func (r *Reconciler) backend(ctx context.Context, p *v1alpha1.Provider) (providers.Backend, error) {
	return r.backendOf(ctx, p, false)
}

// backendOf is backend, reading the credentials afresh when fresh.
func (r *Reconciler) backendOf(ctx context.Context, p *v1alpha1.Provider, fresh bool) (providers.Backend, error) {
	conn, err := r.cachedConnectionOf(ctx, p, fresh)
	if err != nil {
		return nil, err
	}
	b, err := r.Connect(ctx, placement.ImageStatusKey(p), *conn)
	if err != nil {
		return nil, &notReady{v1alpha1.ProviderReasonConnectFailed, err.Error()}
	}
	return b, nil
}

// walk lists p's failure domains; degraded names the hosts a backend of
// several could not reach (the Provider keeps serving the others).
func (r *Reconciler) walk(ctx context.Context, p *v1alpha1.Provider) (_ []v1alpha1.FailureDomain, degraded *providers.DegradedError, _ error) {
	backend, err := r.backendOf(ctx, p, true)
	if err != nil {
		return nil, nil, err
	}
	pairs, err := backend.Inventory(ctx)
	if errors.As(err, &degraded) {
		err = nil
	}
	if err != nil {
		return nil, nil, &notReady{v1alpha1.ProviderReasonInventoryFailed, err.Error()}
	}
	fds, err := failuredomain.Resolve(p.Name, pairs, p.Spec.FailureDomainNameOverrides)
	var collision *failuredomain.CollisionError
	if errors.As(err, &collision) {
		return nil, nil, &notReady{ReasonFailureDomainNameCollision, err.Error()}
	}
	return fds, degraded, err
}

// connection reads the credentials and CA bundle, from the Provider's
// namespace only.
func (r *Reconciler) connection(ctx context.Context, p *v1alpha1.Provider) (*providers.Connection, error) {
	c := p.Spec.Connection
	// An endpoint that takes no credentials (validation allows it only so,
	// e.g. libvirt's local socket) names no Secret: the class reads an
	// empty one.
	secret := &corev1.Secret{}
	if name := c.CredentialsRef.Name; name != "" {
		if err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: name}, secret); err != nil {
			return nil, unreadable(err, "Secret", p.Namespace, name)
		}
	}
	creds, err := r.Credentials(secret)
	if err != nil {
		return nil, &notReady{v1alpha1.ProviderReasonSecretInvalid, fmt.Sprintf("Secret %s/%s: %v", p.Namespace, c.CredentialsRef.Name, err)}
	}
	conn := &providers.Connection{
		Endpoint:              c.Endpoint,
		Hosts:                 hosts(c.Hosts),
		InsecureSkipTLSVerify: c.InsecureSkipTLSVerify,
		Credentials:           creds,
		CredentialsVersion:    secret.ResourceVersion,
	}
	if ca := c.CABundle; ca != nil {
		switch {
		case ca.Inline != "":
			conn.CABundle = []byte(ca.Inline)
		case ca.SecretRef != nil:
			s := &corev1.Secret{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ca.SecretRef.Name}, s); err != nil {
				return nil, unreadable(err, "CA bundle Secret", p.Namespace, ca.SecretRef.Name)
			}
			conn.CABundle = s.Data[ca.SecretRef.Key]
			conn.CredentialsVersion += "/" + s.ResourceVersion
		case ca.ConfigMapRef != nil:
			cm := &corev1.ConfigMap{}
			if err := r.Client.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: ca.ConfigMapRef.Name}, cm); err != nil {
				return nil, unreadable(err, "CA bundle ConfigMap", p.Namespace, ca.ConfigMapRef.Name)
			}
			conn.CABundle = []byte(cm.Data[ca.ConfigMapRef.Key])
			conn.CredentialsVersion += "/" + cm.ResourceVersion
		}
		if len(conn.CABundle) == 0 {
			return nil, &notReady{v1alpha1.ProviderReasonSecretInvalid, "the CA bundle is empty"}
		}
	}
	return conn, nil
}

// unreadable is the Provider's reason when a Secret or ConfigMap it names
// cannot be read: missing, or not granted to this provider's identity by
// name (the static install's credentials Role lists the names it may read;
// the operator grants them from the spec).
func unreadable(err error, what, namespace, name string) error {
	switch {
	case apierrors.IsNotFound(err):
		return &notReady{v1alpha1.ProviderReasonSecretMissing, fmt.Sprintf("%s %s/%s does not exist", what, namespace, name)}
	case apierrors.IsForbidden(err):
		return &notReady{v1alpha1.ProviderReasonSecretForbidden, fmt.Sprintf("this provider's identity may not read %s %s/%s: "+
			"name it in the provider's credentials Role (docs/security.md)", what, namespace, name)}
	}
	return err
}

func hosts(in []v1alpha1.ProviderHost) []providers.Host {
	var out []providers.Host
	for _, h := range in {
		out = append(out, providers.Host{Name: h.Name, Endpoint: h.Endpoint})
	}
	return out
}

// snapshotStatus is what p publishes of its backend's snapshots: the
// bound in force (pkg/snapshots, as the API server applies it), the
// backend's own, and whether memory can be kept; nil when it takes none.
func snapshotStatus(p *v1alpha1.Provider, limits *providers.SnapshotLimits) *v1alpha1.ProviderSnapshots {
	if limits == nil {
		return nil
	}
	out := &v1alpha1.ProviderSnapshots{Memory: limits.Memory}
	if b := snapshots.BoundOf(p.Namespace+"/"+p.Name, p.Spec.Capabilities.MaxSnapshotsPerVM, *limits); b.Bounded {
		out.MaxPerVM = ptr.To(b.Max)
	}
	if limits.MaxPerVM > 0 {
		out.BackendMaxPerVM = ptr.To(limits.MaxPerVM)
	}
	return out
}
