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
)

// Reconciler reconciles VSphereClusters.
type Reconciler struct {
	Client client.Client
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
	if err := r.Client.List(ctx, &list, client.InNamespace(o.GetNamespace())); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, c := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return out
}

// Reconcile rebuilds status.failureDomains from the selected Providers.
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
	var providers v1alpha1.ProviderList
	if err := r.Client.List(ctx, &providers, client.InNamespace(vsc.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		return ctrl.Result{}, err
	}
	sort.Slice(providers.Items, func(i, j int) bool { return providers.Items[i].Name < providers.Items[j].Name })
	var fds []infrav1.FailureDomain
	seen := map[string]bool{}
	for _, p := range providers.Items {
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
			continue
		}
		for _, fd := range p.Status.FailureDomains {
			if seen[fd.Name] {
				continue // names are unique per Provider; across Providers the first wins
			}
			seen[fd.Name] = true
			fds = append(fds, infrav1.FailureDomain{
				Name: fd.Name, ControlPlane: ptr.To(true),
				Attributes: map[string]string{"provider": p.Name, "datacenter": fd.Datacenter, "cluster": fd.Cluster},
			})
		}
	}
	vsc.Status.FailureDomains = fds
	vsc.Status.ObservedGeneration = vsc.Generation
	cond := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: vsc.Generation}
	if len(fds) > 0 {
		vsc.Status.Initialization = &infrav1.ClusterInitialization{Provisioned: ptr.To(true)}
		cond.Status, cond.Reason = metav1.ConditionTrue, "FailureDomainsKnown"
		cond.Message = fmt.Sprintf("%d failure domains from %d Providers", len(fds), len(providers.Items))
	} else {
		cond.Status, cond.Reason = metav1.ConditionFalse, "NoFailureDomains"
		cond.Message = fmt.Sprintf("no Ready Provider among the %d selected reports failure domains", len(providers.Items))
	}
	meta.SetStatusCondition(&vsc.Status.Conditions, cond)
	if apiequality.Semantic.DeepEqual(before, &vsc.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Status().Update(ctx, vsc)
}
