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

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// MachineFinalizer holds a VSphereMachine until its VM is destroyed.
const MachineFinalizer = "infrastructure.banlieue.io/vspheremachine"

// MachineReconciler drives VSphereMachines: clone the template, apply the
// power state, report identity, power and addresses, and destroy the VM on
// deletion. The Provider is the one of Namespace whose failure domains
// include spec.failureDomain.
type MachineReconciler struct {
	Client    client.Client
	Class     string
	Namespace string
	// Providers reads a Provider's credentials and logs in.
	Providers *Reconciler
	// Poll re-reads a VM that is not Ready yet (a guest IP appears later).
	Poll time.Duration
}

// SetupWithManager registers the controller.
func (r *MachineReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("vspheremachine").For(&infrav1.VSphereMachine{}).Complete(r)
}

// VMName is the VM's name in vCenter: unique per datacenter for a given
// namespace and name, so a repeated clone finds the first one.
func VMName(vsm *infrav1.VSphereMachine) string { return vsm.Namespace + "-" + vsm.Name }

// Reconcile drives one VSphereMachine.
func (r *MachineReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vsm := &infrav1.VSphereMachine{}
	if err := r.Client.Get(ctx, req.NamespacedName, vsm); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	provider, err := r.provider(ctx, vsm)
	if err != nil || provider == nil {
		return ctrl.Result{}, err // not ours, or not yet known
	}
	backend, err := r.Providers.backend(ctx, provider)
	if err != nil {
		return ctrl.Result{}, err
	}
	if !vsm.DeletionTimestamp.IsZero() {
		if !controllerutil.ContainsFinalizer(vsm, MachineFinalizer) {
			return ctrl.Result{}, nil
		}
		if err := backend.DeleteMachine(ctx, vsm.Spec.Datacenter, VMName(vsm)); err != nil {
			return ctrl.Result{}, fmt.Errorf("destroying %s: %w", VMName(vsm), err)
		}
		patch := client.MergeFrom(vsm.DeepCopy())
		controllerutil.RemoveFinalizer(vsm, MachineFinalizer)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Patch(ctx, vsm, patch))
	}
	if !controllerutil.ContainsFinalizer(vsm, MachineFinalizer) {
		patch := client.MergeFrom(vsm.DeepCopy())
		controllerutil.AddFinalizer(vsm, MachineFinalizer)
		if err := r.Client.Patch(ctx, vsm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	spec := providers.MachineSpec{
		Name: VMName(vsm), Datacenter: vsm.Spec.Datacenter, Cluster: vsm.Spec.Cluster, Template: vsm.Spec.Template,
		CPUs: vsm.Spec.CPUs, MemoryMiB: vsm.Spec.MemoryMiB, PowerState: string(vsm.Spec.PowerState),
	}
	for _, n := range vsm.Spec.Network {
		nic := providers.NIC{}
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
	st, err := backend.EnsureMachine(ctx, spec)
	if err != nil {
		before := vsm.Status.DeepCopy()
		meta.SetStatusCondition(&vsm.Status.Conditions, metav1.Condition{Type: infrav1.ReadyCondition, Status: metav1.ConditionFalse,
			Reason: "ProvisioningFailed", Message: err.Error(), ObservedGeneration: vsm.Generation})
		if !apiequality.Semantic.DeepEqual(before, &vsm.Status) {
			_ = r.Client.Status().Update(ctx, vsm)
		}
		return ctrl.Result{}, err
	}
	if vsm.Spec.ProviderID == "" && st.BIOSUUID != "" {
		patch := client.MergeFrom(vsm.DeepCopy())
		vsm.Spec.ProviderID = "vsphere://" + st.BIOSUUID
		if err := r.Client.Patch(ctx, vsm, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := vsm.Status.DeepCopy()
	vsm.Status.Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
	vsm.Status.BIOSUUID, vsm.Status.InstanceUUID = st.BIOSUUID, st.InstanceUUID
	vsm.Status.PowerState = infrav1.PowerState(st.PowerState)
	vsm.Status.FailureDomain = vsm.Spec.FailureDomain
	vsm.Status.ObservedGeneration = vsm.Generation
	vsm.Status.Addresses = []infrav1.MachineAddress{{Type: "Hostname", Address: VMName(vsm)}}
	if st.IPAddress != "" {
		vsm.Status.Addresses = append(vsm.Status.Addresses, infrav1.MachineAddress{Type: "InternalIP", Address: st.IPAddress})
	}
	cond := metav1.Condition{Type: infrav1.ReadyCondition, ObservedGeneration: vsm.Generation}
	if st.PowerState == string(vsm.Spec.PowerState) {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, st.PowerState, fmt.Sprintf("VM %s is %s", spec.Name, st.PowerState)
	} else {
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, "PowerStatePending", fmt.Sprintf("VM %s is %s, want %s", spec.Name, st.PowerState, vsm.Spec.PowerState)
	}
	meta.SetStatusCondition(&vsm.Status.Conditions, cond)
	if !apiequality.Semantic.DeepEqual(before, &vsm.Status) {
		if err := r.Client.Status().Update(ctx, vsm); err != nil {
			return ctrl.Result{}, err
		}
	}
	if cond.Status != metav1.ConditionTrue {
		return ctrl.Result{RequeueAfter: r.Poll}, nil
	}
	return ctrl.Result{}, nil
}

// provider finds the Provider of Namespace and Class whose failure domains
// include the machine's, or nil.
func (r *MachineReconciler) provider(ctx context.Context, vsm *infrav1.VSphereMachine) (*v1alpha1.Provider, error) {
	var list v1alpha1.ProviderList
	if err := r.Client.List(ctx, &list, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	want := vsm.Annotations[infrav1.ProviderAnnotation]
	for i := range list.Items {
		p := &list.Items[i]
		if p.Spec.ProviderClassRef.Name != r.Class {
			continue
		}
		if want != "" {
			if want == p.Namespace+"/"+p.Name || (!strings.Contains(want, "/") && want == p.Name) {
				return p, nil
			}
			continue
		}
		for _, fd := range p.Status.FailureDomains {
			if fd.Name == vsm.Spec.FailureDomain {
				return p, nil
			}
		}
	}
	return nil, nil
}
