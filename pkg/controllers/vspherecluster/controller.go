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
// Package vspherecluster aggregates the failure domains of the banlieue
// Providers a VSphereCluster selects into its status, in Cluster API's
// v1beta2 InfraCluster shape. It talks to no backend.
package vspherecluster

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
	"github.com/firestoned/banlieue/pkg/placement"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// Reconciler reconciles VSphereClusters.
type Reconciler struct {
	Client client.Client
	// SharedProviderNamespace holds the Providers every namespace's
	// clusters may select (placement.CandidateNamespaces).
	SharedProviderNamespace string
}

// SetupWithManager registers the controller; Provider changes requeue every
// VSphereCluster of their namespace.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named("vspherecluster").
		For(&infrav1.VSphereCluster{}).
		Watches(&v1alpha1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.clustersOf)).
		Complete(conflict.Requeue(r))
}

func (r *Reconciler) clustersOf(ctx context.Context, o client.Object) []reconcile.Request {
	var list infrav1.VSphereClusterList
	opts := []client.ListOption{client.InNamespace(o.GetNamespace())}
	if o.GetNamespace() == r.SharedProviderNamespace {
		opts = nil // shared Providers serve every namespace's clusters
	}
	if err := r.Client.List(ctx, &list, opts...); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return out
}

// Conditions of a VSphereCluster besides Ready.
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
// Ready vSphere Providers its selector picks in its own namespace and in
// the shared one, as VM scheduling looks for them.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vsc := &infrav1.VSphereCluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, vsc); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := vsc.Status.DeepCopy()
	sel := labels.Everything()
	if vsc.Spec.ProviderSelector != nil {
		s, err := metav1.LabelSelectorAsSelector(vsc.Spec.ProviderSelector)
		if err != nil {
			return ctrl.Result{}, nil // schema-valid but unusable: nothing to retry
		}
		sel = s
	}
	var providers []v1alpha1.Provider
	for _, ns := range placement.CandidateNamespaces(vsc.Namespace, r.SharedProviderNamespace) {
		var list v1alpha1.ProviderList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return ctrl.Result{}, err
		}
		for _, p := range list.Items {
			if p.Spec.ProviderClassRef.Name == vspheremachines.ProviderClass {
				providers = append(providers, p)
			}
		}
	}
	fds, duplicates := aggregate(providers, vsc.Namespace)
	vsc.Status.FailureDomains = fds
	vsc.Status.ObservedGeneration = vsc.Generation
	cond := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: vsc.Generation}
	if len(fds) > 0 {
		vsc.Status.Initialization = &infrav1.ClusterInitialization{Provisioned: ptr.To(true)}
		cond.Status, cond.Reason = metav1.ConditionTrue, "FailureDomainsKnown"
		cond.Message = fmt.Sprintf("%d failure domains from %d Providers", len(fds), len(providers))
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, "NoFailureDomains"
		cond.Message = fmt.Sprintf("no Ready Provider among the %d selected reports failure domains", len(providers))
	}
	meta.SetStatusCondition(&vsc.Status.Conditions, cond)
	unique := metav1.Condition{Type: FailureDomainsUniqueCondition, Status: metav1.ConditionTrue, Reason: "Unique",
		Message: "every failure domain name is published by one Provider", ObservedGeneration: vsc.Generation}
	if len(duplicates) > 0 {
		unique.Status, unique.Reason = metav1.ConditionFalse, "DuplicateFailureDomain"
		unique.Message = strings.Join(duplicates, "; ")
	}
	meta.SetStatusCondition(&vsc.Status.Conditions, unique)
	if apiequality.Semantic.DeepEqual(before, &vsc.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Status().Update(ctx, vsc)
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
				Attributes: map[string]string{"provider": name, "datacenter": fd.Datacenter, "cluster": fd.Cluster},
			})
		}
	}
	return fds, duplicates
}
