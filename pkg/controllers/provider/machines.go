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
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
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
	"github.com/firestoned/banlieue/pkg/providers"
)

// MachineFinalizer holds a VSphereMachine until its VM is destroyed.
const MachineFinalizer = "infrastructure.banlieue.io/vspheremachine"

// Reasons of a VSphereMachine's Ready condition besides the power states.
const (
	ReasonProvisioningFailed      = "ProvisioningFailed"
	ReasonPowerStatePending       = "PowerStatePending"
	ReasonWaitingForBootstrapData = "WaitingForBootstrapData"
	ReasonUserDataMissing         = "UserDataMissing"
	// ReasonUserDataForbidden: the machine's namespace has not granted this
	// provider's identity the reading of its user data.
	ReasonUserDataForbidden = "UserDataForbidden"
	// PausedCondition follows Cluster API's v1beta2 contract: True while the
	// object or its Cluster is paused and nothing is reconciled.
	PausedCondition = "Paused"
)

// addressPollFactor stretches Poll for Ready VMs still without an address.
const addressPollFactor = 6

// Cluster API's names, read without importing Cluster API.
const (
	capiGroup           = "cluster.x-k8s.io"
	capiPausedAnno      = "cluster.x-k8s.io/paused"
	capiClusterLabel    = "cluster.x-k8s.io/cluster-name"
	capiBootstrapKey    = "value"
	defaultUserDataKey  = "user-data"
	capiDefaultVersion  = "cluster.x-k8s.io/v1beta2"
	capiMachineKindName = "Machine"
)

// MachineReconciler drives VSphereMachines: clone the template, converge
// hardware, networks and user data, apply the power state, report identity,
// power and addresses, and destroy the VM on deletion. The Provider is the
// one of Namespace whose failure domains include spec.failureDomain.
type MachineReconciler struct {
	Client client.Client
	// Reader reads, uncached, what a VSphereMachine refers to in its own
	// namespace (user data, a Cluster API Machine or Cluster): one get
	// each, so the provider never lists or watches Secrets cluster-wide.
	Reader    client.Reader
	Class     string
	Namespace string
	// Providers reads a Provider's credentials and logs in.
	Providers *Reconciler
	// Poll re-reads a VM that is not Ready yet (a guest IP appears later).
	Poll time.Duration
	// Workers is how many VSphereMachines are reconciled at once.
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

func (r *MachineReconciler) event(vsm *infrav1.VSphereMachine, eventType, reason, action, msg string) {
	if r.Events != nil {
		r.Events.Eventf(vsm, nil, eventType, reason, action, "%s", msg)
	}
}

// SetupWithManager registers the controller.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	// Status writes (this controller's own) start no reconcile: only spec,
	// labels, annotations (pause) and deletion do; VMs not Ready yet are
	// polled.
	changed := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).Named("vspheremachine").For(&infrav1.VSphereMachine{}, builder.WithPredicates(changed)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).Complete(conflict.Requeue(r))
}

// VMName is the VM's name in vCenter: readable, and unique across
// namespaces (providers.BackendName). The VM's identity is its instance
// UUID, the object's UID.
func VMName(vsm *infrav1.VSphereMachine) string {
	return providers.BackendName(vsm.Namespace, vsm.Name)
}

// Reconcile drives one VSphereMachine, in phases: find its Provider;
// honour a pause; destroy and release it if deleted; admit its spec
// against the Provider (before any backend call); hold it with a
// finalizer; read its user data; build it; report.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vsm := &infrav1.VSphereMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vsm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	provider, ours, err := r.provider(ctx, vsm)
	if err != nil || !ours {
		return ctrl.Result{}, err // another process's, or not yet known
	}
	// Paused (Cluster API, e.g. clusterctl move) means hands off, deletion
	// included: the VM must survive its object leaving this cluster.
	paused, why, err := r.paused(ctx, vsm)
	if err != nil {
		return ctrl.Result{}, err
	}
	if paused {
		// A Cluster's spec.paused is not watched: look again later.
		return ctrl.Result{RequeueAfter: r.Poll}, r.setPaused(ctx, vsm, why)
	}
	if !vsm.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, vsm, provider)
	}
	if provider == nil {
		// The Provider it names does not exist (yet): look again later.
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	if refused, err := r.admit(ctx, vsm, provider); refused || err != nil {
		// Neither VMImages nor Providers requeue machines: a refusal is
		// looked at again slowly, so publishing the missing part admits it.
		return ctrl.Result{RequeueAfter: addressPollFactor * r.Poll}, err
	}
	backend, err := r.Providers.backend(ctx, provider)
	if err != nil {
		return ctrl.Result{}, err
	}
	spec := machineSpec(vsm)
	record := r.recorder(vsm)
	if !controllerutil.ContainsFinalizer(vsm, MachineFinalizer) {
		patch := client.MergeFrom(vsm.DeepCopy())
		controllerutil.AddFinalizer(vsm, MachineFinalizer)
		if err := r.Client.Patch(ctx, vsm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	userData, reason, err := r.userData(ctx, vsm)
	if apierrors.IsForbidden(err) {
		reason, err = ReasonUserDataForbidden, r.forbidden(vsm.Namespace, err)
	}
	if reason != "" {
		msg := "waiting for the Cluster API Machine's bootstrap data secret"
		if err != nil {
			msg = err.Error()
		}
		return ctrl.Result{RequeueAfter: r.Poll}, r.setReady(ctx, vsm, metav1.ConditionFalse, reason, msg)
	}
	if err != nil {
		return ctrl.Result{}, err
	}
	spec.UserData = userData
	st, err := backend.EnsureMachine(ctx, spec, record)
	if st.Created {
		log.FromContext(ctx).Info("Cloned VM", "vm", spec.Name, "template", spec.Template, "datacenter", spec.Datacenter, "cluster", spec.Cluster)
		r.event(vsm, corev1.EventTypeNormal, "Cloned", "Clone",
			fmt.Sprintf("Cloned template %s into VM %s in %s/%s", spec.Template, spec.Name, spec.Datacenter, spec.Cluster))
	}
	if err != nil {
		r.event(vsm, corev1.EventTypeWarning, ReasonProvisioningFailed, "Provision", err.Error())
		_ = r.setReady(ctx, vsm, metav1.ConditionFalse, ReasonProvisioningFailed, err.Error())
		return ctrl.Result{}, err
	}
	if was := string(vsm.Status.PowerState); was != st.PowerState {
		r.event(vsm, corev1.EventTypeNormal, st.PowerState, "PowerChange", fmt.Sprintf("VM %s is %s", spec.Name, st.PowerState))
	}
	if vsm.Spec.ProviderID == "" && st.BIOSUUID != "" {
		patch := client.MergeFrom(vsm.DeepCopy())
		vsm.Spec.ProviderID = "vsphere://" + st.BIOSUUID
		if err := r.Client.Patch(ctx, vsm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	base := vsm.DeepCopy()
	vsm.Status.TaskRef = "" // every task of this call has ended
	meta.SetStatusCondition(&vsm.Status.Conditions, notPaused(vsm))
	vsm.Status.Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
	vsm.Status.BIOSUUID, vsm.Status.InstanceUUID = st.BIOSUUID, st.InstanceUUID
	vsm.Status.PowerState = infrav1.PowerState(st.PowerState)
	vsm.Status.FailureDomain = vsm.Spec.FailureDomain
	vsm.Status.ObservedGeneration = vsm.Generation
	vsm.Status.VMName = spec.Name
	vsm.Status.Addresses = []infrav1.MachineAddress{{Type: "Hostname", Address: spec.HostName}}
	if st.IPAddress != "" {
		vsm.Status.Addresses = append(vsm.Status.Addresses, infrav1.MachineAddress{Type: "InternalIP", Address: st.IPAddress})
	}
	ready := st.PowerState == string(vsm.Spec.PowerState)
	cond := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: vsm.Generation,
		Status: metav1.ConditionTrue, Reason: st.PowerState, Message: fmt.Sprintf("VM %s is %s", spec.Name, st.PowerState)}
	if !ready {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonPowerStatePending, fmt.Sprintf("VM %s is %s, want %s", spec.Name, st.PowerState, vsm.Spec.PowerState)
	}
	meta.SetStatusCondition(&vsm.Status.Conditions, cond)
	if err := r.patchStatus(ctx, base, vsm); err != nil {
		return ctrl.Result{}, err
	}
	if !ready {
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	// A guest reports its address some time after it boots, and status
	// changes start no reconcile: look again, more slowly (a guest without
	// tools never reports one), until the address is known.
	if st.PowerState == string(infrav1.PowerStatePoweredOn) && st.IPAddress == "" {
		return ctrl.Result{RequeueAfter: addressPollFactor * r.Poll}, nil
	}
	return ctrl.Result{}, nil
}

// reconcileDelete destroys the VM and releases the machine. A machine
// without the finalizer never reached the backend (refused, or its
// Provider never known) and has nothing to destroy; one whose Provider is
// gone cannot reach the backend any more: it is released with a warning
// (the Provider's finalizer holds it while machines use it, so this
// happens only when that finalizer was removed by hand).
func (r *MachineReconciler) reconcileDelete(ctx context.Context, vsm *infrav1.VSphereMachine, provider *v1alpha1.Provider) (ctrl.Result, error) {
	if !controllerutil.ContainsFinalizer(vsm, MachineFinalizer) {
		return ctrl.Result{}, nil
	}
	spec := machineSpec(vsm)
	if provider == nil {
		log.FromContext(ctx).Info("Releasing a VSphereMachine whose Provider is gone; its VM, if any, stays in vCenter", "vm", spec.Name)
		r.event(vsm, corev1.EventTypeWarning, "ProviderGone", "Destroy",
			fmt.Sprintf("the Provider is gone: VM %s, if it exists, was not destroyed", spec.Name))
	} else {
		backend, err := r.Providers.backend(ctx, provider)
		if err != nil {
			return ctrl.Result{}, err
		}
		if err := backend.DeleteMachine(ctx, spec, r.recorder(vsm)); err != nil {
			r.event(vsm, corev1.EventTypeWarning, "DeleteFailed", "Destroy", err.Error())
			return ctrl.Result{}, fmt.Errorf("destroying %s: %w", spec.Name, err)
		}
		log.FromContext(ctx).Info("Destroyed VM", "vm", spec.Name, "datacenter", spec.Datacenter)
		r.event(vsm, corev1.EventTypeNormal, "Destroyed", "Destroy", fmt.Sprintf("VM %s powered off and destroyed", spec.Name))
	}
	patch := client.MergeFrom(vsm.DeepCopy())
	controllerutil.RemoveFinalizer(vsm, MachineFinalizer)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, vsm, patch))
}

// admit refuses, before any backend call, a machine its Provider does not
// publish (see admit in admit.go): Ready=False with the field's reason and
// an Event (once per distinct refusal).
func (r *MachineReconciler) admit(ctx context.Context, vsm *infrav1.VSphereMachine, provider *v1alpha1.Provider) (bool, error) {
	var images v1alpha1.VMImageList
	// Read only: no deep copy of every image on every reconcile.
	if err := r.Client.List(ctx, &images, client.UnsafeDisableDeepCopy); err != nil {
		return false, err
	}
	refused := admit(vsm, provider, r.Class, images.Items)
	if refused == nil {
		return false, nil
	}
	if c := meta.FindStatusCondition(vsm.Status.Conditions, infrav1.ReadyCondition); c == nil || c.Reason != refused.reason || c.Message != refused.Error() {
		log.FromContext(ctx).Info("Refused a VSphereMachine its Provider does not publish", "reason", refused.reason, "field", refused.field)
		r.event(vsm, corev1.EventTypeWarning, refused.reason, "Admit", refused.Error())
	}
	return true, r.setReady(ctx, vsm, metav1.ConditionFalse, refused.reason, refused.Error())
}

// machineSpec is what the backend builds for vsm (user data aside).
func machineSpec(vsm *infrav1.VSphereMachine) providers.MachineSpec {
	spec := providers.MachineSpec{
		Name: VMName(vsm), HostName: providers.HostName(vsm.Name), InstanceUUID: string(vsm.UID),
		Datacenter: vsm.Spec.Datacenter, Cluster: vsm.Spec.Cluster, ResourcePool: vsm.Spec.ResourcePool, Folder: vsm.Spec.Folder,
		Template: vsm.Spec.Template, CPUs: vsm.Spec.CPUs, MemoryMiB: vsm.Spec.MemoryMiB,
		Firmware: string(vsm.Spec.Firmware), TPM: vsm.Spec.TPMEnabled,
		PowerState: string(vsm.Spec.PowerState), TaskRef: vsm.Status.TaskRef,
	}
	for _, n := range vsm.Spec.Network {
		nic := providers.NIC{Name: n.Name, Network: n.PortGroup}
		if st := n.Static; st != nil {
			nic.Static = &providers.StaticIP{Address: st.Address, Prefix: st.Prefix, Gateway: st.Gateway, Nameservers: st.Nameservers}
		}
		spec.NICs = append(spec.NICs, nic)
	}
	for i, d := range vsm.Spec.Disks {
		if i == 0 {
			spec.Datastore = d.Datastore
		}
		spec.DiskSizesGiB = append(spec.DiskSizesGiB, d.SizeGiB)
	}
	return spec
}

// recorder stores the backend task in flight in status.taskRef before the
// backend waits for it, so a provider killed meanwhile resumes that task.
func (r *MachineReconciler) recorder(vsm *infrav1.VSphereMachine) providers.TaskRecorder {
	return func(ctx context.Context, ref string) error {
		if vsm.Status.TaskRef == ref {
			return nil
		}
		patch := client.MergeFrom(vsm.DeepCopy())
		vsm.Status.TaskRef = ref
		return r.Client.Status().Patch(ctx, vsm, patch)
	}
}

// patchStatus writes vsm's status when it differs from base's. A merge
// patch, because status.taskRef is written concurrently by the recorder.
func (r *MachineReconciler) patchStatus(ctx context.Context, base, vsm *infrav1.VSphereMachine) error {
	if apiequality.Semantic.DeepEqual(base.Status, vsm.Status) {
		return nil
	}
	return r.Client.Status().Patch(ctx, vsm, client.MergeFrom(base))
}

func (r *MachineReconciler) setReady(ctx context.Context, vsm *infrav1.VSphereMachine, status metav1.ConditionStatus, reason, msg string) error {
	base := vsm.DeepCopy()
	meta.SetStatusCondition(&vsm.Status.Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: status,
		Reason: reason, Message: msg, ObservedGeneration: vsm.Generation})
	return r.patchStatus(ctx, base, vsm)
}

// setPaused writes Paused=True; Paused=False goes with the status written
// after a reconcile (notPaused), saving a write per VM.
func (r *MachineReconciler) setPaused(ctx context.Context, vsm *infrav1.VSphereMachine, why string) error {
	base := vsm.DeepCopy()
	meta.SetStatusCondition(&vsm.Status.Conditions, metav1.Condition{Type: PausedCondition, Status: metav1.ConditionTrue,
		Reason: "Paused", Message: why, ObservedGeneration: vsm.Generation})
	return r.patchStatus(ctx, base, vsm)
}

func notPaused(vsm *infrav1.VSphereMachine) metav1.Condition {
	return metav1.Condition{Type: PausedCondition, Status: metav1.ConditionFalse, Reason: "NotPaused", ObservedGeneration: vsm.Generation}
}

// paused tells whether Cluster API paused this object or its Cluster.
func (r *MachineReconciler) paused(ctx context.Context, vsm *infrav1.VSphereMachine) (bool, string, error) {
	if _, ok := vsm.Annotations[capiPausedAnno]; ok {
		return true, "the object has the " + capiPausedAnno + " annotation", nil
	}
	name := vsm.Labels[capiClusterLabel]
	if name == "" {
		return false, "", nil
	}
	cluster := &unstructured.Unstructured{}
	cluster.SetAPIVersion(capiDefaultVersion)
	cluster.SetKind("Cluster")
	err := r.Reader.Get(ctx, client.ObjectKey{Namespace: vsm.Namespace, Name: name}, cluster)
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

// userData is the first-boot payload: the owning Cluster API Machine's
// bootstrap data, or the Secret or ConfigMap key the spec names. A
// non-empty reason means the VM must not be created yet.
func (r *MachineReconciler) userData(ctx context.Context, vsm *infrav1.VSphereMachine) ([]byte, string, error) {
	if owner := capiMachine(vsm); owner != nil {
		m := &unstructured.Unstructured{}
		m.SetAPIVersion(owner.APIVersion)
		m.SetKind(owner.Kind)
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: vsm.Namespace, Name: owner.Name}, m); err != nil {
			return nil, "", fmt.Errorf("reading Machine %s: %w", owner.Name, err)
		}
		name, _, _ := unstructured.NestedString(m.Object, "spec", "bootstrap", "dataSecretName")
		if name == "" {
			return nil, ReasonWaitingForBootstrapData, nil
		}
		return r.secretKey(ctx, vsm.Namespace, name, capiBootstrapKey)
	}
	if ref := vsm.Spec.UserDataSecretRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = capiBootstrapKey
		}
		return r.secretKey(ctx, vsm.Namespace, ref.Name, key)
	}
	if ref := vsm.Spec.UserDataConfigMapRef; ref != nil {
		key := ref.Key
		if key == "" {
			key = defaultUserDataKey
		}
		cm := &corev1.ConfigMap{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: vsm.Namespace, Name: ref.Name}, cm); err != nil {
			return nil, ReasonUserDataMissing, fmt.Errorf("user data ConfigMap %s: %w", ref.Name, err)
		}
		if v, ok := cm.Data[key]; ok {
			return []byte(v), "", nil
		}
		if v, ok := cm.BinaryData[key]; ok {
			return v, "", nil
		}
		return nil, ReasonUserDataMissing, fmt.Errorf("user data ConfigMap %s has no key %q", ref.Name, key)
	}
	return nil, "", nil
}

func (r *MachineReconciler) secretKey(ctx context.Context, namespace, name, key string) ([]byte, string, error) {
	secret := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, secret); err != nil {
		return nil, ReasonUserDataMissing, fmt.Errorf("user data Secret %s: %w", name, err)
	}
	v, ok := secret.Data[key]
	if !ok {
		return nil, ReasonUserDataMissing, fmt.Errorf("user data Secret %s has no key %q", name, key)
	}
	return v, "", nil
}

// forbidden explains a refused user-data read and how to consent to it.
func (r *MachineReconciler) forbidden(namespace string, err error) error {
	return fmt.Errorf("namespace %s has not granted the provider the reading of this VM's user data (%v); to grant it: "+
		"kubectl create rolebinding %s -n %s --clusterrole=%s --serviceaccount=%s",
		namespace, err, UserDataClusterRole, namespace, UserDataClusterRole, r.Identity)
}

// annotatedProvider is the Provider vsm's banlieue.io/provider annotation
// names: "namespace/name", or a name in the machine's namespace. named is
// false without the annotation.
func annotatedProvider(vsm *infrav1.VSphereMachine) (key client.ObjectKey, named bool) {
	want := vsm.Annotations[infrav1.ProviderAnnotation]
	if want == "" {
		return client.ObjectKey{}, false
	}
	if ns, name, ok := strings.Cut(want, "/"); ok {
		return client.ObjectKey{Namespace: ns, Name: name}, true
	}
	return client.ObjectKey{Namespace: vsm.Namespace, Name: want}, true
}

// capiMachine is the Cluster API Machine owning vsm, or nil.
func capiMachine(vsm *infrav1.VSphereMachine) *metav1.OwnerReference {
	for i, o := range vsm.OwnerReferences {
		if o.Kind == capiMachineKindName && strings.HasPrefix(o.APIVersion, capiGroup+"/") {
			return &vsm.OwnerReferences[i]
		}
	}
	return nil
}

// provider finds the Provider that serves vsm: the one its
// banlieue.io/provider annotation names ("namespace/name", or a name in
// the machine's namespace), else the Provider of Namespace and Class whose
// failure domains include the machine's. ours is false when the machine
// belongs to another process (a Provider of another namespace); a nil
// Provider with ours true means the named Provider of this namespace does
// not exist (any more).
func (r *MachineReconciler) provider(ctx context.Context, vsm *infrav1.VSphereMachine) (*v1alpha1.Provider, bool, error) {
	if key, named := annotatedProvider(vsm); named {
		if key.Namespace != r.Namespace {
			return nil, false, nil
		}
		p := &v1alpha1.Provider{}
		if err := r.Client.Get(ctx, key, p); err != nil {
			return nil, apierrors.IsNotFound(err), client.IgnoreNotFound(err)
		}
		if p.Spec.ProviderClassRef.Name != r.Class {
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
		if p.Spec.ProviderClassRef.Name != r.Class {
			continue
		}
		for _, fd := range p.Status.FailureDomains {
			if fd.Name == vsm.Spec.FailureDomain {
				return p, true, nil
			}
		}
	}
	return nil, false, nil
}
