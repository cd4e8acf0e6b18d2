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

// Package capispread gives a Cluster API machine of any banlieue kind its
// failure domain: the one its Machine names (a control plane spreads its
// Machines itself), or, for a MachineDeployment's Machines, which name
// none, the failure domain of its Cluster with the fewest of the Cluster's
// machines, so replicas spread as the product guide says they do. It
// writes spec.failureDomain of the infrastructure machine, which its
// provider then builds in; it names no backend.
//
// It also owns the Ready condition of a machine that nothing places: no
// spec.failureDomain, no banlieue.io/provider annotation, and no Cluster
// API Machine (or Cluster) naming a failure domain for it. No provider
// serves such a machine (a provider finds its machines by annotation or
// failure domain), so without this it would stay silent forever; the
// core, which knows no backend, is the one component that sees every
// unplaced machine of every kind, so it reports Ready=False
// FailureDomainRequired naming spec.failureDomain. Once the machine has a
// failure domain or a Provider, this controller no longer looks at it and
// the provider that takes it writes Ready from then on.
package capispread

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

// ReasonFailureDomainRequired is the Ready reason of a machine nothing
// places: it needs spec.failureDomain (or a Cluster API Machine or
// Cluster naming one).
const ReasonFailureDomainRequired = "FailureDomainRequired"

// clusterPoll is how often a machine whose Cluster reports no failure
// domains yet is looked at again (a Cluster is not watched).
const clusterPoll = 10 * time.Second

// Reconciler spreads the machines of one infrastructure kind.
type Reconciler struct {
	Client client.Client
	// Reader reads Cluster API's Machines and Clusters, uncached: the
	// controller must start where Cluster API is not installed.
	Reader   client.Reader
	Kind     infrastructure.Kind
	Recorder events.EventRecorder

	// mu makes choose → write one step, and assumed remembers choices
	// the cache may not show yet, so machines created together spread.
	mu      sync.Mutex
	assumed map[types.UID]string
}

// SetupWithManager registers the controller for Kind's machines that have
// no failure domain and name no Provider.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.assumed = map[types.UID]string{}
	o, err := mgr.GetScheme().New(r.Kind.GroupVersionKind)
	if err != nil {
		return fmt.Errorf("infrastructure kind %s: %w", r.Kind.GroupVersionKind, err)
	}
	obj, ok := o.(client.Object)
	if !ok {
		return fmt.Errorf("infrastructure kind %s is not an object", r.Kind.GroupVersionKind)
	}
	unplaced := predicate.NewPredicateFuncs(unplaced)
	return ctrl.NewControllerManagedBy(mgr).
		Named("failuredomain-"+strings.ToLower(r.Kind.GroupVersionKind.Kind)).
		For(obj, builder.WithPredicates(unplaced)).
		Complete(conflict.Requeue(r))
}

// Reconcile gives one machine its failure domain.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m, err := r.get(ctx, req.NamespacedName)
	if err != nil || m == nil || !unplaced(m) || !m.GetDeletionTimestamp().IsZero() {
		return ctrl.Result{}, err
	}
	owner := infrastructure.MachineOwner(m)
	if owner == nil {
		if infrastructure.CAPIOwned(m) {
			return ctrl.Result{}, nil // Cluster API adopts it soon: its owner's update brings it back
		}
		return ctrl.Result{}, r.unplaceable(ctx, m, "spec.failureDomain is empty and no banlieue.io/provider annotation names a Provider, "+
			"so no provider serves this machine: set spec.failureDomain to a failure domain a Provider publishes (its status.failureDomains[].name)")
	}
	machine, err := r.read(ctx, owner.APIVersion, "Machine", m.GetNamespace(), owner.Name)
	if err != nil || machine == nil {
		return ctrl.Result{}, err
	}
	if fd, _, _ := unstructured.NestedString(machine.Object, "spec", "failureDomain"); fd != "" {
		return ctrl.Result{}, r.place(ctx, m, fd, "Machine "+owner.Name+" names it")
	}
	clusterName := m.GetLabels()[infrastructure.ClusterNameLabel]
	cluster, err := r.read(ctx, owner.APIVersion, "Cluster", m.GetNamespace(), clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	domains := clusterFailureDomains(cluster)
	if len(domains) == 0 {
		// Nothing to spread over yet: a Cluster is not watched, so look
		// again, and say why the machine waits meanwhile.
		msg := fmt.Sprintf("spec.failureDomain is empty, Machine %s names no failure domain and Cluster %q reports none yet "+
			"(its InfraCluster selects no Ready Provider publishing one): set spec.failureDomain, the Machine's, or the InfraCluster's providerSelector", owner.Name, clusterName)
		return ctrl.Result{RequeueAfter: clusterPoll}, r.unplaceable(ctx, m, msg)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	load, err := r.load(ctx, m, clusterName)
	if err != nil {
		return ctrl.Result{}, err
	}
	fd := LeastLoaded(domains, load)
	if err := r.place(ctx, m, fd, fmt.Sprintf("the least used of Cluster %s's %d failure domains (%d of its machines there)", clusterName, len(domains), load[fd])); err != nil {
		return ctrl.Result{}, err
	}
	r.assumed[m.GetUID()] = fd
	return ctrl.Result{}, nil
}

// unplaced tells whether nothing says where o goes: no spec.failureDomain
// and no banlieue.io/provider annotation (a provider stamps the annotation
// before it writes anything else, so a machine it built has one).
func unplaced(o client.Object) bool {
	return failureDomainOf(o) == "" && o.GetAnnotations()[infrastructure.ProviderAnnotation] == ""
}

// unplaceable reports m Ready=False FailureDomainRequired with msg (see the
// package comment for why this controller owns that condition).
func (r *Reconciler) unplaceable(ctx context.Context, m client.Object, msg string) error {
	im, ok := m.(infrav1.Machine)
	if !ok {
		return fmt.Errorf("%s does not embed the common machine status", r.Kind.GroupVersionKind.Kind)
	}
	st := im.CommonStatus()
	cond := metav1.Condition{Type: infrastructure.ReadyCondition, Status: metav1.ConditionFalse, Reason: ReasonFailureDomainRequired,
		Message: msg, ObservedGeneration: m.GetGeneration()}
	if !meta.SetStatusCondition(&st.Conditions, cond) {
		return nil // said already
	}
	if err := r.Client.Status().Update(ctx, m); err != nil {
		return fmt.Errorf("reporting %s %s unplaced: %w", r.Kind.GroupVersionKind.Kind, m.GetName(), err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(m, nil, corev1.EventTypeWarning, ReasonFailureDomainRequired, "Place", "%s", msg)
	}
	return nil
}

// LeastLoaded is the failure domain of domains with the fewest machines
// (load), the first by name among equals.
func LeastLoaded(domains []string, load map[string]int) string {
	sorted := append([]string(nil), domains...)
	sort.Strings(sorted)
	best := sorted[0]
	for _, d := range sorted[1:] {
		if load[d] < load[best] {
			best = d
		}
	}
	return best
}

// place writes fd as m's failure domain.
func (r *Reconciler) place(ctx context.Context, m client.Object, fd, why string) error {
	patch := client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"failureDomain":%q}}`, fd)))
	if err := r.Client.Patch(ctx, m, patch); err != nil {
		return fmt.Errorf("setting the failure domain of %s %s: %w", r.Kind.GroupVersionKind.Kind, m.GetName(), err)
	}
	if r.Recorder != nil {
		r.Recorder.Eventf(m, nil, corev1.EventTypeNormal, "FailureDomainChosen", "Place", "failure domain %s: %s", fd, why)
	}
	ctrl.LoggerFrom(ctx).Info("Chose a failure domain", "failureDomain", fd, "why", why)
	return nil
}

// load counts the machines of Kind in m's namespace and Cluster per
// failure domain, with the choices the cache does not show yet.
func (r *Reconciler) load(ctx context.Context, m client.Object, clusterName string) (map[string]int, error) {
	list := &unstructured.UnstructuredList{}
	gvk := r.Kind.GroupVersionKind
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	typed, err := r.Client.Scheme().New(list.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	tl := typed.(client.ObjectList)
	if err := r.Client.List(ctx, tl, client.InNamespace(m.GetNamespace()), client.MatchingLabels{infrastructure.ClusterNameLabel: clusterName}); err != nil {
		return nil, err
	}
	items, err := meta.ExtractList(tl)
	if err != nil {
		return nil, err
	}
	load := map[string]int{}
	seen := map[types.UID]bool{}
	for _, it := range items {
		o := it.(client.Object)
		seen[o.GetUID()] = true
		fd := failureDomainOf(o)
		if fd == "" {
			fd = r.assumed[o.GetUID()]
		} else {
			delete(r.assumed, o.GetUID()) // the cache caught up
		}
		if fd != "" && o.GetUID() != m.GetUID() {
			load[fd]++
		}
	}
	for uid := range r.assumed {
		if !seen[uid] {
			delete(r.assumed, uid)
		}
	}
	return load, nil
}

func (r *Reconciler) get(ctx context.Context, key types.NamespacedName) (client.Object, error) {
	o, err := r.Client.Scheme().New(r.Kind.GroupVersionKind)
	if err != nil {
		return nil, err
	}
	m := o.(client.Object)
	if err := r.Client.Get(ctx, key, m); err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return m, nil
}

// read gets a Cluster API object (nil when it does not exist).
func (r *Reconciler) read(ctx context.Context, apiVersion, kind, namespace, name string) (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(apiVersion)
	u.SetKind(kind)
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, u)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s %s: %w", kind, name, err)
	}
	return u, nil
}

// clusterFailureDomains are the names in a Cluster's status.failureDomains.
func clusterFailureDomains(cluster *unstructured.Unstructured) []string {
	if cluster == nil {
		return nil
	}
	list, _, _ := unstructured.NestedSlice(cluster.Object, "status", "failureDomains")
	var out []string
	for _, x := range list {
		if fd, ok := x.(map[string]interface{}); ok {
			if name, _ := fd["name"].(string); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

// failureDomainOf is a machine's spec.failureDomain.
func failureDomainOf(o client.Object) string {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return ""
	}
	fd, _, _ := unstructured.NestedString(u, "spec", "failureDomain")
	return fd
}
