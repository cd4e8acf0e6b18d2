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
// Package operator is "banlieue operator"'s controller: for every Provider
// it runs the provider workload its ProviderClass describes (pkg/workload)
// by server-side apply, records it in Provider.status.workload, and removes
// it with the Provider.
package operator

import (
	"context"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/controllers/finalizers"
	bac "github.com/firestoned/banlieue/pkg/generated/applyconfiguration/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/workload"
)

// Finalizer keeps a Provider until the operator has taken its workload's
// ServiceAccount out of its backend's ClusterRoleBinding and removed the
// workload (its namespaced objects go with it by owner reference too),
// once every other finalizer (the provider's own cleanup, which needs the
// workload running) is gone.
const Finalizer = "banlieue.io/operator"

// Reasons of status.workload.
const (
	ReasonAvailable             = "Available"
	ReasonProgressing           = "Progressing"
	ReasonProviderClassNotFound = "ProviderClassNotFound"
	ReasonProviderClassPaused   = "ProviderClassPaused"
	ReasonNamespaceNotServed    = "NamespaceNotServed"
	ReasonApplyFailed           = "ApplyFailed"
)

// Reconciler runs the workloads of Providers.
type Reconciler struct {
	Client client.Client
	// APIReader reads the backends' ClusterRoleBindings, which the
	// operator may get and update by name but not list or watch.
	APIReader client.Reader
	// SharedProviderNamespace is the install's shared-Provider namespace,
	// passed on to the providers it runs.
	SharedProviderNamespace string
}

// SetupWithManager watches Providers, ProviderClasses, and what the operator
// applied (so that a hand edit is undone and readiness recorded).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	owned := handler.EnqueueRequestsFromMapFunc(r.providersOfObject)
	return ctrl.NewControllerManagedBy(mgr).
		Named("operator").
		For(&v1alpha1.Provider{}).
		Watches(&v1alpha1.ProviderClass{}, handler.EnqueueRequestsFromMapFunc(r.providersOfClass)).
		Watches(&v1alpha1.VMImage{}, handler.EnqueueRequestsFromMapFunc(r.providersOfImage)).
		Watches(&appsv1.Deployment{}, owned).
		Watches(&corev1.ServiceAccount{}, owned).
		Watches(&rbacv1.Role{}, owned).
		Watches(&rbacv1.RoleBinding{}, owned).
		Watches(&corev1.Service{}, owned).
		Complete(conflict.Requeue(r))
}

// providersOfClass: every Provider of the class.
func (r *Reconciler) providersOfClass(ctx context.Context, obj client.Object) []reconcile.Request {
	return r.requests(ctx, obj.GetName(), "")
}

// providersOfImage: every Provider of the classes an image has a source
// for (their Roles grant its cloud configs by name).
func (r *Reconciler) providersOfImage(ctx context.Context, obj client.Object) []reconcile.Request {
	img, ok := obj.(*v1alpha1.VMImage)
	if !ok {
		return nil
	}
	var out []reconcile.Request
	for _, s := range img.Spec.Sources {
		out = append(out, r.requests(ctx, s.ProviderClass, "")...)
	}
	return out
}

// providersOfObject: the Provider a workload object serves, or every
// Provider of its class in its namespace when shared.
func (r *Reconciler) providersOfObject(ctx context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	class, ok := l[workload.ClassLabel]
	if !ok {
		return nil
	}
	ns := obj.GetNamespace()
	if name := l[workload.ProviderLabel]; name != "" {
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}}}
	}
	return r.requests(ctx, class, ns)
}

// requests are the Providers of class in namespace ("" for all).
func (r *Reconciler) requests(ctx context.Context, class, namespace string) []reconcile.Request {
	var list v1alpha1.ProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(namespace)); err != nil {
		log.FromContext(ctx).Error(err, "Listing Providers")
		return nil
	}
	var out []reconcile.Request
	for _, p := range list.Items {
		if p.Spec.ProviderClassRef.Name == class {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
	}
	return out
}

// Reconcile runs one Provider's workload, in phases: its class, deletion,
// where it may run, the objects, then its status.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	p := &v1alpha1.Provider{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	class := &v1alpha1.ProviderClass{}
	err := r.Client.Get(ctx, client.ObjectKey{Name: p.Spec.ProviderClassRef.Name}, class)
	if apierrors.IsNotFound(err) {
		class = nil
	} else if err != nil {
		return ctrl.Result{}, err
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, p, class)
	}
	switch {
	case class == nil:
		return ctrl.Result{}, r.record(ctx, p, &v1alpha1.ProviderWorkload{Reason: ReasonProviderClassNotFound,
			Message: fmt.Sprintf("ProviderClass %q does not exist: no provider runs for this Provider", p.Spec.ProviderClassRef.Name)})
	case p.Namespace != class.Spec.Namespace:
		return ctrl.Result{}, r.record(ctx, p, &v1alpha1.ProviderWorkload{Reason: ReasonNamespaceNotServed,
			Message: fmt.Sprintf("ProviderClass %q runs providers for the Providers of namespace %s only", class.Name, class.Spec.Namespace)})
	case class.Spec.Paused:
		w := r.recorded(ctx, p, class)
		w.Reason, w.Message = ReasonProviderClassPaused, fmt.Sprintf("ProviderClass %q is paused: its workloads are left as they are", class.Name)
		return ctrl.Result{}, r.record(ctx, p, w)
	}
	if err := finalizers.Add(ctx, r.Client, p, Finalizer); err != nil {
		return ctrl.Result{}, err
	}
	w, err := r.desired(ctx, class, p, nil)
	if err != nil {
		return ctrl.Result{}, err
	}
	// After a change of strategy, the other shape's workload would serve
	// the Provider too.
	if err := r.removeOtherShape(ctx, class, p); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.apply(ctx, w, class.Spec.Backend, nil); err != nil {
		if rerr := r.record(ctx, p, &v1alpha1.ProviderWorkload{Namespace: w.Namespace, DeploymentName: w.Name, Reason: ReasonApplyFailed,
			Message: fmt.Sprintf("applying the workload: %v", err)}); rerr != nil {
			return ctrl.Result{}, rerr
		}
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, r.record(ctx, p, r.recorded(ctx, p, class))
}

// desired is the workload serving p: its own, or its class's shared one
// (for the class's Providers of the namespace, without leaving).
func (r *Reconciler) desired(ctx context.Context, class *v1alpha1.ProviderClass, p, leaving *v1alpha1.Provider) (workload.Workload, error) {
	var images v1alpha1.VMImageList
	if err := r.Client.List(ctx, &images); err != nil {
		return workload.Workload{}, err
	}
	in := workload.Inputs{SharedProviderNamespace: r.SharedProviderNamespace, CloudConfigs: workload.CloudConfigs(class.Name, images.Items)}
	if class.Spec.DeploymentStrategy != v1alpha1.ProviderDeploymentShared {
		return workload.ForProvider(class, p, in), nil
	}
	var list v1alpha1.ProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(class.Spec.Namespace)); err != nil {
		return workload.Workload{}, err
	}
	served := slices.DeleteFunc(list.Items, func(o v1alpha1.Provider) bool {
		return o.Spec.ProviderClassRef.Name != class.Name || (leaving != nil && o.UID == leaving.UID)
	})
	return workload.Shared(class, served, in), nil
}

// apply server-side-applies the workload's objects, forcing its fields
// back where a hand edit changed them, then grants it its backend's
// cluster-wide role (without leaving, when it goes).
func (r *Reconciler) apply(ctx context.Context, w workload.Workload, backend string, leaving *v1alpha1.Provider) error {
	opts := []client.ApplyOption{client.FieldOwner(workload.FieldManager), client.ForceOwnership}
	// In this order: a binding's role must exist for RBAC to check that the
	// operator holds what it grants, and the pods' ServiceAccount too.
	for _, o := range []struct {
		what string
		ac   runtime.ApplyConfiguration
	}{
		{"ServiceAccount", w.ServiceAccount}, {"Role", w.Role}, {"RoleBinding", w.RoleBinding}, {"Deployment", w.Deployment},
		{"Service", w.Service},
	} {
		if err := r.Client.Apply(ctx, o.ac, opts...); err != nil {
			return fmt.Errorf("%s: %w", o.what, err)
		}
	}
	return r.bindBackend(ctx, backend, leaving)
}

// bindBackend sets the subjects of backend's shipped ClusterRoleBinding to
// the ServiceAccounts of every workload of the backend's classes (but
// leaving's). Recomputed whole each time, so a Provider gone, a class
// deleted or a strategy changed drops its subject without bookkeeping.
// The operator may update that binding by name and bind that role only
// (artifacts/deploy/operator/rbac-BACKEND.yaml): it creates and deletes
// no cluster-scoped RBAC.
func (r *Reconciler) bindBackend(ctx context.Context, backend string, leaving *v1alpha1.Provider) error {
	served, err := r.servedBy(ctx, backend, leaving)
	if err != nil {
		return err
	}
	name := workload.BackendClusterRoleBinding(backend)
	crb := &rbacv1.ClusterRoleBinding{}
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: name}, crb); err != nil {
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("ClusterRoleBinding %s is not installed (artifacts/deploy/operator/rbac-%s.yaml): the %s workloads cannot be granted their cluster-wide role", name, backend, backend)
		}
		return fmt.Errorf("reading ClusterRoleBinding %s: %w", name, err)
	}
	want := workload.Subjects(served)
	if crb.RoleRef.Name == workload.BackendClusterRole(backend) && slices.Equal(crb.Subjects, want) {
		return nil
	}
	if crb.RoleRef.Name != workload.BackendClusterRole(backend) {
		return fmt.Errorf("ClusterRoleBinding %s binds %s, not %s: not touching it", name, crb.RoleRef.Name, workload.BackendClusterRole(backend))
	}
	crb.Subjects = want
	if err := r.Client.Update(ctx, crb, client.FieldOwner(workload.FieldManager)); err != nil {
		return fmt.Errorf("updating ClusterRoleBinding %s: %w", name, err)
	}
	return nil
}

// servedBy are the Providers the operator runs backend's workloads for:
// those of the backend's classes in each class's namespace, but leaving.
func (r *Reconciler) servedBy(ctx context.Context, backend string, leaving *v1alpha1.Provider) ([]workload.Served, error) {
	var classes v1alpha1.ProviderClassList
	if err := r.Client.List(ctx, &classes); err != nil {
		return nil, err
	}
	var served []workload.Served
	for i := range classes.Items {
		class := &classes.Items[i]
		if class.Spec.Backend != backend {
			continue
		}
		var list v1alpha1.ProviderList
		if err := r.Client.List(ctx, &list, client.InNamespace(class.Spec.Namespace)); err != nil {
			return nil, err
		}
		for _, p := range list.Items {
			if p.Spec.ProviderClassRef.Name == class.Name && (leaving == nil || p.UID != leaving.UID) {
				served = append(served, workload.Served{Class: class, Provider: p.Name})
			}
		}
	}
	return served, nil
}

// recorded is the workload as it runs: its Deployment's ready replicas.
func (r *Reconciler) recorded(ctx context.Context, p *v1alpha1.Provider, class *v1alpha1.ProviderClass) *v1alpha1.ProviderWorkload {
	name := workload.Name(class.Name, p.Name)
	if class.Spec.DeploymentStrategy == v1alpha1.ProviderDeploymentShared {
		name = workload.Name(class.Name, "")
	}
	w := &v1alpha1.ProviderWorkload{Namespace: class.Spec.Namespace, DeploymentName: name}
	d := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: w.Namespace, Name: name}, d); err != nil {
		w.Reason, w.Message = ReasonProgressing, "the Deployment is not created yet"
		return w
	}
	w.ReadyReplicas = d.Status.ReadyReplicas
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	if w.ReadyReplicas >= want && want > 0 {
		w.Reason, w.Message = ReasonAvailable, fmt.Sprintf("%d of %d replicas ready", w.ReadyReplicas, want)
	} else {
		w.Reason, w.Message = ReasonProgressing, fmt.Sprintf("%d of %d replicas ready", w.ReadyReplicas, want)
	}
	return w
}

// record applies status.workload (the operator's field only: the
// provider's conditions and failure domains are its own).
func (r *Reconciler) record(ctx context.Context, p *v1alpha1.Provider, w *v1alpha1.ProviderWorkload) error {
	if cur := p.Status.Workload; cur != nil && *cur == *w {
		return nil
	}
	ac := bac.Provider(p.Name, p.Namespace).WithStatus(bac.ProviderStatus().WithWorkload(bac.ProviderWorkload().
		WithNamespace(w.Namespace).WithDeploymentName(w.DeploymentName).WithReadyReplicas(w.ReadyReplicas).
		WithReason(w.Reason).WithMessage(w.Message)))
	return r.Client.Status().Apply(ctx, ac, client.FieldOwner(workload.FieldManager), client.ForceOwnership)
}

// finalize removes p's workload once only this finalizer holds p: its
// subject in the backend's binding, and its namespaced objects (their owner
// reference would too, later); a shared workload stops granting p's
// credentials.
func (r *Reconciler) finalize(ctx context.Context, p *v1alpha1.Provider, class *v1alpha1.ProviderClass) error {
	if !controllerutil.ContainsFinalizer(p, Finalizer) {
		return nil
	}
	if slices.ContainsFunc(p.Finalizers, func(f string) bool { return f != Finalizer }) {
		// The provider still cleans up, with the workload running.
		return nil
	}
	classShared := class != nil && class.Spec.DeploymentStrategy == v1alpha1.ProviderDeploymentShared
	switch {
	case classShared && p.Namespace == class.Spec.Namespace && !class.Spec.Paused:
		w, err := r.desired(ctx, class, p, p)
		if err != nil {
			return err
		}
		if err := r.apply(ctx, w, class.Spec.Backend, p); err != nil {
			return err
		}
	case !classShared:
		if class != nil {
			if err := r.bindBackend(ctx, class.Spec.Backend, p); err != nil {
				return err
			}
		}
		if err := r.deleteOwn(ctx, p); err != nil {
			return err
		}
	}
	return finalizers.Remove(ctx, r.Client, p, Finalizer)
}

// removeOtherShape deletes the shared workload of p's class when it runs
// PerProvider, and p's own when it runs Shared, if there is one (read from
// the cache, so that a reconcile costs no request when there is none).
func (r *Reconciler) removeOtherShape(ctx context.Context, class *v1alpha1.ProviderClass, p *v1alpha1.Provider) error {
	only := ""
	if class.Spec.DeploymentStrategy == v1alpha1.ProviderDeploymentShared {
		only = p.Name
	}
	err := r.Client.Get(ctx, client.ObjectKey{Namespace: class.Spec.Namespace, Name: workload.Name(class.Name, only)}, &appsv1.Deployment{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	log.FromContext(ctx).Info("Removing the workload of the class's former strategy", "class", class.Name, "strategy", class.Spec.DeploymentStrategy)
	return r.deleteWorkload(ctx, class.Name, class.Spec.Namespace, only)
}

// deleteOwn deletes the per-Provider workload of p.
func (r *Reconciler) deleteOwn(ctx context.Context, p *v1alpha1.Provider) error {
	return r.deleteWorkload(ctx, p.Spec.ProviderClassRef.Name, p.Namespace, p.Name)
}

// deleteWorkload deletes the workload of class in namespace serving only
// (or shared, when only is empty).
func (r *Reconciler) deleteWorkload(ctx context.Context, class, namespace, only string) error {
	name := workload.Name(class, only)
	meta := func(ns, n string) metav1.ObjectMeta { return metav1.ObjectMeta{Namespace: ns, Name: n} }
	background := client.PropagationPolicy(metav1.DeletePropagationBackground)
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: meta(namespace, name)},
		&rbacv1.RoleBinding{ObjectMeta: meta(namespace, name)},
		&rbacv1.Role{ObjectMeta: meta(namespace, name)},
		&corev1.ServiceAccount{ObjectMeta: meta(namespace, workload.ServiceAccountName(class, only))},
		&corev1.Service{ObjectMeta: meta(namespace, workload.MetricsServiceName(class, only))},
	} {
		if err := r.Client.Delete(ctx, obj, background); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting %T %s: %w", obj, obj.GetName(), err)
		}
	}
	return nil
}
