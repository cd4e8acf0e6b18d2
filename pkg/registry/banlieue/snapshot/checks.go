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

package snapshot

import (
	"context"
	"fmt"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metainternalversion "k8s.io/apimachinery/pkg/apis/meta/internalversion"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/snapshots"
)

// Checks reads, from the server's own storage, what a new snapshot or
// restore is checked against: its VM, the VM's Provider, the backend's
// snapshot limits and the VM's other snapshots and restores.
type Checks struct {
	VMs       rest.Getter
	Providers rest.Getter
	// Limits answers what a provider class's backend snapshots can do;
	// false when it takes none.
	Limits func(providerClass string) (providers.SnapshotLimits, bool)

	snapshots, restores rest.Lister
}

var (
	vmPath       = field.NewPath("spec", "vmName")
	memoryPath   = field.NewPath("spec", "includeMemory")
	snapshotPath = field.NewPath("spec", "snapshotName")
)

// own makes the VM named vm the owner of m, when it exists (Validate
// refuses the create otherwise).
func (c *Checks) own(ctx context.Context, m *metav1.ObjectMeta, vm string) {
	obj, err := c.VMs.Get(ctx, vm, &metav1.GetOptions{})
	if err != nil {
		return
	}
	v := obj.(*banlieue.VirtualMachine)
	gvk := banlieue.SchemeGroupVersion.WithKind("VirtualMachine")
	m.OwnerReferences = append(m.OwnerReferences, metav1.OwnerReference{
		APIVersion: "banlieue.io/v1alpha1", Kind: gvk.Kind, Name: v.Name, UID: v.UID, BlockOwnerDeletion: ptr.To(true),
	})
}

// snapshot checks a new snapshot: its VM exists, is built on a Provider
// whose backend takes snapshots (with memory, when asked), and has fewer
// snapshots than the Provider allows.
func (c *Checks) snapshot(ctx context.Context, snap *banlieue.VirtualMachineSnapshot) field.ErrorList {
	vm, errs := c.vm(ctx, snap.Spec.VMName, vmPath)
	if vm == nil {
		return errs
	}
	provider, class, err := c.provider(ctx, vm)
	if err != nil {
		return field.ErrorList{field.InternalError(vmPath, err)}
	}
	if provider == nil {
		return field.ErrorList{field.Invalid(vmPath, snap.Spec.VMName, "the VM is not built yet (no status.infrastructureRef): "+
			"kubectl wait --for=condition=Ready vm/"+snap.Spec.VMName+" first")}
	}
	key := provider.Namespace + "/" + provider.Name
	limits, ok := c.Limits(class)
	if !ok {
		return field.ErrorList{field.Forbidden(vmPath, fmt.Sprintf("the VM runs on Provider %s, whose backend (%s) takes no snapshots", key, class))}
	}
	if snap.Spec.IncludeMemory && !limits.Memory {
		return field.ErrorList{field.Forbidden(memoryPath, fmt.Sprintf("the VM runs on Provider %s, whose backend (%s) cannot keep a VM's memory in a snapshot", key, class))}
	}
	bound := snapshots.BoundOf(key, provider.Spec.Capabilities.MaxSnapshotsPerVM, limits)
	n, err := c.count(ctx, c.snapshots, snap.Spec.VMName, func(obj any) bool {
		return obj.(*banlieue.VirtualMachineSnapshot).DeletionTimestamp == nil
	})
	if err != nil {
		return field.ErrorList{field.InternalError(vmPath, err)}
	}
	if !bound.Allows(n) {
		return field.ErrorList{field.Forbidden(vmPath, bound.Refusal(snap.Spec.VMName, n))}
	}
	return nil
}

// restore checks a new restore: its VM exists, the snapshot is the VM's,
// ready to use and not Stale, and no other restore of the VM is unsettled.
func (c *Checks) restore(ctx context.Context, r *banlieue.VirtualMachineRestore) field.ErrorList {
	vm, errs := c.vm(ctx, r.Spec.VMName, vmPath)
	if vm == nil {
		return errs
	}
	obj, err := c.snapshots.(rest.Getter).Get(ctx, r.Spec.SnapshotName, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return field.ErrorList{field.NotFound(snapshotPath, r.Spec.SnapshotName)}
	}
	if err != nil {
		return field.ErrorList{field.InternalError(snapshotPath, err)}
	}
	snap := obj.(*banlieue.VirtualMachineSnapshot)
	if errs := usable(snap, vm, r.Spec.VMName); len(errs) > 0 {
		return errs
	}
	busy, err := c.count(ctx, c.restores, r.Spec.VMName, func(obj any) bool {
		p := obj.(*banlieue.VirtualMachineRestore).Status.Phase
		return p != banlieue.RestoreDone && p != banlieue.RestoreFailed && p != banlieue.RestoreUnknown
	})
	if err != nil {
		return field.ErrorList{field.InternalError(vmPath, err)}
	}
	if busy > 0 {
		return field.ErrorList{field.Forbidden(vmPath, fmt.Sprintf("another restore of VirtualMachine %s is not done yet: wait for it (kubectl get vmrestore)", r.Spec.VMName))}
	}
	return nil
}

// usable refuses a snapshot a restore cannot use, naming why.
func usable(snap *banlieue.VirtualMachineSnapshot, vm *banlieue.VirtualMachine, vmName string) field.ErrorList {
	if snap.Spec.VMName != vmName {
		return field.ErrorList{field.Invalid(snapshotPath, snap.Name, fmt.Sprintf("it is a snapshot of VirtualMachine %s, not of %s", snap.Spec.VMName, vmName))}
	}
	u := snapshots.Usability{Deleting: snap.DeletionTimestamp != nil, ReadyToUse: snap.Status.ReadyToUse}
	if c := meta.FindStatusCondition(snap.Status.Conditions, banlieue.SnapshotReady); c != nil {
		u.ReadyReason, u.ReadyMessage = c.Reason, c.Message
	}
	if m := snap.Status.Machine; m != nil {
		u.Machine = m.Name
	}
	if ref := vm.Status.InfrastructureRef; ref != nil {
		u.Current = ref.Name
	}
	if why := u.Unusable(); why != "" {
		return field.ErrorList{field.Invalid(snapshotPath, snap.Name, why)}
	}
	return nil
}

// vm reads the VM named name, or says why not at p.
func (c *Checks) vm(ctx context.Context, name string, p *field.Path) (*banlieue.VirtualMachine, field.ErrorList) {
	obj, err := c.VMs.Get(ctx, name, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, field.ErrorList{field.NotFound(p, name)}
	}
	if err != nil {
		return nil, field.ErrorList{field.InternalError(p, err)}
	}
	return obj.(*banlieue.VirtualMachine), nil
}

// provider is the Provider vm is built on and its class; nil while the
// VM has no machine.
func (c *Checks) provider(ctx context.Context, vm *banlieue.VirtualMachine) (*banlieue.Provider, string, error) {
	if vm.Status.Scheduled == nil || vm.Status.InfrastructureRef == nil {
		return nil, "", nil
	}
	ns, name, _ := strings.Cut(placement.QualifiedProvider(vm.Namespace, vm.Status.Scheduled.Provider), "/")
	obj, err := c.Providers.Get(genericapirequest.WithNamespace(ctx, ns), name, &metav1.GetOptions{})
	if err != nil {
		return nil, "", fmt.Errorf("reading the VM's Provider %s/%s: %w", ns, name, err)
	}
	p := obj.(*banlieue.Provider)
	return p, p.Spec.ProviderClassRef.Name, nil
}

// count counts the objects of l of vm, in the request's namespace, that
// keep says count.
func (c *Checks) count(ctx context.Context, l rest.Lister, vm string, keep func(any) bool) (int, error) {
	obj, err := l.List(ctx, &metainternalversion.ListOptions{FieldSelector: fields.OneTermEqualSelector("spec.vmName", vm)})
	if err != nil {
		return 0, err
	}
	items, err := meta.ExtractList(obj)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		if keep(it) {
			n++
		}
	}
	return n, nil
}
