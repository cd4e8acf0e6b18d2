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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// BuildSpec is the VSphereMachine spec for a resolved, scheduled VM on
// provider. Pure, so that what a VM becomes can be tested without a cluster.
func BuildSpec(vm *v1alpha1.VirtualMachine, r *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (infrav1.VSphereMachineSpec, error) {
	s := vm.Status.Scheduled
	spec := infrav1.VSphereMachineSpec{
		FailureDomain: s.FailureDomain,
		CPUs:          r.Spec.CPUs.Value,
		MemoryMiB:     r.Spec.MemoryMiB.Value,
		Firmware:      infrav1.Firmware(r.Spec.Firmware),
		TPMEnabled:    r.Spec.TPMEnabled,
		PowerState:    infrav1.PowerState(r.Spec.PowerState),
	}
	for _, src := range r.Spec.Image.Sources {
		if src.ProviderClass == provider.Spec.ProviderClassRef.Name {
			spec.Template = src.Ref
		}
	}
	if spec.Template == "" {
		return spec, fmt.Errorf("VMImage %s has no source for provider class %q", r.Spec.Image.Name, provider.Spec.ProviderClassRef.Name)
	}
	for _, fd := range provider.Status.FailureDomains {
		if fd.Name == s.FailureDomain {
			spec.Datacenter, spec.Cluster = fd.Datacenter, fd.Cluster
		}
	}
	datastores := map[string]string{}
	for _, st := range s.Storage {
		datastores[st.Name] = st.Datastore
	}
	for _, d := range r.Spec.Disks {
		spec.Disks = append(spec.Disks, infrav1.VSphereDisk{
			Name: d.Name, SizeGiB: d.SizeGiB.Value, Provisioning: infrav1.DiskProvisioning(d.Provisioning), Datastore: datastores[d.Name],
		})
	}
	portGroups := map[string]string{}
	for _, n := range s.Network {
		portGroups[n.Name] = n.PortGroup
	}
	for _, n := range r.Spec.Interfaces {
		dev := infrav1.VSphereNetworkDevice{Name: n.Name, PortGroup: portGroups[n.Name]}
		switch n.Mode {
		case v1alpha1.IPAMStatic:
			dev.Static = &infrav1.StaticIP{Address: n.Static.Address, Prefix: ptr.Deref(n.Static.Prefix, 0), Gateway: n.Static.Gateway, Nameservers: n.Static.Nameservers}
		default:
			// DHCP; pool allocation is not implemented yet and falls back to DHCP.
			dev.DHCP4 = true
		}
		spec.Network = append(spec.Network, dev)
	}
	if u := r.Spec.UserData; u != nil {
		if u.SecretRef != nil {
			spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: u.SecretRef.Name, Key: u.SecretRef.Key}
		}
		if u.ConfigMapRef != nil {
			spec.UserDataConfigMapRef = &infrav1.ConfigMapKeyReference{Name: u.ConfigMapRef.Name, Key: u.ConfigMapRef.Key}
		}
	}
	return spec, nil
}

// ensureVSphereMachine creates or updates the VM's VSphereMachine (same
// name, same namespace, controlled by the VM). The provider owns
// spec.providerID; everything else follows the VM.
func (r *Reconciler) ensureVSphereMachine(ctx context.Context, vm *v1alpha1.VirtualMachine, resolved *v1alpha1.ResolvedVirtualMachine, provider *v1alpha1.Provider) (*infrav1.VSphereMachine, error) {
	desired, err := BuildSpec(vm, resolved, provider)
	if err != nil {
		return nil, err
	}
	vsm := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: vm.Name, Namespace: vm.Namespace}}
	op, err := controllerutil.CreateOrPatch(ctx, r.Client, vsm, func() error {
		if vsm.Labels == nil {
			vsm.Labels = map[string]string{}
		}
		vsm.Labels[NameLabel] = "banlieue"
		vsm.Labels[VMLabel] = vm.Name
		if vsm.Annotations == nil {
			vsm.Annotations = map[string]string{}
		}
		vsm.Annotations[infrav1.ProviderAnnotation] = provider.Namespace + "/" + provider.Name
		providerID := vsm.Spec.ProviderID
		vsm.Spec = desired
		vsm.Spec.ProviderID = providerID
		return controllerutil.SetControllerReference(vm, vsm, r.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating VSphereMachine %s: %w", vm.Name, err)
	}
	if op == controllerutil.OperationResultCreated {
		r.event(vm, "Normal", "InfrastructureCreated", "Provisioning", "created VSphereMachine "+vsm.Name)
	}
	vm.Status.InfrastructureRef = &v1alpha1.InfrastructureReference{APIGroup: infrav1.GroupName, Kind: "VSphereMachine", Name: vsm.Name}
	return vsm, nil
}

// mirror copies the VSphereMachine's status onto the VM. provisioned comes
// only from the infrastructure; the VM is Ready when it is.
func mirror(vm *v1alpha1.VirtualMachine, vsm *infrav1.VSphereMachine) {
	if p := vsm.Status.Initialization; p != nil && p.Provisioned != nil {
		vm.Status.Initialization = &v1alpha1.VirtualMachineInitialization{Provisioned: ptr.To(*p.Provisioned)}
	}
	vm.Status.Addresses = nil
	for _, a := range vsm.Status.Addresses {
		vm.Status.Addresses = append(vm.Status.Addresses, v1alpha1.MachineAddress{Type: v1alpha1.MachineAddressType(a.Type), Address: a.Address})
	}
	vm.Status.PowerState = v1alpha1.PowerState(vsm.Status.PowerState)

	status, reason, message := metav1.ConditionFalse, reasonWaitingForInfrastructure, fmt.Sprintf("VSphereMachine %s has not reported Ready yet", vsm.Name)
	if c := meta.FindStatusCondition(vsm.Status.Conditions, infrav1.ReadyCondition); c != nil {
		// The infrastructure's own reason (UserDataForbidden,
		// ProvisioningFailed, ...) is the VM's: it says what to do.
		status, reason, message = c.Status, c.Reason, fmt.Sprintf("VSphereMachine %s: %s", vsm.Name, c.Message)
		if c.Status == metav1.ConditionTrue {
			reason = reasonInfrastructureReady
		} else if reason == "" {
			reason = reasonInfrastructureNotReady
		}
	}
	set := func(t string) {
		meta.SetStatusCondition(&vm.Status.Conditions, metav1.Condition{Type: t, Status: status, Reason: reason, Message: message, ObservedGeneration: vm.Generation})
	}
	set(v1alpha1.VirtualMachineInfrastructureReady)
	set(v1alpha1.VirtualMachineReady)
}
