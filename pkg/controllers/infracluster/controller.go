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
// Package infracluster serves every backend's Cluster API InfraCluster
// (VSphereCluster, LibvirtCluster, ...) with one controller per kind the
// backends register (infrastructure.Kind.Cluster): it aggregates the
// failure domains of the banlieue Providers of the kind's provider class
// that a cluster selects into its status, in Cluster API's v1beta2
// InfraCluster shape. It talks to no backend and names none.
package infracluster

import (
	"context"
	"fmt"
	"sort"
	"strings"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/placement"
)

// Reconciler reconciles the InfraClusters of one backend (Kind.Cluster).
type Reconciler struct {
	Client client.Client
	// Kind is the backend's registration: its provider class and cluster kind.
	Kind infrastructure.Kind
	// SharedProviderNamespace holds the Providers every namespace's
	// clusters may select (placement.CandidateNamespaces).
	SharedProviderNamespace string
}

// SetupWithManager registers the controller, named after the kind
// ("vspherecluster"); changes to Providers of Kind's class requeue every
// cluster of their namespace (of every namespace, for the shared one).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	obj, err := r.newCluster()
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(strings.ToLower(r.Kind.Cluster.Kind)).
		For(obj).
		Watches(&v1alpha1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.clustersOf)).
		Complete(conflict.Requeue(r))
}

// newCluster is an empty object of Kind.Cluster; its type must embed the
// common cluster spec and status.
func (r *Reconciler) newCluster() (infrav1.Cluster, error) {
	if r.Kind.Cluster.Kind == "" {
		return nil, fmt.Errorf("provider class %q registers no cluster kind", r.Kind.ProviderClass)
	}
	o, err := r.Client.Scheme().New(r.Kind.Cluster)
	if err != nil {
		return nil, fmt.Errorf("cluster kind %s: %w", r.Kind.Cluster, err)
	}
	c, ok := o.(infrav1.Cluster)
	if !ok {
		return nil, fmt.Errorf("cluster kind %s does not embed the common cluster spec and status", r.Kind.Cluster)
	}
	return c, nil
}

func (r *Reconciler) clustersOf(ctx context.Context, o client.Object) []reconcile.Request {
	if p, ok := o.(*v1alpha1.Provider); ok && p.Spec.ProviderClassRef.Name != r.Kind.ProviderClass {
		return nil // another backend's clusters aggregate it
	}
	gvk := r.Kind.Cluster
	list, err := r.Client.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err != nil {
		return nil
	}
	opts := []client.ListOption{client.InNamespace(o.GetNamespace())}
	if o.GetNamespace() == r.SharedProviderNamespace {
		opts = nil // shared Providers serve every namespace's clusters
	}
	if err := r.Client.List(ctx, list.(client.ObjectList), opts...); err != nil {
		return nil
	}
	items, err := meta.ExtractList(list)
	if err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, it := range items {
		if c, ok := it.(client.Object); ok {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(c)})
		}
	}
	return out
}

// Conditions of an InfraCluster besides Ready.
const (
	// FailureDomainsUniqueCondition is False when two selected Providers
	// publish a failure domain of the same name: the first (by Provider)
	// is kept, the other left out, and the condition names both.
	FailureDomainsUniqueCondition = "FailureDomainsUnique"
	// ControlPlaneLabel on a Provider's failure domain set to "false" keeps
	// control planes out of it (controlPlane false in the cluster's list).
	ControlPlaneLabel = "controlPlane"
)

// Reconcile rebuilds status.failureDomains from the selected Providers: the
// Ready Providers of Kind's class its selector picks in its own namespace
// and in the shared one, as VM scheduling looks for them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	ic, err := r.newCluster()
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.Client.Get(ctx, req.NamespacedName, ic); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	spec, status := ic.CommonSpec(), ic.CommonStatus()
	before := status.DeepCopy()
	sel := labels.Everything()
	if spec.ProviderSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(spec.ProviderSelector)
		if err != nil {
			return ctrl.Result{}, nil // schema-valid but unusable: nothing to retry
		}
		sel = s
	}
	var providers []v1alpha1.Provider
	for _, ns := range placement.CandidateNamespaces(ic.GetNamespace(), r.SharedProviderNamespace) {
		var list v1alpha1.ProviderList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return ctrl.Result{}, fmt.Errorf("listing the Providers of namespace %s: %w", ns, err)
		}
		for _, p := range list.Items {
			if p.Spec.ProviderClassRef.Name == r.Kind.ProviderClass {
				providers = append(providers, p)
			}
		}
	}
	fds, duplicates := aggregate(providers, ic.GetNamespace())
	status.FailureDomains = fds
	status.ObservedGeneration = ic.GetGeneration()
	cond := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: ic.GetGeneration()}
	if len(fds) > 0 {
		status.Initialization = &infrav1.ClusterInitialization{Provisioned: ptr.To(true)}
		cond.Status, cond.Reason = metav1.ConditionTrue, "FailureDomainsKnown"
		cond.Message = fmt.Sprintf("%s from %s", plural(len(fds), "failure domain"), plural(len(providers), "Provider"))
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, "NoFailureDomains"
		cond.Message = fmt.Sprintf("no Ready %s Provider among the %d selected reports failure domains", r.Kind.ProviderClass, len(providers))
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	unique := metav1.Condition{Type: FailureDomainsUniqueCondition, Status: metav1.ConditionTrue, Reason: "Unique",
		Message: "every failure domain name is published by one Provider", ObservedGeneration: ic.GetGeneration()}
	if len(duplicates) > 0 {
		unique.Status, unique.Reason = metav1.ConditionFalse, "DuplicateFailureDomain"
		unique.Message = strings.Join(duplicates, "; ")
	}
	meta.SetStatusCondition(&status.Conditions, unique)
	if apiequality.Semantic.DeepEqual(before, status) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Update(ctx, ic); err != nil {
		return ctrl.Result{}, fmt.Errorf("updating the status of %s %s: %w", r.Kind.Cluster.Kind, req.NamespacedName, err)
	}
	return ctrl.Result{}, nil
}

// aggregate lists the failure domains of the Ready Providers, in the
// Cluster API shape, and what it left out because a name was taken. Pure.
func aggregate(providers []v1alpha1.Provider, namespace string) ([]infrav1.FailureDomain, []string) {
	sort.Slice(providers, func(i, j int) bool {
		return placement.ProviderName(&providers[i], namespace) < placement.ProviderName(&providers[j], namespace)
	})
	var fds []infrav1.FailureDomain
	var duplicates []string
	owner := map[string]string{}
	for _, p := range providers {
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
			continue
		}
		name := placement.ProviderName(&p, namespace)
		for _, fd := range p.Status.FailureDomains {
			if first, taken := owner[fd.Name]; taken {
				duplicates = append(duplicates, fmt.Sprintf("failure domain %s is published by Providers %s and %s; %s's is left out", fd.Name, first, name, name))
				continue
			}
			owner[fd.Name] = name
			fds = append(fds, infrav1.FailureDomain{
				Name: fd.Name, ControlPlane: ptr.To(fd.Labels[ControlPlaneLabel] != "false"),
				Attributes: attributes(name, fd),
			})
		}
	}
	return fds, duplicates
}

// attributes of a Provider's failure domain in the cluster's list: the
// Provider (as the cluster's namespace names it) and the backend location
// it reports (datacenter and cluster on vSphere, host on libvirt and
// Proxmox VE), leaving out what the backend does not have.
func attributes(provider string, fd v1alpha1.FailureDomain) map[string]string {
	out := map[string]string{"provider": provider}
	for k, v := range map[string]string{"datacenter": fd.Datacenter, "cluster": fd.Cluster, "host": fd.Host} {
		if v != "" {
			out[k] = v
		}
	}
	return out
}

// plural is "1 Provider", "2 Providers".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
