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

// Package virtualmachine is the core VirtualMachine controller: it validates
// that a VM's class and image resolve, schedules it on a Provider and
// failure domain (pkg/placement), creates its infrastructure machine (of
// the kind the Provider's class registered in pkg/infrastructure) from the
// resolved spec (pkg/resolve), and mirrors the machine's status back
// through the Cluster API contract fields. It knows no backend, and never
// sets provisioned by itself.
package virtualmachine

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/resolve"
)

const (
	// Finalizer holds a VM until its infrastructure machine is gone; the
	// API server adds it with the status write that places the VM.
	Finalizer = v1alpha1.VirtualMachineFinalizer
	// NameLabel marks objects banlieue created.
	NameLabel = "app.kubernetes.io/name"
	// VMLabel names the VirtualMachine an infrastructure object belongs to.
	VMLabel = "banlieue.io/virtualmachine"

	reasonWaitingForInfrastructure = "WaitingForInfrastructure"
	reasonInfrastructureReady      = "InfrastructureReady"
	reasonInfrastructureNotReady   = "InfrastructureNotReady"
	reasonNotScheduled             = "NotScheduled"
	reasonNotProvisioned           = "NotProvisioned"
	reasonPoweredOff               = string(v1alpha1.PowerStatePoweredOff)
	reasonSuspended                = string(v1alpha1.PowerStateSuspended)
	reasonWaitingForAddress        = "WaitingForAddress"
	reasonReachable                = "Reachable"
	reasonPaused                   = "Paused"
	reasonNotPaused                = "NotPaused"
)

// Reconciler reconciles VirtualMachines.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	// Infrastructure maps a Provider's class to its machine kind.
	Infrastructure *infrastructure.Registry
	// SharedProviderNamespace holds the Providers every namespace's VMs
	// may run on, besides their own namespace's.
	SharedProviderNamespace string

	// Workers reconcile VMs in parallel; placement decisions themselves are
	// taken one at a time (see placing). 0 means DefaultWorkers.
	Workers int

	// placing serializes load → decide → assume, so concurrent workers place
	// VMs exactly as one would, while their API writes overlap.
	placing sync.Mutex
	// assumed remembers placements written but maybe not yet in the cache,
	// so that VMs reconciled back to back still spread evenly (as
	// kube-scheduler's assume cache does). Keyed by VM UID.
	mu      sync.Mutex
	assumed map[types.UID]assumption
	// placed counts the placements the cache shows, per failure domain,
	// from the VM informer's events (see watchLoad).
	placed *placement.Load
	// created holds the machines this controller created that the cache
	// may not show yet (namespace/name → when), see expectCreated.
	created map[string]time.Time
	// loadSynced is the load handler's registration, once added: whether
	// placed has seen the informer's initial list.
	loadSynced atomic.Pointer[toolscache.ResourceEventHandlerRegistration]
}

// DefaultWorkers is how many VMs are reconciled at once by default: each
// costs a few sequential API writes, which overlap across workers.
const DefaultWorkers = 8

// assumption is where a VM was placed: its Provider (namespace/name) and
// failure domain.
type assumption struct {
	provider, failureDomain string
}

// SetupWithManager registers the controller. Workers run in parallel but
// take placement decisions one at a time, each seeing the load the previous
// one created; leader election keeps one replica acting.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.assumed = map[types.UID]assumption{}
	collected.Store(&vmSource{reader: mgr.GetCache(), elected: mgr.Elected()})
	if err := r.watchLoad(mgr); err != nil {
		return err
	}
	workers := r.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("virtualmachine").
		For(&v1alpha1.VirtualMachine{})
	for _, kind := range r.Infrastructure.Kinds() {
		// The scheme's type for the kind: watched through the shared cache
		// like any object, without the core naming it.
		owned, err := infrastructure.NewObject(mgr.GetScheme(), kind, "", "")
		if err != nil {
			return err
		}
		b = b.Owns(owned, builder.WithPredicates(notOnly(kind.QuietStatusFields)))
	}
	// Its pool interfaces' address claims (Cluster API's IPAM contract).
	b = b.Owns(&ipamv1.IPAddressClaim{})
	return b.
		// Unscheduled VMs wait on Providers, classes and images.
		Watches(&v1alpha1.Provider{}, handler.EnqueueRequestsFromMapFunc(r.unscheduledVMs)).
		Watches(&v1alpha1.VMImage{}, handler.EnqueueRequestsFromMapFunc(r.unscheduledVMs)).
		// Every VM of a class: placed ones say ClassOutOfDate.
		Watches(&v1alpha1.VMClass{}, handler.EnqueueRequestsFromMapFunc(r.vmsOfClass)).
		WithOptions(controller.Options{MaxConcurrentReconciles: workers}).
		Complete(conflict.Requeue(r))
}

// notOnly drops machine updates that change only these status fields (the
// provider's task in flight): nothing a VirtualMachine mirrors changed.
func notOnly(quietStatusFields []string) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, err1 := runtime.DefaultUnstructuredConverter.ToUnstructured(e.ObjectOld)
		c, err2 := runtime.DefaultUnstructuredConverter.ToUnstructured(e.ObjectNew)
		if err1 != nil || err2 != nil {
			return true
		}
		for _, x := range []map[string]interface{}{o, c} {
			unstructured.RemoveNestedField(x, "metadata", "resourceVersion")
			unstructured.RemoveNestedField(x, "metadata", "managedFields")
			for _, f := range quietStatusFields {
				unstructured.RemoveNestedField(x, "status", f)
			}
		}
		return !apiequality.Semantic.DeepEqual(o, c)
	}}
}

func (r *Reconciler) unscheduledVMs(ctx context.Context, _ client.Object) []reconcile.Request {
	var vms v1alpha1.VirtualMachineList
	if err := r.Client.List(ctx, &vms, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing VirtualMachines to requeue")
		return nil
	}
	var out []reconcile.Request
	for _, vm := range vms.Items {
		if vm.Status.Scheduled == nil {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vm)})
		}
	}
	return out
}

func (r *Reconciler) vmsOfClass(ctx context.Context, class client.Object) []reconcile.Request {
	var vms v1alpha1.VirtualMachineList
	if err := r.Client.List(ctx, &vms, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing VirtualMachines to requeue")
		return nil
	}
	var out []reconcile.Request
	for _, vm := range vms.Items {
		if vm.Spec.ClassRef.Name == class.GetName() {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vm)})
		}
	}
	return out
}

// pinClass is the class vm is built from. Until the VM is placed it is
// the class as it is (live), recorded in status.classRevision; after, the
// pinned revision, pinned again from live when the VM carries the
// update-class annotation (which writeBack removes). ClassOutOfDate says whether
// live differs. nil when there is neither.
func (r *Reconciler) pinClass(vm *v1alpha1.VirtualMachine, live *v1alpha1.VMClass) *v1alpha1.VMClass {
	pinned := resolve.PinnedClass(vm)
	switch {
	case pinned == nil && live == nil:
		return nil
	case pinned == nil:
		vm.Status.ClassRevision, pinned = resolve.Pin(live), live
	case resolve.WantsClassUpdate(vm):
		requestDone(vm, resolve.UpdateClassAnnotation)
		if live == nil {
			r.event(vm, corev1.EventTypeWarning, resolve.ReasonClassDeleted, "UpdateClass",
				fmt.Sprintf("VMClass %s is gone: the VM keeps generation %d", vm.Spec.ClassRef.Name, pinned.Generation))
			break
		}
		r.event(vm, corev1.EventTypeNormal, "ClassUpdated", "UpdateClass",
			fmt.Sprintf("now built from generation %d of VMClass %s (was %d)", live.Generation, live.Name, pinned.Generation))
		vm.Status.ClassRevision, pinned = resolve.Pin(live), live
	}
	status, reason, msg := resolve.ClassStatus(vm, pinned, live)
	r.setCondition(vm, v1alpha1.VirtualMachineClassOutOfDate, status, reason, msg)
	return pinned
}

// requestDone drops the annotation key (a request acted on) from vm in
// memory; writeBack removes it from the stored VM once the status that
// records the request's effect is written.
func requestDone(vm *v1alpha1.VirtualMachine, key string) {
	delete(vm.Annotations, key)
}

// writeBack writes what a reconcile decided: vm's status (before is the
// status it read), then the removal of the requests it acted on (keys of
// asked that vm no longer carries). In that order, so that no read, the
// cache's above all, shows a request gone without its effect: a reconcile
// on such a read would undo it (build the machine from the class pinned
// before the update-class request, say) before its own status write
// conflicted.
func (r *Reconciler) writeBack(ctx context.Context, asked map[string]string, before *v1alpha1.VirtualMachineStatus, vm *v1alpha1.VirtualMachine) error {
	var done []string
	for key := range asked {
		if _, still := vm.Annotations[key]; !still {
			done = append(done, key)
		}
	}
	base := vm.DeepCopy()
	base.Status = *before
	// Locked: a status decided on a stale read (a placement above all)
	// conflicts instead of replacing a newer one.
	if err := patch.Status(ctx, r.Client, base, vm, true); err != nil {
		return fmt.Errorf("updating status: %w", err)
	}
	if len(done) == 0 {
		return nil
	}
	merge := client.MergeFrom(vm.DeepCopy())
	for _, key := range done {
		delete(vm.Annotations, key)
	}
	if err := r.Client.Patch(ctx, vm, merge); err != nil {
		return fmt.Errorf("removing %v: %w", done, err)
	}
	return nil
}

// Reconcile drives one VirtualMachine one step.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	vm := &v1alpha1.VirtualMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := vm.Status.DeepCopy()
	asked := maps.Clone(vm.Annotations)
	var result ctrl.Result
	var err error
	normal := false
	switch {
	case vm.Spec.Paused:
		// Before deletion: a paused VM is not even deleted until resumed.
		err = r.reconcilePaused(ctx, vm)
	case !vm.DeletionTimestamp.IsZero():
		return r.reconcileDelete(ctx, vm)
	default:
		if err := r.holdPlaced(ctx, vm); err != nil {
			return ctrl.Result{}, err
		}
		r.setCondition(vm, v1alpha1.VirtualMachinePaused, metav1.ConditionFalse, reasonNotPaused, "spec.paused is false")
		result, err = r.reconcileNormal(ctx, vm)
		normal = true
	}
	vm.Status.ObservedGeneration = vm.Generation
	if uerr := r.writeBack(ctx, asked, before, vm); uerr != nil {
		// A conflict is requeued quietly (pkg/controllers/conflict).
		return ctrl.Result{}, errors.Join(err, uerr)
	}
	if normal {
		// Without an error, an unscheduled VM was just tried.
		observe(before, vm, err == nil)
	}
	if s := vm.Status.Scheduled; s != nil && before.Scheduled == nil {
		log.Info("Scheduled", "provider", s.Provider, "failureDomain", s.FailureDomain)
	}
	return result, err
}

// holdPlaced adds the finalizer to a placed VM that lacks it. The API
// server adds it with the status write that records the placement; this
// write is for a VM whose status will not change (its finalizer removed
// by hand, say).
func (r *Reconciler) holdPlaced(ctx context.Context, vm *v1alpha1.VirtualMachine) error {
	if vm.Status.Scheduled == nil {
		return nil
	}
	if err := patch.AddFinalizer(ctx, patch.Object(r.Client), vm, Finalizer); err != nil {
		return fmt.Errorf("adding finalizer: %w", err)
	}
	return nil
}

// reconcileNormal drives a VM that is neither paused nor deleted, in
// phases: resolve its class and image; schedule it; claim its pool
// addresses (before any machine is built); migrate it when its placement
// no longer holds; build its machine and mirror it.
func (r *Reconciler) reconcileNormal(ctx context.Context, vm *v1alpha1.VirtualMachine) (ctrl.Result, error) {
	resolved, image, err := r.resolve(ctx, vm)
	if err != nil || resolved == nil {
		return ctrl.Result{}, err // nil: invalid, and said so
	}
	providers, err := r.candidates(ctx, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	in := placement.Input{VM: vm, Resolved: resolved, Image: image, Providers: providers, Backend: r.backend(resolved)}
	if scheduled, err := r.schedule(ctx, vm, in); err != nil || !scheduled {
		return ctrl.Result{}, err
	}
	// Pool addresses are claimed and known before any machine is built
	// (a migration's target too, which keeps them): never without.
	if reason, msg, err := r.claimAddresses(ctx, vm, resolved); err != nil {
		return ctrl.Result{}, err
	} else if reason != "" {
		r.setCondition(vm, v1alpha1.VirtualMachineInfrastructureReady, metav1.ConditionFalse, reason, msg)
		r.setCondition(vm, v1alpha1.VirtualMachineReady, metav1.ConditionFalse, reason, msg)
		return ctrl.Result{}, nil
	}
	// A placement that no longer holds (or a request) recreates the VM
	// elsewhere; until the new machine is Ready the old one is mirrored.
	// The migration's deadline (or the wait after one timed out) requeues.
	requeue, err := r.migration(ctx, vm, in)
	if err != nil {
		return ctrl.Result{}, err
	}
	res, err := r.reconcileMachine(ctx, vm, resolved, providers)
	if err == nil && res.IsZero() {
		res.RequeueAfter = requeue
	}
	return res, err
}

// resolve reads vm's class (as pinned) and image and resolves them
// (PlacementValid). A nil resolved with no error: the VM is invalid, and
// its conditions say why.
func (r *Reconciler) resolve(ctx context.Context, vm *v1alpha1.VirtualMachine) (*v1alpha1.ResolvedVirtualMachine, *v1alpha1.VMImage, error) {
	live := &v1alpha1.VMClass{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: vm.Spec.ClassRef.Name}, live); apierrors.IsNotFound(err) {
		live = nil
	} else if err != nil {
		return nil, nil, err
	}
	class := r.pinClass(vm, live)
	if class == nil {
		r.invalid(vm, placement.ReasonClassNotFound, fmt.Sprintf("VMClass %s does not exist", vm.Spec.ClassRef.Name))
		return nil, nil, nil
	}
	image := &v1alpha1.VMImage{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: vm.Spec.ImageRef.Name}, image); err != nil {
		if apierrors.IsNotFound(err) {
			r.invalid(vm, placement.ReasonImageNotFound, fmt.Sprintf("VMImage %s does not exist", vm.Spec.ImageRef.Name))
			return nil, nil, nil
		}
		return nil, nil, err
	}
	// The import's revision, as the class: followed until the VM is
	// placed, kept after (what was built of it stays while a machine
	// names it).
	vm.Status.ImageRevision = resolve.ImageRevision(vm, image)
	resolved, err := resolve.Resolve(vm, class, image)
	var overrideErr *resolve.OverrideError
	if errors.As(err, &overrideErr) {
		r.invalid(vm, placement.ReasonInvalidOverrides, overrideErr.Error())
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if mismatch := resolve.CheckImage(class, image); mismatch != nil && vm.Status.Scheduled == nil {
		// Nothing is built for it; a VM already placed keeps running.
		r.invalid(vm, placement.ReasonImageClassMismatch, mismatch.Error())
		return nil, nil, nil
	}
	r.setCondition(vm, v1alpha1.VirtualMachinePlacementValid, metav1.ConditionTrue, placement.ReasonResolved,
		fmt.Sprintf("VMClass %s and VMImage %s resolve", class.Name, image.Name))
	return resolved, image, nil
}

// schedule places a VM not placed yet (Scheduled, an Event); false: no
// candidate fits, and its conditions say why.
func (r *Reconciler) schedule(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) (bool, error) {
	if vm.Status.Scheduled != nil {
		return true, nil
	}
	d, err := r.decide(ctx, in)
	if err != nil {
		return false, err
	}
	if !d.Fits {
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled); c == nil || c.Reason != d.Reason || c.Message != d.Message {
			r.event(vm, corev1.EventTypeWarning, d.Reason, "Scheduling", d.Message)
		}
		r.setCondition(vm, v1alpha1.VirtualMachineScheduled, metav1.ConditionFalse, d.Reason, d.Message)
		r.setCondition(vm, v1alpha1.VirtualMachineReady, metav1.ConditionFalse, reasonNotScheduled, "the VM is not scheduled")
		return false, nil
	}
	vm.Status.Scheduled = d.Scheduled
	r.setCondition(vm, v1alpha1.VirtualMachineScheduled, metav1.ConditionTrue, placement.ReasonScheduled, d.Message)
	r.event(vm, corev1.EventTypeNormal, placement.ReasonScheduled, "Scheduling", d.Message)
	return true, nil
}

// reconcileMachine builds the VM's machine on the Provider it is placed
// on and mirrors it into the VM's status.
func (r *Reconciler) reconcileMachine(ctx context.Context, vm *v1alpha1.VirtualMachine, resolved *v1alpha1.ResolvedVirtualMachine, providers []v1alpha1.Provider) (ctrl.Result, error) {
	provider := findProvider(providers, vm)
	if provider == nil {
		// The chosen Provider is gone; keep the placement and say so.
		r.setCondition(vm, v1alpha1.VirtualMachineInfrastructureReady, metav1.ConditionFalse, reasonInfrastructureNotReady,
			fmt.Sprintf("Provider %s no longer exists", vm.Status.Scheduled.Provider))
		return ctrl.Result{}, nil
	}
	kind, ok := r.Infrastructure.For(provider.Spec.ProviderClassRef.Name)
	if !ok {
		r.setCondition(vm, v1alpha1.VirtualMachineInfrastructureReady, metav1.ConditionFalse, reasonInfrastructureNotReady,
			fmt.Sprintf("no backend serves provider class %q", provider.Spec.ProviderClassRef.Name))
		return ctrl.Result{}, nil
	}
	m, err := r.ensureMachine(ctx, kind, vm, resolved, provider)
	switch {
	case apierrors.HasStatusCause(err, corev1.NamespaceTerminatingCause):
		// The namespace is being deleted (its machines first, maybe):
		// the VM goes with it, there is nothing to create.
		return ctrl.Result{}, nil
	case apierrors.IsAlreadyExists(err):
		// Created a moment ago and not in the cache yet; its add event
		// requeues the VM (we own it). The requeue is for a machine
		// of that name that is not ours: the next pass then says so.
		return ctrl.Result{RequeueAfter: time.Second}, nil
	case err != nil:
		return ctrl.Result{}, err
	}
	observed, err := r.read(m)
	if err != nil {
		return ctrl.Result{}, err
	}
	mirror(vm, kind.GroupVersionKind.Kind, m.GetName(), observed, len(resolved.Spec.Interfaces) > 0)
	r.mirrorRestart(vm, observed.Restart)
	return ctrl.Result{}, nil
}

// mirrorRestart copies how far the machine's provider took the VM's
// restart onto it, with an Event once it is settled.
func (r *Reconciler) mirrorRestart(vm *v1alpha1.VirtualMachine, o infrastructure.ObservedRestart) {
	rs := vm.Status.Restart
	if rs == nil || o.ID != rs.ID || o.Phase == "" || string(rs.Phase) == o.Phase {
		return
	}
	rs.Phase, rs.Message = v1alpha1.RestartPhase(o.Phase), o.Message
	switch rs.Phase {
	case v1alpha1.RestartDone:
		r.event(vm, corev1.EventTypeNormal, "Restarted", "Restart", fmt.Sprintf("restart %s asked by %s: the VM was reset", rs.ID, rs.Requester))
	case v1alpha1.RestartFailed, v1alpha1.RestartUnknown:
		r.event(vm, corev1.EventTypeWarning, "Restart"+string(rs.Phase), "Restart", fmt.Sprintf("restart %s: %s", rs.ID, rs.Message))
	}
}

// invalid records a placement that cannot be resolved.
func (r *Reconciler) invalid(vm *v1alpha1.VirtualMachine, reason, message string) {
	if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePlacementValid); c == nil || c.Reason != reason {
		r.event(vm, corev1.EventTypeWarning, reason, "Resolving", message)
	}
	r.setCondition(vm, v1alpha1.VirtualMachinePlacementValid, metav1.ConditionFalse, reason, message)
	if vm.Status.Scheduled == nil {
		r.setCondition(vm, v1alpha1.VirtualMachineScheduled, metav1.ConditionFalse, reason, message)
		r.setCondition(vm, v1alpha1.VirtualMachineReady, metav1.ConditionFalse, reasonNotScheduled, "the VM is not scheduled")
	}
}

func (r *Reconciler) setCondition(vm *v1alpha1.VirtualMachine, condType string, status metav1.ConditionStatus, reason, message string) {
	meta.SetStatusCondition(&vm.Status.Conditions, metav1.Condition{
		Type: condType, Status: status, Reason: reason, Message: truncate(message, 32*1024), ObservedGeneration: vm.Generation,
	})
}

func (r *Reconciler) event(vm *v1alpha1.VirtualMachine, eventType, reason, action, message string) {
	if r.Recorder != nil {
		r.Recorder.Eventf(vm, nil, eventType, reason, action, "%s", truncate(message, 1024))
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// candidates lists the Providers that may run vm.
func (r *Reconciler) candidates(ctx context.Context, vm *v1alpha1.VirtualMachine) ([]v1alpha1.Provider, error) {
	var out []v1alpha1.Provider
	for _, ns := range placement.CandidateNamespaces(vm.Namespace, r.SharedProviderNamespace) {
		var list v1alpha1.ProviderList
		if err := r.Client.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing Providers in %s: %w", ns, err)
		}
		out = append(out, list.Items...)
	}
	return out, nil
}

func findProvider(providers []v1alpha1.Provider, vm *v1alpha1.VirtualMachine) *v1alpha1.Provider {
	want := placement.QualifiedProvider(vm.Namespace, vm.Status.Scheduled.Provider)
	for i := range providers {
		if placement.ImageStatusKey(&providers[i]) == want {
			return &providers[i]
		}
	}
	return nil
}

// decide places in.VM against the current load and, when it fits, assumes
// the placement, as one step no other worker interleaves with.
func (r *Reconciler) decide(ctx context.Context, in placement.Input) (placement.Decision, error) {
	r.placing.Lock()
	defer r.placing.Unlock()
	load, peers, err := r.load(ctx, in.VM)
	if err != nil {
		return placement.Decision{}, err
	}
	in.Load, in.Peers = load, peers
	d := placement.Decide(in)
	if d.Fits {
		r.assume(in.VM.UID, in.VM.Namespace, d.Scheduled)
	}
	return d, nil
}

func (r *Reconciler) assume(uid types.UID, namespace string, s *v1alpha1.ScheduledPlacement) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.assumed[uid] = assumption{provider: placement.QualifiedProvider(namespace, s.Provider), failureDomain: s.FailureDomain}
}

// reconcileDelete deletes the VM's infrastructure machine (the kind its
// infrastructureRef names) and releases the VM once it is gone.
func (r *Reconciler) reconcileDelete(ctx context.Context, vm *v1alpha1.VirtualMachine) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(vm, Finalizer) {
		return ctrl.Result{}, nil
	}
	// Every machine of the VM, of any kind: a migration's target too.
	machines, err := r.machinesOf(ctx, vm)
	if err != nil {
		return ctrl.Result{}, err
	}
	for _, m := range machines {
		if err := r.deleteMachine(ctx, vm, m); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(machines) > 0 {
		return ctrl.Result{}, nil // their deletion events requeue us
	}
	// The machine is gone: its addresses go back to their pools.
	if released, err := r.releaseAddresses(ctx, vm); err != nil || !released {
		return ctrl.Result{}, err // a claim's deletion requeues us
	}
	if err := patch.RemoveFinalizer(ctx, patch.Object(r.Client), vm, Finalizer); err != nil {
		return ctrl.Result{}, fmt.Errorf("removing finalizer: %w", err)
	}
	r.mu.Lock()
	delete(r.assumed, vm.UID)
	r.mu.Unlock()
	return ctrl.Result{}, nil
}

// machinesOf lists the machines vm controls, of every registered kind.
func (r *Reconciler) machinesOf(ctx context.Context, vm *v1alpha1.VirtualMachine) ([]client.Object, error) {
	var out []client.Object
	for _, kind := range r.Infrastructure.Kinds() {
		gvk := kind.GroupVersionKind
		o, err := r.Client.Scheme().New(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err != nil {
			return nil, fmt.Errorf("infrastructure kind %s: %w", gvk, err)
		}
		list := o.(client.ObjectList)
		if err := r.Client.List(ctx, list, client.InNamespace(vm.Namespace), client.MatchingLabels{VMLabel: vm.Name}); err != nil {
			if meta.IsNoMatchError(err) {
				continue
			}
			return nil, err
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			return nil, err
		}
		for _, it := range items {
			if m, ok := it.(client.Object); ok && metav1.IsControlledBy(m, vm) {
				m.GetObjectKind().SetGroupVersionKind(gvk)
				out = append(out, m)
			}
		}
	}
	return out, nil
}

// deleteMachine deletes m (resumed first if the VM had paused it).
func (r *Reconciler) deleteMachine(ctx context.Context, vm *v1alpha1.VirtualMachine, m client.Object) error {
	kind := m.GetObjectKind().GroupVersionKind().Kind
	if _, paused := m.GetAnnotations()[infrastructure.PausedAnnotation]; paused {
		// Paused with the VM, which has resumed: its provider must act.
		merge := client.MergeFrom(m.DeepCopyObject().(client.Object))
		annotations := m.GetAnnotations()
		delete(annotations, infrastructure.PausedAnnotation)
		m.SetAnnotations(annotations)
		if err := r.Client.Patch(ctx, m, merge); err != nil {
			return fmt.Errorf("resuming %s %s: %w", kind, m.GetName(), err)
		}
	}
	if !m.GetDeletionTimestamp().IsZero() {
		return nil
	}
	if err := r.Client.Delete(ctx, m); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting %s %s: %w", kind, m.GetName(), err)
	}
	r.event(vm, corev1.EventTypeNormal, "Deleting", "Deleting", fmt.Sprintf("deleting %s %s", kind, m.GetName()))
	return nil
}

// backend asks the backend of a candidate Provider's class what it cannot
// build of resolved, before placing (placement.Input.Backend).
func (r *Reconciler) backend(resolved *v1alpha1.ResolvedVirtualMachine) func(*v1alpha1.Provider) *field.Error {
	if r.Infrastructure == nil {
		return nil
	}
	return func(p *v1alpha1.Provider) *field.Error { return r.Infrastructure.Admit(resolved, p) }
}
