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
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/conflict"
	"github.com/firestoned/banlieue/pkg/controllers/patch"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/redact"
)

// Reasons of a machine's Ready condition besides the power states.
const (
	ReasonProvisioningFailed = "ProvisioningFailed"
	ReasonPowerStatePending  = "PowerStatePending"
	// ReasonRestarting: the backend restarts the VM to apply its spec.
	ReasonRestarting              = "Restarting"
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	ReasonUserDataMissing         = "UserDataMissing"
	// ReasonUserDataForbidden: the machine's namespace has not granted this
	// provider's identity the reading of its user data.
	ReasonUserDataForbidden = "UserDataForbidden"
	// ReasonCloudConfigsNeedCloudInit: cloud configs with Ignition user data.
	ReasonCloudConfigsNeedCloudInit = "CloudConfigsNeedCloudInit"
	// PausedCondition follows Cluster API's v1beta2 contract: True while the
	// object or its Cluster is paused and nothing is reconciled.
	PausedCondition = "Paused"
)

// addressPollFactor stretches Poll for Ready VMs still without an address.
const addressPollFactor = 6

// Cluster API's names, read without importing Cluster API.
const (
	capiBootstrapKey = "value"
	// capiBootstrapFormatKey says cloud-config or ignition.
	capiBootstrapFormatKey = "format"
	defaultUserDataKey     = "user-data"
	// cloudConfigKey holds a VMImage cloud config in its Secret.
	cloudConfigKey     = "cloud-config"
	capiDefaultVersion = "cluster.x-k8s.io/v1beta2"
)

// MachineReconciler drives the machines of one kind (Kind): build the VM from its image, converge
// hardware, networks and user data, apply the power state, report identity,
// power and addresses, and destroy the VM on deletion. The Provider is the
// one of Namespace whose failure domains include spec.failureDomain.
type MachineReconciler struct {
	Client client.Client
	// Kind is the backend's machine type this reconciler drives.
	Kind providers.MachineKind
	// Reader reads, uncached, what a machine refers to in its own
	// namespace (user data, a Cluster API Machine or Cluster): one get
	// each, so the provider never lists or watches Secrets cluster-wide.
	Reader    client.Reader
	Class     string
	Namespace string
	// SharedProviderNamespace holds the Providers that may serve machines
	// of every namespace (admit): the install's, as the scheduler knows it.
	SharedProviderNamespace string
	// Providers reads a Provider's credentials and logs in.
	Providers *Reconciler
	// Poll re-reads a VM that is not Ready yet (a guest IP appears later).
	Poll time.Duration
	// Workers is how many machines are reconciled at once.
	Workers int
	// Events records what happened to each VM (may be nil).
	Events events.EventRecorder
	// Identity is this process's ServiceAccount, NAMESPACE:NAME: the
	// subject a namespace binds to UserDataClusterRole to consent.
	Identity string
}

// UserDataClusterRole is the shipped ClusterRole a namespace binds to a
// provider's ServiceAccount to let it read its VMs' user data.
const UserDataClusterRole = "banlieue-provider-userdata"

// event records an Event beside m, which the machine's tenants read: the
// message is redacted of endpoints, addresses and user names (the log has
// them whole).
func (r *MachineReconciler) event(m infrav1.Machine, eventType, reason, action, msg string) {
	if r.Events != nil {
		r.Events.Eventf(m, nil, eventType, reason, action, "%s", redact.Message(msg))
	}
}

// SetupWithManager registers the controller.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Status writes (this controller's own) start no reconcile: only spec,
	// labels, annotations (pause) and deletion do; VMs not Ready yet are
	// polled.
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).Named(r.Kind.Name).For(r.Kind.New(), builder.WithPredicates(changed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).Complete(conflict.Requeue(r))
}

// VMName is the VM's name in vCenter: readable, and unique across
// namespaces (providers.BackendName). The VM's identity is its instance
// UUID, the object's UID.
func VMName(m infrav1.Machine) string {
	return providers.BackendName(m.GetNamespace(), m.GetName())
}

// Reconcile drives one machine, in phases: find its Provider and stamp
// it; honour a pause; destroy and release it if deleted; else build it
// (reconcileNormal).
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	m := r.Kind.New()
	if err := r.Client.Get(ctx, req.NamespacedName, m); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	provider, ours, err := r.provider(ctx, m)
	if err != nil || !ours {
		return ctrl.Result{}, err // another process's, or not yet known
	}
	if err := r.stamp(ctx, m, provider); err != nil {
		return ctrl.Result{}, err
	}
	// Paused (Cluster API, e.g. clusterctl move) means hands off, deletion
	// included: the VM must survive its object leaving this cluster.
	paused, why, err := r.paused(ctx, m)
	if err != nil {
		return ctrl.Result{}, err
	}
	if paused {
		// A Cluster's spec.paused is not watched: look again later.
		return ctrl.Result{RequeueAfter: r.Poll}, r.setPaused(ctx, m, why)
	}
	if !m.GetDeletionTimestamp().IsZero() {
		return r.reconcileDelete(ctx, m, provider)
	}
	if provider == nil {
		// The Provider it names does not exist (yet): look again later.
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	return r.reconcileNormal(ctx, m, provider)
}

// reconcileNormal builds m's VM on provider, in phases: admit its spec
// (before any backend call); hold it with a finalizer; wait for a
// booted guest's address; read its user data; record where it is built;
// build it; set its providerID; report.
func (r *MachineReconciler) reconcileNormal(ctx context.Context, m infrav1.Machine, provider *v1alpha1.Provider) (ctrl.Result, error) {
	// Admitted and built where its status recorded it is built, if it
	// did: a location edited since (moved) is refused below, not followed.
	spec, fields, moved := r.builtSpec(m, provider)
	if refused, err := r.admit(ctx, m, builtIn(m), spec, fields, provider); refused || err != nil {
		// Neither VMImages nor Providers requeue machines: a refusal is
		// looked at again slowly, so publishing the missing part admits it.
		return ctrl.Result{RequeueAfter: addressPollFactor * r.Poll}, err
	}
	backend, err := r.Providers.backend(ctx, provider)
	if err != nil {
		return ctrl.Result{}, err
	}
	if err := r.hold(ctx, m); err != nil {
		return ctrl.Result{}, err
	}
	if len(moved) == 0 {
		if res, done, err := r.awaitAddress(ctx, m, backend, spec); done {
			return res, err
		}
	}
	spec.UserDataOmitted = userDataSettled(m)
	if !spec.UserDataOmitted {
		if res, held, err := r.withUserData(ctx, m, provider, &spec); held {
			return res, err
		}
	}
	if err := r.recordLocation(ctx, m, spec, fields); err != nil {
		return ctrl.Result{}, err
	}
	st, res, held, err := r.build(ctx, m, provider, backend, spec)
	if held {
		return res, err
	}
	if err := r.setProviderID(ctx, m, st.ProviderID); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.restart(ctx, m, backend, spec, st.PowerState); err != nil {
		return ctrl.Result{}, err
	}
	if err := r.snapshots(ctx, m, backend, spec, st.PowerState); err != nil {
		return ctrl.Result{}, err
	}
	return r.report(ctx, m, spec, st, moved)
}

// build asks the backend to converge m's VM to spec, once more with the
// user data when the VM went missing since it was provisioned; it records
// the creation (and a failure) as Events. held: the caller returns res,
// err (user data not readable yet, or the backend failed).
func (r *MachineReconciler) build(ctx context.Context, m infrav1.Machine, provider *v1alpha1.Provider, backend providers.Backend, spec providers.MachineSpec) (st providers.MachineStatus, res ctrl.Result, held bool, err error) {
	record := r.recorder(m)
	spec.RecordSoftPowerOff = r.softPowerOffRecorder(m)
	st, err = backend.EnsureMachine(ctx, spec, record)
	if errors.Is(err, providers.ErrUserDataNeeded) {
		// The VM went missing since it was provisioned: build it again,
		// with its user data.
		log.FromContext(ctx).Info("The provisioned VM is missing from the backend; building it again", "vm", spec.Name)
		spec.UserDataOmitted = false
		if res, held, err := r.withUserData(ctx, m, provider, &spec); held {
			return st, res, true, err
		}
		st, err = backend.EnsureMachine(ctx, spec, record)
	}
	if st.Created {
		// One Event for the creation and the power state it reached (each
		// Event is a write to kube-apiserver per VM).
		log.FromContext(ctx).Info("Created VM", "vm", spec.Name, "image", spec.Image, "location", spec.Location.String(), "power", st.PowerState)
		msg := fmt.Sprintf("Created VM %s from image %s in %s", spec.Name, spec.Image, spec.Location)
		if err == nil && st.PowerState != "" {
			msg += ", " + string(st.PowerState)
		}
		r.event(m, corev1.EventTypeNormal, r.Kind.CreatedReason, "Create", msg)
	}
	if err != nil {
		r.event(m, corev1.EventTypeWarning, ReasonProvisioningFailed, "Provision", err.Error())
		_ = r.setReady(ctx, m, metav1.ConditionFalse, ReasonProvisioningFailed, err.Error())
		return st, ctrl.Result{}, true, err
	}
	return st, ctrl.Result{}, false, nil
}

// hold adds the finalizer that keeps m until its VM is destroyed, before
// any VM is built. A machine that never reached the backend (no location
// recorded) gets its planned providerID (ProviderIDScheme) in the same
// patch: the ID the backend will give the VM it builds.
func (r *MachineReconciler) hold(ctx context.Context, m infrav1.Machine) error {
	id, plan := plannedProviderID(r.Kind, m)
	if controllerutil.ContainsFinalizer(m, r.Kind.Finalizer) && !plan {
		return nil
	}
	return patch.Change(ctx, patch.Object(r.Client), m, func() {
		controllerutil.AddFinalizer(m, r.Kind.Finalizer)
		if plan {
			m.CommonSpec().ProviderID = id
		}
	})
}

// plannedProviderID is the providerID kind's backend gives m's VM, and
// whether to write it now: m has none, and never reached the backend (a
// VM built before IDs were planned has the backend's own).
func plannedProviderID(kind providers.MachineKind, m infrav1.Machine) (string, bool) {
	if kind.ProviderIDScheme == "" || m.CommonSpec().ProviderID != "" || m.CommonStatus().Location != nil {
		return "", false
	}
	return kind.ProviderIDScheme + "://" + string(m.GetUID()), true
}

// setProviderID writes the backend's ID of the VM into m's spec, once:
// Cluster API's contract reads it there.
func (r *MachineReconciler) setProviderID(ctx context.Context, m infrav1.Machine, id string) error {
	if have := m.CommonSpec().ProviderID; have != "" || id == "" {
		if have != "" && id != "" && have != id {
			// Cluster API's field is immutable: a VM built before IDs
			// were planned keeps the one it was given.
			log.FromContext(ctx).Info("The VM's providerID differs from the machine's", "providerID", have, "backend", id)
		}
		return nil
	}
	merge := client.MergeFrom(copyOf(m))
	m.CommonSpec().ProviderID = id
	return r.Client.Patch(ctx, m, merge)
}

// report writes what the backend saw of m's VM (st) to m's status, its
// Ready condition last (a location edit not followed, moved, makes it
// False), and says when to look again: soon while the VM is not in its
// power state, slowly while a powered-on guest reports no address.
func (r *MachineReconciler) report(ctx context.Context, m infrav1.Machine, spec providers.MachineSpec, st providers.MachineStatus, moved []string) (ctrl.Result, error) {
	// A change of power, not a first sighting: the creation's Event says
	// the first state, and a status the cache does not show yet reads as
	// no state at all (it would tell the same power state twice).
	if was := m.CommonStatus().PowerState; was != "" && was != st.PowerState && !st.Created {
		r.event(m, corev1.EventTypeNormal, string(st.PowerState), "PowerChange", fmt.Sprintf("VM %s is %s", spec.Name, st.PowerState))
	}
	base := copyOf(m)
	ready := st.PowerState == m.CommonSpec().PowerState && !st.Restarting
	r.observe(m, spec, st, ready)
	cond := readyCondition(m, spec.Name, st, ready)
	if len(moved) > 0 {
		// The VM was converged where it is; the edit is not followed.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonLocationChanged, locationChanged(spec.Name, m.CommonStatus().Location, moved)
		if c := meta.FindStatusCondition(m.CommonStatus().Conditions, infrav1.ReadyCondition); c == nil || c.Reason != cond.Reason || c.Message != cond.Message {
			log.FromContext(ctx).Info("Refused a location edit of a machine whose VM is placed", "vm", spec.Name, "fields", moved)
			r.event(m, corev1.EventTypeWarning, ReasonLocationChanged, "Admit", cond.Message)
		}
	}
	meta.SetStatusCondition(&m.CommonStatus().Conditions, cond)
	if err := r.patchStatus(ctx, base, m); err != nil {
		return ctrl.Result{}, err
	}
	if !ready {
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	// A guest reports its address some time after it boots, and status
	// changes start no reconcile: look again until the address is known
	// (its VM is not Ready without one), slowly once the guest has had
	// time to boot (a guest without tools never reports one).
	if st.PowerState == infrav1.PowerStatePoweredOn && st.IPAddress == "" {
		return ctrl.Result{RequeueAfter: r.addressPoll(m)}, nil
	}
	return ctrl.Result{}, nil
}

// observe writes st, what the backend saw of m's VM, to m's status;
// ready: the VM is in its power state, its tasks ended.
func (r *MachineReconciler) observe(m infrav1.Machine, spec providers.MachineSpec, st providers.MachineStatus, ready bool) {
	if ready {
		// Every task of this call has ended; one not in its state yet (a
		// guest shutting down within its grace) keeps its record.
		m.CommonStatus().TaskRef = ""
		m.CommonStatus().SoftPowerOffTime = nil
	}
	meta.SetStatusCondition(&m.CommonStatus().Conditions, notPaused(m))
	m.CommonStatus().Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
	r.Kind.Observe(m, st)
	m.CommonStatus().PowerState = st.PowerState
	m.CommonStatus().FailureDomain = builtFailureDomain(m)
	m.CommonStatus().ObservedGeneration = m.GetGeneration()
	m.CommonStatus().VMName = spec.Name
	m.CommonStatus().Addresses = []infrav1.MachineAddress{{Type: "Hostname", Address: spec.HostName}}
	if st.IPAddress != "" {
		m.CommonStatus().Addresses = append(m.CommonStatus().Addresses, infrav1.MachineAddress{Type: "InternalIP", Address: st.IPAddress})
	}
}

// readyCondition is m's Ready condition from st: True in its power state,
// else False, restarting (to apply a size) or on its way.
func readyCondition(m infrav1.Machine, name string, st providers.MachineStatus, ready bool) metav1.Condition {
	cond := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: m.GetGeneration(),
		Status: metav1.ConditionTrue, Reason: string(st.PowerState), Message: fmt.Sprintf("VM %s is %s", name, st.PowerState)}
	switch {
	case st.Restarting:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonRestarting, fmt.Sprintf("VM %s is restarting to apply its CPUs and memory", name)
	case !ready:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonPowerStatePending, fmt.Sprintf("VM %s is %s, want %s", name, st.PowerState, m.CommonSpec().PowerState)
	}
	return cond
}

// awaitAddress is the poll of a converged, powered-on VM whose guest has
// not reported an address yet: where the backend can (a
// GuestAddressReader), only the address is read, not the whole VM
// converged again. done is false when the VM needs more than that (then
// the caller converges it).
func (r *MachineReconciler) awaitAddress(ctx context.Context, m infrav1.Machine, backend providers.Backend, spec providers.MachineSpec) (res ctrl.Result, done bool, err error) {
	reader, ok := backend.(providers.GuestAddressReader)
	if !ok || !waitingForAddress(m) {
		return ctrl.Result{}, false, nil
	}
	addr, steady, err := reader.GuestAddress(ctx, spec)
	switch {
	case err != nil:
		return ctrl.Result{}, true, fmt.Errorf("reading the guest address of %s: %w", spec.Name, err)
	case !steady:
		return ctrl.Result{}, false, nil
	case addr == "":
		return ctrl.Result{RequeueAfter: r.addressPoll(m)}, true, nil
	}
	base := copyOf(m)
	m.CommonStatus().Addresses = append(m.CommonStatus().Addresses, infrav1.MachineAddress{Type: "InternalIP", Address: addr})
	return ctrl.Result{}, true, r.patchStatus(ctx, base, m)
}

// waitingForAddress tells that m's status shows its VM built from its
// spec as it is, with user data that cannot change (userDataSettled: a
// machine whose Cluster API bootstrap data may still arrive converges, so
// guestinfo follows it), no task in flight, powered on as asked and Ready,
// with no address yet.
func waitingForAddress(m infrav1.Machine) bool {
	st, spec := m.CommonStatus(), m.CommonSpec()
	ready := meta.FindStatusCondition(st.Conditions, infrav1.ReadyCondition)
	if !userDataSettled(m) || st.TaskRef != "" || ready == nil || ready.Status != metav1.ConditionTrue ||
		spec.PowerState != infrav1.PowerStatePoweredOn || st.PowerState != spec.PowerState {
		return false
	}
	for _, a := range st.Addresses {
		if a.Type == "InternalIP" {
			return false
		}
	}
	return true
}

// userDataSettled tells that m's user data need not be read: its VM was
// built from the spec as it is now (a new generation may name other user
// data), and Cluster API, whose bootstrap data can come after the VM was
// built (a machine made before its Machine), has no part in it. A Secret
// read per reconcile was a request per VM to kube-apiserver for nothing.
func userDataSettled(m infrav1.Machine) bool {
	return provisioned(m) && m.CommonStatus().ObservedGeneration == m.GetGeneration() && !infrastructure.CAPIOwned(m)
}

// provisioned tells whether m's VM was built: its status says so.
func provisioned(m infrav1.Machine) bool {
	i := m.CommonStatus().Initialization
	return i != nil && ptr.Deref(i.Provisioned, false)
}

// withUserData reads m's user data (and its image's cloud configs) into
// spec. held is true when the machine must wait instead (the data is
// missing, not readable, or not ready): res and err are then what
// Reconcile returns, its Ready condition saying why.
func (r *MachineReconciler) withUserData(ctx context.Context, m infrav1.Machine, provider *v1alpha1.Provider, spec *providers.MachineSpec) (res ctrl.Result, held bool, err error) {
	userData, format, reason, err := r.userData(ctx, m)
	if apierrors.IsForbidden(err) {
		reason, err = ReasonUserDataForbidden, r.forbidden(m.GetNamespace(), err)
	}
	if reason != "" {
		msg := "waiting for the Cluster API Machine's bootstrap data secret"
		if err != nil {
			msg = err.Error()
		}
		return ctrl.Result{RequeueAfter: r.Poll}, true, r.setReady(ctx, m, metav1.ConditionFalse, reason, msg)
	}
	if err != nil {
		return ctrl.Result{}, true, err
	}
	if userData, reason, err = r.withCloudConfigs(ctx, m, provider, userData, format); reason != "" {
		return ctrl.Result{RequeueAfter: r.Poll}, true, r.setReady(ctx, m, metav1.ConditionFalse, reason, err.Error())
	}
	spec.UserData, spec.UserDataFormat = userData, format
	return ctrl.Result{}, false, nil
}

// bootWindow is how long after power-on a missing address is looked for
// at the Poll rate.
const bootWindow = 5 * time.Minute

// addressPoll is when to look again for the address of m, powered on.
func (r *MachineReconciler) addressPoll(m infrav1.Machine) time.Duration {
	c := meta.FindStatusCondition(m.CommonStatus().Conditions, infrav1.ReadyCondition)
	if c != nil && time.Since(c.LastTransitionTime.Time) < bootWindow {
		return r.Poll
	}
	return addressPollFactor * r.Poll
}

// reconcileDelete destroys the VM and releases the machine. A machine
// without the finalizer never reached the backend (refused, or its
// Provider never known) and has nothing to destroy; one whose Provider is
// gone cannot reach the backend any more: it is released with a warning
// (the Provider's finalizer holds it while machines use it, so this
// happens only when that finalizer was removed by hand).
func (r *MachineReconciler) reconcileDelete(ctx context.Context, m infrav1.Machine, provider *v1alpha1.Provider) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(m, r.Kind.Finalizer) {
		return ctrl.Result{}, nil
	}
	spec := providers.MachineSpec{Name: VMName(m), InstanceUUID: string(m.GetUID()), TaskRef: m.CommonStatus().TaskRef}
	if provider != nil {
		spec, _, _ = r.builtSpec(m, provider)
	}
	if provider == nil {
		log.FromContext(ctx).Info("Releasing a machine whose Provider is gone; its VM, if any, stays in the backend", "vm", spec.Name)
		r.event(m, corev1.EventTypeWarning, "ProviderGone", "Destroy",
			fmt.Sprintf("the Provider is gone: VM %s, if it exists, was not destroyed", spec.Name))
	} else {
		backend, err := r.Providers.backend(ctx, provider)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := backend.DeleteMachine(ctx, spec, r.recorder(m)); err != nil {
			r.event(m, corev1.EventTypeWarning, "DeleteFailed", "Destroy", err.Error())
			return ctrl.Result{}, fmt.Errorf("destroying %s: %w", spec.Name, err)
		}
		log.FromContext(ctx).Info("Destroyed VM", "vm", spec.Name, "location", spec.Location.String())
		r.event(m, corev1.EventTypeNormal, "Destroyed", "Destroy", fmt.Sprintf("VM %s powered off and destroyed", spec.Name))
	}
	return ctrl.Result{}, patch.RemoveFinalizer(ctx, patch.Object(r.Client), m, r.Kind.Finalizer)
}

// admit refuses, before any backend call, a machine its Provider does not
// publish (see admit in admit.go): Ready=False with the field's reason and
// an Event (once per distinct refusal).
//
// built is m in the failure domain it is built in (builtIn), which the
// spec is admitted for; the condition is written to m.
func (r *MachineReconciler) admit(ctx context.Context, m, built infrav1.Machine, spec providers.MachineSpec, fields providers.Fields, provider *v1alpha1.Provider) (bool, error) {
	var images v1alpha1.VMImageList
	// Read only: no deep copy of every image on every reconcile.
	if err := r.Client.List(ctx, &images, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	refused := admit(built, spec, fields, provider, r.SharedProviderNamespace, r.Class, images.Items)
	if refused == nil && r.Kind.Admit != nil {
		// What the backend cannot build, answered where the scheduler
		// asks it for VMs.
		if err := r.Kind.Admit(built, provider); err != nil {
			refused = &refusal{err.Field, placement.ReasonBackendUnsupported, err.ErrorBody()}
		}
	}
	if refused == nil {
		return false, nil
	}
	if c := meta.FindStatusCondition(m.CommonStatus().Conditions, infrav1.ReadyCondition); c == nil || c.Reason != refused.reason || c.Message != refused.Error() {
		log.FromContext(ctx).Info("Refused a machine its Provider does not publish", "reason", refused.reason, "field", refused.field)
		r.event(m, corev1.EventTypeWarning, refused.reason, "Admit", refused.Error())
	}
	return true, r.setReady(ctx, m, metav1.ConditionFalse, refused.reason, refused.Error())
}

// machineSpec is what the backend builds for m on provider (user data
// aside): the kind's spec in the failure domain provider publishes, with
// the identity and fields every kind shares.
func (r *MachineReconciler) machineSpec(m infrav1.Machine, provider *v1alpha1.Provider) (providers.MachineSpec, providers.Fields) {
	c := m.CommonSpec()
	fd, _ := infrastructure.FailureDomain(provider, c.FailureDomain)
	spec, fields := r.Kind.Spec(m, fd)
	spec.Name, spec.HostName, spec.InstanceUUID = VMName(m), hostName(m), string(m.GetUID())
	spec.CPUs, spec.MemoryMiB, spec.Firmware, spec.TPM = c.CPUs, c.MemoryMiB, string(c.Firmware), c.TPMEnabled
	spec.GuestOS, spec.Architecture = c.GuestOS, c.Architecture
	spec.PowerState, spec.TaskRef = c.PowerState, m.CommonStatus().TaskRef
	spec.PowerOffMode = c.PowerOffMode
	if g := c.PowerOffGraceSeconds; g != nil {
		spec.PowerOffGrace = time.Duration(*g) * time.Second
		if spec.PowerOffGrace == 0 {
			// A grace of zero is asked for, not left to the backend's
			// default: the shortest that still asks the guest first.
			spec.PowerOffGrace = time.Nanosecond
		}
	}
	if t := m.CommonStatus().SoftPowerOffTime; t != nil {
		spec.SoftPowerOffTime = t.Time
	}
	return spec, fields
}

// hostName is the guest's host name: spec.hostName (the VirtualMachine's
// name, which a migration's target machine keeps) or, when empty, made
// from the object's name.
func hostName(m infrav1.Machine) string {
	if h := m.CommonSpec().HostName; h != "" {
		return h
	}
	return providers.HostName(m.GetName())
}

// recordLocation writes where m's VM is built (spec's place) to
// status.location before the backend is first asked to build it; nothing
// reaches the backend unless that write succeeded, so a restarted provider
// reads it back. The write is conditional on the resourceVersion read: a
// cache that does not show a record just written yet (and a spec edited
// since) must not replace the record with another place.
func (r *MachineReconciler) recordLocation(ctx context.Context, m infrav1.Machine, spec providers.MachineSpec, fields providers.Fields) error {
	if m.CommonStatus().Location != nil {
		return nil
	}
	base := copyOf(m)
	m.CommonStatus().Location = builtLocation(builtFailureDomain(m), spec, fields)
	if err := r.Client.Status().Patch(ctx, m, client.MergeFromWithOptions(base, client.MergeFromWithOptimisticLock{})); err != nil {
		return fmt.Errorf("recording where VM %s is built: %w", spec.Name, err)
	}
	return nil
}

// recorder stores the backend task in flight in status.taskRef before the
// backend waits for it, so a provider killed meanwhile resumes that task.
func (r *MachineReconciler) recorder(m infrav1.Machine) providers.TaskRecorder {
	return func(ctx context.Context, ref string) error {
		if m.CommonStatus().TaskRef == ref {
			return nil
		}
		merge := client.MergeFrom(copyOf(m))
		m.CommonStatus().TaskRef = ref
		return r.Client.Status().Patch(ctx, m, merge)
	}
}

// softPowerOffRecorder stores in status.softPowerOffTime when the guest
// is asked to shut down, before it is asked: a provider restarted within
// the grace period counts from that request instead of starting again.
// The record goes once the VM reaches its desired power state.
func (r *MachineReconciler) softPowerOffRecorder(m infrav1.Machine) func(context.Context, time.Time) error {
	return func(ctx context.Context, at time.Time) error {
		merge := client.MergeFrom(copyOf(m))
		m.CommonStatus().SoftPowerOffTime = &metav1.Time{Time: at}
		if err := r.Client.Status().Patch(ctx, m, merge); err != nil {
			return fmt.Errorf("recording the shutdown request of %s: %w", m.GetName(), err)
		}
		return nil
	}
}

// patchStatus writes m's status when it differs from base's. A merge
// patch, because status.taskRef is written concurrently by the recorder.
func (r *MachineReconciler) patchStatus(ctx context.Context, base, m infrav1.Machine) error {
	// base is m before this reconciler's status changes, so the objects
	// differ in status only.
	return patch.Status(ctx, r.Client, base, m, false)
}

// setReady writes m's Ready condition, which the machine's tenants read
// (and its VirtualMachine mirrors): its message is redacted of endpoints,
// addresses and user names.
func (r *MachineReconciler) setReady(ctx context.Context, m infrav1.Machine, status metav1.ConditionStatus, reason, msg string) error {
	base := copyOf(m)
	meta.SetStatusCondition(&m.CommonStatus().Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: status,
		Reason: reason, Message: redact.Message(msg), ObservedGeneration: m.GetGeneration()})
	return r.patchStatus(ctx, base, m)
}

// setPaused writes Paused=True; Paused=False goes with the status written
// after a reconcile (notPaused), saving a write per VM.
func (r *MachineReconciler) setPaused(ctx context.Context, m infrav1.Machine, why string) error {
	base := copyOf(m)
	meta.SetStatusCondition(&m.CommonStatus().Conditions, metav1.Condition{Type: PausedCondition, Status: metav1.ConditionTrue,
		Reason: "Paused", Message: why, ObservedGeneration: m.GetGeneration()})
	return r.patchStatus(ctx, base, m)
}

func notPaused(m infrav1.Machine) metav1.Condition {
	return metav1.Condition{Type: PausedCondition, Status: metav1.ConditionFalse, Reason: "NotPaused", ObservedGeneration: m.GetGeneration()}
}

// paused tells whether Cluster API paused this object or its Cluster.
func (r *MachineReconciler) paused(ctx context.Context, m infrav1.Machine) (bool, string, error) {
	if _, ok := m.GetAnnotations()[infrastructure.PausedAnnotation]; ok {
		return true, "the object has the " + infrastructure.PausedAnnotation + " annotation", nil
	}
	name := m.GetLabels()[infrastructure.ClusterNameLabel]
	if name == "" {
		return false, "", nil
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion(capiDefaultVersion)
	cluster.SetKind("Cluster")
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: name}, cluster)
	if apierrors.IsNotFound(err) || meta.IsNoMatchError(err) {
		return false, "", nil
	}
	if err != nil {
		return false, "", fmt.Errorf("reading Cluster %s: %w", name, err)
	}
	if p, _, _ := unstructured.NestedBool(cluster.Object, "spec", "paused"); p {
		return true, fmt.Sprintf("Cluster %s is paused", name), nil
	}
	return false, "", nil
}

// userData is the first-boot payload and its format: the owning Cluster
// API Machine's bootstrap data (its Secret's "format" key says which), or
// the Secret or ConfigMap key the spec names (spec.userDataFormat). A
// non-empty reason means the VM must not be created yet.
func (r *MachineReconciler) userData(ctx context.Context, m infrav1.Machine) ([]byte, string, string, error) {
	format := string(m.CommonSpec().UserDataFormat)
	if format == "" {
		format = providers.UserDataCloudConfig
	}
	if owner := infrastructure.MachineOwner(m); owner != nil {
		machine := &unstructured.Unstructured{}
		machine.SetAPIVersion(owner.APIVersion)
		machine.SetKind(owner.Kind)
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: owner.Name}, machine); err != nil {
			return nil, "", "", fmt.Errorf("reading Machine %s: %w", owner.Name, err)
		}
		name, _, _ := unstructured.NestedString(machine.Object, "spec", "bootstrap", "dataSecretName")
		if name == "" {
			return nil, "", ReasonWaitingForBootstrapData, nil
		}
		secret, reason, err := r.secret(ctx, m.GetNamespace(), name, capiBootstrapKey)
		if err != nil {
			return nil, "", reason, err
		}
		if f := string(secret.Data[capiBootstrapFormatKey]); f != "" {
			format = f
		}
		return secret.Data[capiBootstrapKey], format, "", nil
	}
	if infrastructure.CAPIOwned(m) {
		// Cluster API made it (a MachineSet, a control plane) but has not
		// set the owning Machine yet: its bootstrap data comes with it, and
		// a VM built now would boot without (a libvirt seed is written once).
		return nil, "", ReasonWaitingForBootstrapData, nil
	}
	if ref := m.CommonSpec().UserDataSecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = capiBootstrapKey
		}
		secret, reason, err := r.secret(ctx, m.GetNamespace(), ref.Name, key)
		if err != nil {
			return nil, "", reason, err
		}
		return secret.Data[key], format, "", nil
	}
	if ref := m.CommonSpec().UserDataConfigMapRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = defaultUserDataKey
		}
		cm := &corev1.ConfigMap{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: m.GetNamespace(), Name: ref.Name}, cm); err != nil {
			return nil, "", ReasonUserDataMissing, fmt.Errorf("user data ConfigMap %s: %w", ref.Name, err)
		}
		if v, ok := cm.Data[key]; ok {
			return []byte(v), format, "", nil
		}
		if v, ok := cm.BinaryData[key]; ok {
			return v, format, "", nil
		}
		return nil, "", ReasonUserDataMissing, fmt.Errorf("user data ConfigMap %s has no key %q", ref.Name, key)
	}
	return nil, format, "", nil
}

// withCloudConfigs puts the machine's cloud configs (admitted: its image's)
// before its user data, read from the Provider's namespace. A reason when
// they cannot be delivered.
func (r *MachineReconciler) withCloudConfigs(ctx context.Context, m infrav1.Machine, p *v1alpha1.Provider, userData []byte, format string) ([]byte, string, error) {
	names := m.CommonSpec().CloudConfigs
	if len(names) == 0 {
		return userData, "", nil
	}
	if format != providers.UserDataCloudConfig {
		return nil, ReasonCloudConfigsNeedCloudInit, fmt.Errorf("spec.cloudConfigs are cloud-config documents; this machine's user data is %s", format)
	}
	var docs [][]byte
	for _, name := range names {
		secret, reason, err := r.secret(ctx, p.Namespace, name, cloudConfigKey)
		if apierrors.IsForbidden(err) {
			// The image's cloud configs are Secrets of the Provider's
			// namespace, read by name as its credentials are.
			return nil, ReasonUserDataForbidden, fmt.Errorf("this provider's identity may not read cloud config Secret %s/%s: "+
				"name it in the provider's credentials Role (docs/security.md)", p.Namespace, name)
		}
		if err != nil {
			return nil, reason, fmt.Errorf("cloud config: %w", err)
		}
		docs = append(docs, secret.Data[cloudConfigKey])
	}
	out, err := cloudinit.Multipart(append(docs, userData)...)
	if err != nil {
		return nil, ReasonUserDataMissing, fmt.Errorf("joining the cloud configs and the user data: %w", err)
	}
	return out, "", nil
}

// secret reads the Secret namespace/name, which must hold key.
func (r *MachineReconciler) secret(ctx context.Context, namespace, name, key string) (*corev1.Secret, string, error) {
	secret := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, ReasonUserDataMissing, fmt.Errorf("user data Secret %s: %w", name, err)
	}
	if _, ok := secret.Data[key]; !ok {
		return nil, ReasonUserDataMissing, fmt.Errorf("user data Secret %s has no key %q", name, key)
	}
	return secret, "", nil
}

// forbidden explains a refused user-data read and how to consent to it.
func (r *MachineReconciler) forbidden(namespace string, err error) error {
	return fmt.Errorf("namespace %s has not granted the provider the reading of this VM's user data (%v); to grant it: "+
		"kubectl create rolebinding %s -n %s --clusterrole=%s --serviceaccount=%s",
		namespace, err, UserDataClusterRole, namespace, UserDataClusterRole, r.Identity)
}

// annotatedProvider is the Provider m's banlieue.io/provider annotation
// names: "namespace/name", or a name in the machine's namespace. named is
// false without the annotation.
func annotatedProvider(m infrav1.Machine) (key client.ObjectKey, named bool) {
	want := m.GetAnnotations()[infrav1.ProviderAnnotation]
	if want == "" {
		return client.ObjectKey{}, false
	}
	if ns, name, ok := strings.Cut(want, "/"); ok {
		return client.ObjectKey{Namespace: ns, Name: name}, true
	}
	return client.ObjectKey{Namespace: m.GetNamespace(), Name: want}, true
}

// provider finds the Provider that serves m: the one its
// banlieue.io/provider annotation names ("namespace/name", or a name in
// the machine's namespace), else the Provider of Namespace and Class whose
// failure domains include the machine's. ours is false when the machine
// belongs to another process (a Provider of another namespace); a nil
// Provider with ours true means the named Provider of this namespace does
// not exist (any more).
func (r *MachineReconciler) provider(ctx context.Context, m infrav1.Machine) (*v1alpha1.Provider, bool, error) {
	if key, named := annotatedProvider(m); named {
		if key.Namespace != r.Namespace || (r.Providers.Only != "" && key.Name != r.Providers.Only) {
			return nil, false, nil
		}
		p := &v1alpha1.Provider{}
		if err := r.Client.Get(ctx, key, p); err != nil {
			return nil, apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		if !r.Providers.Serves(p) {
			return nil, false, nil
		}
		return p, true, nil
	}
	var list v1alpha1.ProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		return nil, false, err
	}
	for i := range list.Items {
		p := &list.Items[i]
		if !r.Providers.Serves(p) {
			continue
		}
		for _, fd := range p.Status.FailureDomains {
			if fd.Name == builtFailureDomain(m) {
				return p, true, nil
			}
		}
	}
	return nil, false, nil
}

// stamp names provider in the banlieue.io/provider annotation of a machine
// found by failure domain (a Cluster API machine), before anything else is
// written to it: from then on the machine stays with the Provider that
// took it, and a per-Provider workload, whose writes an admission policy
// limits to its own Provider's machines
// (artifacts/deploy/operator/policy.yaml), may write it.
func (r *MachineReconciler) stamp(ctx context.Context, m infrav1.Machine, provider *v1alpha1.Provider) error {
	if _, named := annotatedProvider(m); named || provider == nil {
		return nil
	}
	// Optimistic: of two Providers whose failure domains both hold the
	// machine, one names itself and the other meets a conflict.
	merge := client.MergeFromWithOptions(copyOf(m), client.MergeFromWithOptimisticLock{})
	annotations := m.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[infrav1.ProviderAnnotation] = provider.Namespace + "/" + provider.Name
	m.SetAnnotations(annotations)
	if err := r.Client.Patch(ctx, m, merge); err != nil {
		return fmt.Errorf("naming Provider %s/%s on the machine: %w", provider.Namespace, provider.Name, err)
	}
	return nil
}
