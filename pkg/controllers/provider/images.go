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

package provider

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/fetch"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/redact"
)

// ImageReconciler checks, for every VMImage, whether its source for this
// provider class exists where every failure domain of each Ready Provider
// in Namespace finds its images (a vSphere datacenter's templates, a
// libvirt host's volumes), and reports it in
// status.perProvider[namespace/name] (reasons: the kind's not-found and
// no-source reasons, ConnectFailed, LookupFailed). Entries of Providers in
// other namespaces, or of other classes, belong to other provider
// processes and are kept.
type ImageReconciler struct {
	Client    client.Client
	Class     string
	Kind      providers.ImageKind
	Namespace string
	Resync    time.Duration
	// Providers reads a Provider's credentials and logs in.
	Providers *Reconciler
	// Reader reads the Secrets an import names (by name, uncached).
	Reader client.Reader
	// Guard is where imports may fetch from.
	Guard fetch.Guard
	// ImportsPerProvider bounds a Provider's imports at once
	// (DefaultImportsPerProvider when zero).
	ImportsPerProvider int
	// Events records each failure domain's import phase changes (may be nil).
	Events events.EventRecorder

	jobs importJobs
	// jobDone wakes the controller for an image whose import job ended.
	jobDone chan event.GenericEvent
}

// SetupWithManager registers the controller; Provider changes recheck every image.
func (r *ImageReconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.jobDone = make(chan event.GenericEvent, 64)
	b := ctrl.NewControllerManagedBy(mgr).
		Named("vmimage-"+r.Class).
		For(&v1alpha1.VMImage{}).
		Watches(&v1alpha1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.allImages)).
		WatchesRawSource(source.Channel(r.jobDone, &handler.EnqueueRequestForObject{}))
	if r.Providers != nil && r.Providers.Kind.New != nil {
		// A machine gone may free a revision, or a deleted image.
		b = b.Watches(r.Providers.Kind.New(), handler.EnqueueRequestsFromMapFunc(r.allImages),
			builder.WithPredicates(predicate.Funcs{
				CreateFunc:  func(event.CreateEvent) bool { return false },
				UpdateFunc:  func(event.UpdateEvent) bool { return false },
				GenericFunc: func(event.GenericEvent) bool { return false },
			}))
	}
	return b.Complete(conflict.Requeue(r))
}

func (r *ImageReconciler) allImages(ctx context.Context, _ client.Object) []reconcile.Request {
	var list v1alpha1.VMImageList
	if err := r.Client.List(ctx, &list); err != nil {
		return nil
	}
	var out []reconcile.Request
	for _, img := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&img)})
	}
	return out
}

// Reconcile checks one image on every Provider of this namespace and class.
func (r *ImageReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	img := &v1alpha1.VMImage{}
	if err := r.Client.Get(ctx, req.NamespacedName, img); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var providers v1alpha1.ProviderList
	if err := r.Client.List(ctx, &providers, client.InNamespace(r.Namespace)); err != nil {
		return ctrl.Result{}, err
	}
	if !img.DeletionTimestamp.IsZero() {
		return r.reconcileImageDelete(ctx, img, providers.Items)
	}
	// Entries of another namespace's Providers, or of this namespace's
	// Providers of another class (others), belong to other provider
	// processes.
	mine := map[string]v1alpha1.ImageProviderStatus{}
	others := map[string]bool{}
	busy := false
	for i := range providers.Items {
		p := &providers.Items[i]
		switch {
		case !r.Providers.Serves(p):
			others[placement.ImageStatusKey(p)] = true
		case p.DeletionTimestamp.IsZero() && images.Serves(img, r.Class):
			// Held before anything is built: the image's deletion then
			// waits for this process to remove it (imagegc.go).
			if err := r.holdImage(ctx, img, p); err != nil {
				return ctrl.Result{}, err
			}
			st, importing := r.importStatus(ctx, img, p)
			st.Provider = placement.ImageStatusKey(p)
			mine[st.Provider] = st
			busy = busy || importing
		case p.DeletionTimestamp.IsZero():
			st := r.check(ctx, img, p)
			st.Provider = placement.ImageStatusKey(p)
			mine[st.Provider] = st
		}
	}
	var next []v1alpha1.ImageProviderStatus
	for _, s := range img.Status.PerProvider {
		// A process serving one Provider keeps every other's entry: its
		// siblings' workloads write them.
		onlyOther := r.Providers.Only != "" && s.Provider != r.Namespace+"/"+r.Providers.Only
		if !strings.HasPrefix(s.Provider, r.Namespace+"/") || others[s.Provider] || onlyOther {
			next = append(next, s)
		}
	}
	for _, s := range mine {
		next = append(next, s)
	}
	sort.Slice(next, func(i, j int) bool { return next[i].Provider < next[j].Provider })
	if !apiequality.Semantic.DeepEqual(next, img.Status.PerProvider) {
		r.recordTransitions(img, img.Status.PerProvider, next)
		img.Status.PerProvider = next
		if err := r.Client.Status().Update(ctx, img); err != nil {
			return ctrl.Result{}, err
		}
	}
	if busy {
		return ctrl.Result{RequeueAfter: importPoll}, nil
	}
	return ctrl.Result{RequeueAfter: r.Resync}, nil
}

func (r *ImageReconciler) check(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider) v1alpha1.ImageProviderStatus {
	var ref string
	for _, s := range img.Spec.Sources {
		if s.ProviderClass == r.Class {
			ref = s.Ref
		}
	}
	if ref == "" {
		return v1alpha1.ImageProviderStatus{Reason: r.Kind.NoSourceReason,
			Message: fmt.Sprintf("the image has no source for provider class %q", r.Class)}
	}
	if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonConnectFailed, Message: "the Provider is not Ready"}
	}
	backend, err := r.Providers.backend(ctx, p)
	if err != nil {
		// VMImages are readable by every user: the details (endpoint,
		// account) stay on the Provider and in this process's log.
		log.FromContext(ctx).Info("Cannot check an image: the Provider's backend is unreachable", "provider", placement.ImageStatusKey(p), "err", err)
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonConnectFailed,
			Message: "cannot reach the Provider's backend; the Provider's Ready condition has the details"}
	}
	scopes := map[failuredomain.Location]bool{}
	for _, fd := range p.Status.FailureDomains {
		scopes[r.Kind.Scope(failuredomain.LocationOf(fd))] = true
	}
	var names []failuredomain.Location
	for l := range scopes {
		names = append(names, l)
	}
	sort.Slice(names, func(i, j int) bool { return names[i].String() < names[j].String() })
	var missing []string
	for _, l := range names {
		ok, err := backend.ImageExists(ctx, l, ref)
		if err != nil {
			// VMImages are read by every authenticated user.
			return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonLookupFailed, Message: redact.Message(err.Error())}
		}
		if !ok {
			missing = append(missing, l.String())
		}
	}
	if len(missing) > 0 {
		return v1alpha1.ImageProviderStatus{Reason: r.Kind.NotFoundReason,
			Message: fmt.Sprintf("%s %q not found in %s(s) %s", r.Kind.Word, ref, r.Kind.ScopeWord, strings.Join(missing, ", "))}
	}
	return v1alpha1.ImageProviderStatus{Ready: true, Message: fmt.Sprintf("%s %q found in %d %s(s)", r.Kind.Word, ref, len(names), r.Kind.ScopeWord)}
}

// recordTransitions emits an Event for each failure domain whose import
// phase changed.
func (r *ImageReconciler) recordTransitions(img *v1alpha1.VMImage, before, after []v1alpha1.ImageProviderStatus) {
	if r.Events == nil {
		return
	}
	was := map[string]v1alpha1.ImagePhase{}
	for _, p := range before {
		for _, fd := range p.FailureDomains {
			was[p.Provider+"/"+fd.Name+"@"+fd.Revision] = fd.Phase
		}
	}
	for _, p := range after {
		for _, fd := range p.FailureDomains {
			if was[p.Provider+"/"+fd.Name+"@"+fd.Revision] == fd.Phase {
				continue
			}
			kind, reason := corev1.EventTypeNormal, string(fd.Phase)
			if fd.Phase == v1alpha1.ImagePhaseFailed {
				kind, reason = corev1.EventTypeWarning, fd.Reason
			}
			r.Events.Eventf(img, nil, kind, reason, "Import", "%s failure domain %s: %s %s", p.Provider, fd.Name, fd.Phase, redact.Message(fd.Message))
		}
	}
}
