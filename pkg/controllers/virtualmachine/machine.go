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
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

// newObject is an empty object of kind (the scheme's type for it), named
// namespace/name.
func newObject(scheme *runtime.Scheme, kind infrastructure.Kind, namespace, name string) (client.Object, error) {
	o, err := scheme.New(kind.GroupVersionKind)
	if err != nil {
		return nil, fmt.Errorf("infrastructure kind %s: %w", kind.GroupVersionKind, err)
	}
	obj, ok := o.(client.Object)
	if !ok {
		return nil, fmt.Errorf("infrastructure kind %s is not an object", kind.GroupVersionKind)
	}
	obj.GetObjectKind().SetGroupVersionKind(kind.GroupVersionKind)
	obj.SetNamespace(namespace)
	obj.SetName(name)
	return obj, nil
}

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
	desired, err := kind.BuildSpec(vm, resolved, provider)
	if err != nil {
		return nil, err
	}
	m, err := newObject(r.Client.Scheme(), kind, vm.Namespace, vm.Name)
	if err != nil {
		return nil, err
	}
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
		m.SetAnnotations(annotations)
		if err := setSpec(m, desired, kind.OwnedFields); err != nil {
			return err
		}
		return controllerutil.SetControllerReference(vm, m, r.Client.Scheme())
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating %s %s: %w", kind.GroupVersionKind.Kind, vm.Name, err)
	}
	if op == controllerutil.OperationResultCreated {
		r.event(vm, "Normal", "InfrastructureCreated", "Provisioning", fmt.Sprintf("created %s %s", kind.GroupVersionKind.Kind, m.GetName()))
	}
	vm.Status.InfrastructureRef = &v1alpha1.InfrastructureReference{APIGroup: kind.GroupVersionKind.Group, Kind: kind.GroupVersionKind.Kind, Name: m.GetName()}
	return m, nil
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
// contract onto the VM. provisioned comes only from the infrastructure;
// the VM is Ready when it is, and the infrastructure's reason is the VM's.
func mirror(vm *v1alpha1.VirtualMachine, kind string, name string, o infrastructure.Observed) {
	if o.Provisioned != nil {
		p := *o.Provisioned
		vm.Status.Initialization = &v1alpha1.VirtualMachineInitialization{Provisioned: &p}
	}
	vm.Status.Addresses = o.Addresses
	vm.Status.PowerState = v1alpha1.PowerState(o.PowerState)

	status, reason, message := metav1.ConditionFalse, reasonWaitingForInfrastructure, fmt.Sprintf("%s %s has not reported Ready yet", kind, name)
	if c := o.Ready; c != nil {
		// The infrastructure's own reason (UserDataForbidden,
		// ProvisioningFailed, ...) is the VM's: it says what to do.
		status, reason, message = c.Status, c.Reason, fmt.Sprintf("%s %s: %s", kind, name, c.Message)
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
