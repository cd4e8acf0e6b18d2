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

package virtualmachine

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

// read is what m reports through the contract.
func (r *Reconciler) read(m client.Object) (infrastructure.Observed, error) {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return infrastructure.Observed{}, err
	}
	return infrastructure.Read(&unstructured.Unstructured{Object: u}), nil
}

// ensureMachine creates or updates the VM's infrastructure object, of the
// kind the Provider's class registered (same name, same namespace,
// controlled by the VM). Its spec follows the VM, except the fields the
// backend's provider owns (providerID). The object is the scheme's type
// for the kind, so it is read from the shared cache; the core edits it as
// JSON-like data and never names its type.
func (r *Reconciler) ensureMachine(ctx context.Context, kind infrastructure.Kind, vm *v1alpha1.VirtualMachine, resolved *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (client.Object, error) {
	name := vm.Name // a migrated VM's machine has the name its migration gave it
	if ref := vm.Status.InfrastructureRef; ref != nil && ref.Kind == kind.GroupVersionKind.Kind && ref.APIGroup == kind.GroupVersionKind.Group {
		name = ref.Name
	}
	m, err := r.applyMachine(ctx, kind, vm, resolved, provider, name)
	if err != nil {
		return nil, err
	}
	vm.Status.InfrastructureRef = &v1alpha1.InfrastructureReference{APIGroup: kind.GroupVersionKind.Group, Kind: kind.GroupVersionKind.Kind, Name: m.GetName()}
	return m, nil
}

// applyMachine creates or updates the machine named name of kind for vm
// as placed in vm.Status.Scheduled.
func (r *Reconciler) applyMachine(ctx context.Context, kind infrastructure.Kind, vm *v1alpha1.VirtualMachine, resolved *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider, name string) (client.Object, error) {
	desired, err := kind.BuildSpec(vm, resolved, provider)
	if err != nil {
		return nil, err
	}
	m, err := infrastructure.NewObject(r.Client.Scheme(), kind, vm.Namespace, name)
	if err != nil {
		return nil, err
	}
	if err := r.createdNotCached(ctx, kind, m); err != nil {
		return nil, err
	}
	// No Event for the creation: the Scheduled Event of the same
	// reconcile says where the VM goes, status.infrastructureRef names the
	// machine, and every Event is a write to kube-apiserver per VM.
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, m, func() error {
		labels := m.GetLabels()
		if labels == nil {
			labels = map[string]string{}
		}
		labels[NameLabel] = "banlieue"
		labels[VMLabel] = vm.Name
		m.SetLabels(labels)
		annotations := m.GetAnnotations()
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[infrastructure.ProviderAnnotation] = provider.Namespace + "/" + provider.Name
		// The VM is not paused (reconcilePaused handles that): its
		// machine resumes too.
		delete(annotations, infrastructure.PausedAnnotation)
		m.SetAnnotations(annotations)
		// The backend's own fields and the snapshot controller's stay.
		if err := setSpec(m, desired, slices.Concat(kind.OwnedFields, infrastructure.SnapshotFields)); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(vm, m, r.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating %s %s: %w", kind.GroupVersionKind.Kind, name, err)
	}
	if op == controllerutil.OperationResultCreated {
		r.expectCreated(m)
	}
	return m, nil
}

// createdExpiry bounds how long a created machine is waited for in the
// cache before it is looked for through the API again (one deleted before
// the cache ever saw it).
const createdExpiry = 30 * time.Second

// expectCreated remembers a machine this controller just created, so the
// reconciles before the cache shows it (the VM's own status write starts
// one) wait for its add event instead of sending a create the server
// refuses with AlreadyExists: one request per VM, not 1.4.
func (r *Reconciler) expectCreated(m client.Object) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.created == nil {
		r.created = map[string]time.Time{}
	}
	r.created[m.GetNamespace()+"/"+m.GetName()] = time.Now()
}

// createdNotCached is AlreadyExists (which the caller waits out) when m was
// created a moment ago and the cache does not show it yet; once the cache
// does, the expectation goes.
func (r *Reconciler) createdNotCached(ctx context.Context, kind infrastructure.Kind, m client.Object) error {
	key := m.GetNamespace() + "/" + m.GetName()
	r.mu.Lock()
	at, expected := r.created[key]
	r.mu.Unlock()
	if !expected {
		return nil
	}
	err := r.Client.Get(ctx, client.ObjectKeyFromObject(m), m)
	if apierrors.IsNotFound(err) && time.Since(at) < createdExpiry {
		gk := kind.GroupVersionKind.GroupKind()
		return apierrors.NewAlreadyExists(schema.GroupResource{Group: gk.Group, Resource: strings.ToLower(gk.Kind)}, m.GetName())
	}
	r.mu.Lock()
	delete(r.created, key)
	r.mu.Unlock()
	return client.IgnoreNotFound(err)
}

// setSpec replaces m's spec with desired, keeping the owned fields' values.
func setSpec(m client.Object, desired map[string]interface{}, owned []string) error {
	u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(m)
	if err != nil {
		return err
	}
	current, _, _ := unstructured.NestedMap(u, "spec")
	for _, f := range owned {
		if v, ok := current[f]; ok {
			desired[f] = v
		}
	}
	u["spec"] = desired
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u, m)
}

// mirror copies what the infrastructure object reports through the
// contract onto the VM. provisioned comes only from the infrastructure, and
// the infrastructure's reason is InfrastructureReady's; Ready is what the
// seed defines: provisioned, in the desired power state and reachable.
// A VM with no network interface (networked is false) has no address to
// wait for.
func mirror(vm *v1alpha1.VirtualMachine, kind string, name string, o infrastructure.Observed, networked bool) {
	if o.Provisioned != nil {
		p := *o.Provisioned
		vm.Status.Initialization = &v1alpha1.VirtualMachineInitialization{Provisioned: &p}
	}
	vm.Status.Addresses = o.Addresses
	vm.Status.PowerState = v1alpha1.PowerState(o.PowerState)

	infra := infrastructureReady(kind, name, o)
	infra.ObservedGeneration = vm.Generation
	meta.SetStatusCondition(&vm.Status.Conditions, infra)
	ready := readiness(infra, o, networked)
	ready.ObservedGeneration = vm.Generation
	meta.SetStatusCondition(&vm.Status.Conditions, ready)
}

// infrastructureReady is the machine's Ready condition as the VM's
// InfrastructureReady: the infrastructure's own reason (UserDataForbidden,
// ProvisioningFailed, PowerStatePending, ...) says what to do.
func infrastructureReady(kind, name string, o infrastructure.Observed) metav1.Condition {
	c := o.Ready
	if c == nil {
		return metav1.Condition{Type: v1alpha1.VirtualMachineInfrastructureReady, Status: metav1.ConditionFalse,
			Reason: reasonWaitingForInfrastructure, Message: fmt.Sprintf("%s %s has not reported Ready yet", kind, name)}
	}
	out := metav1.Condition{Type: v1alpha1.VirtualMachineInfrastructureReady, Status: c.Status, Reason: c.Reason,
		Message: fmt.Sprintf("%s %s: %s", kind, name, c.Message)}
	if out.Reason == "" {
		out.Reason = reasonInfrastructureNotReady
		if c.Status == metav1.ConditionTrue {
			out.Reason = reasonInfrastructureReady
		}
	}
	return out
}

// readiness is the VM's Ready: "the VM exists, is provisioned, and is
// reachable". A machine not Ready passes its reason on; a provisioned
// machine in its desired state is Ready only powered on with an address
// (PoweredOff, Suspended and WaitingForAddress otherwise).
func readiness(infra metav1.Condition, o infrastructure.Observed, networked bool) metav1.Condition {
	c := metav1.Condition{Type: v1alpha1.VirtualMachineReady, Status: metav1.ConditionFalse, Reason: infra.Reason, Message: infra.Message}
	switch {
	case infra.Status != metav1.ConditionTrue:
		return c
	case o.Provisioned == nil || !*o.Provisioned:
		c.Reason, c.Message = reasonNotProvisioned, "the infrastructure reports Ready but not provisioned"
	case o.PowerState == string(v1alpha1.PowerStatePoweredOff):
		c.Reason, c.Message = reasonPoweredOff, "the VM is powered off, as desired: it is not reachable"
	case o.PowerState == string(v1alpha1.PowerStateSuspended):
		c.Reason, c.Message = reasonSuspended, "the VM is suspended, as desired: it is not reachable"
	case o.PowerState != string(v1alpha1.PowerStatePoweredOn):
		c.Reason, c.Message = reasonInfrastructureNotReady, fmt.Sprintf("the VM reports power state %q", o.PowerState)
	case !networked:
		c.Status, c.Reason = metav1.ConditionTrue, reasonReachable
		c.Message = "the VM is provisioned and powered on; its class has no network interface, so no address to wait for"
	case !hasIP(o.Addresses):
		c.Reason, c.Message = reasonWaitingForAddress, "the VM is powered on and has not reported an IP address yet"
	default:
		c.Status, c.Reason = metav1.ConditionTrue, reasonReachable
		c.Message = "the VM is provisioned, powered on and reachable at " + firstIP(o.Addresses)
	}
	return c
}

func hasIP(addrs []v1alpha1.MachineAddress) bool { return firstIP(addrs) != "" }

func firstIP(addrs []v1alpha1.MachineAddress) string {
	for _, a := range addrs {
		if (a.Type == v1alpha1.MachineInternalIP || a.Type == v1alpha1.MachineExternalIP) && a.Address != "" {
			return a.Address
		}
	}
	return ""
}

// reconcilePaused does no work on vm but pause its machine, the way Cluster
// API pauses infrastructure (its provider then stops too), and say so.
func (r *Reconciler) reconcilePaused(ctx context.Context, vm *v1alpha1.VirtualMachine) error {
	msg := "spec.paused is true: banlieue does not schedule, change, power or delete this VM"
	// Every machine of the VM: a migration's target too.
	machines, err := r.machinesOf(ctx, vm)
	if err != nil {
		return err
	}
	for _, m := range machines {
		kind := m.GetObjectKind().GroupVersionKind().Kind
		if _, ok := m.GetAnnotations()[infrastructure.PausedAnnotation]; !ok {
			merge := client.MergeFrom(m.DeepCopyObject().(client.Object))
			annotations := m.GetAnnotations()
			if annotations == nil {
				annotations = map[string]string{}
			}
			annotations[infrastructure.PausedAnnotation] = ""
			m.SetAnnotations(annotations)
			if err := r.Client.Patch(ctx, m, merge); err != nil {
				return fmt.Errorf("pausing %s %s: %w", kind, m.GetName(), err)
			}
			r.event(vm, corev1.EventTypeNormal, reasonPaused, "Pause", fmt.Sprintf("paused %s %s", kind, m.GetName()))
		}
		msg += fmt.Sprintf(", nor its %s %s (annotated %s)", kind, m.GetName(), infrastructure.PausedAnnotation)
	}
	if !vm.DeletionTimestamp.IsZero() {
		msg += "; its deletion waits until spec.paused is false"
	}
	r.setCondition(vm, v1alpha1.VirtualMachinePaused, metav1.ConditionTrue, reasonPaused, msg)
	return nil
}
