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
	"hash/fnv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/placement"
)

// MigrateAnnotation asks for a placed VM to be recreated elsewhere; the
// controller removes it when the migration is done.
const MigrateAnnotation = "banlieue.io/migrate"

// Reasons of the Migrating condition and of a drifted placement.
const (
	reasonPlacementDrifted = "PlacementDrifted"
	reasonRequested        = "Requested"
	reasonMigrationPending = "Provisioning"
	reasonNoTarget         = "NoTarget"
	reasonMigrated         = "Migrated"
	reasonNotMigrating     = "PlacementHolds"
)

// migration is where a placed VM stands: nothing to do (done false), or a
// migration in progress or just finished (done true: the caller mirrors
// the machine the VM now runs on, the old one until the cutover).
func (r *Reconciler) migration(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) error {
	if vm.Status.Migration == nil {
		return r.startMigration(ctx, vm, in)
	}
	return r.continueMigration(ctx, vm, in)
}

// startMigration begins a migration when the placement no longer holds or
// the user asked, as spec.migrationPolicy allows.
func (r *Reconciler) startMigration(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) error {
	s := vm.Status.Scheduled
	current := findProvider(in.Providers, vm)
	drift := placement.Drift(vm, current)
	asked := vm.Annotations[MigrateAnnotation] == "true"
	if drift == "" && !asked {
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating); c != nil {
			r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, c.Reason, c.Message)
		}
		return nil
	}
	policy := vm.Spec.MigrationPolicy
	if policy == v1alpha1.MigrationNever || policy == v1alpha1.MigrationManual && !asked {
		what := "the VM stays where it is"
		if policy == v1alpha1.MigrationManual {
			what = fmt.Sprintf("to recreate it elsewhere: kubectl annotate vm %s -n %s %s=true", vm.Name, vm.Namespace, MigrateAnnotation)
		}
		r.invalid(vm, reasonPlacementDrifted, fmt.Sprintf("%s; spec.migrationPolicy is %s: %s", drift, policy, what))
		return nil
	}
	why, reason := drift, reasonPlacementDrifted
	candidates := in.Providers
	if drift == "" {
		why, reason = "asked by the "+MigrateAnnotation+" annotation", reasonRequested
		// Asked to move: anywhere but where it is.
		candidates = placement.Without(in.Providers, placement.QualifiedProvider(vm.Namespace, s.Provider), s.FailureDomain)
	}
	in.Providers = candidates
	d, err := r.decide(ctx, in)
	if err != nil {
		return err
	}
	if !d.Fits {
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonNoTarget, fmt.Sprintf("%s, and no other placement fits: %s", why, d.Message))
		return nil
	}
	target := findProviderNamed(in.Providers, vm.Namespace, d.Scheduled.Provider)
	kind, ok := r.Infrastructure.For(target.Spec.ProviderClassRef.Name)
	if !ok {
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonNoTarget, fmt.Sprintf("no backend serves provider class %q", target.Spec.ProviderClassRef.Name))
		return nil
	}
	vm.Status.Migration = &v1alpha1.MigrationStatus{Target: *d.Scheduled, Reason: reason,
		InfrastructureRef: v1alpha1.InfrastructureReference{APIGroup: kind.GroupVersionKind.Group, Kind: kind.GroupVersionKind.Kind,
			Name: targetName(vm, d.Scheduled)}}
	msg := fmt.Sprintf("%s: recreating the VM on Provider %s, failure domain %s (its user data is delivered again; disk contents are not carried)",
		why, d.Scheduled.Provider, d.Scheduled.FailureDomain)
	r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionTrue, reason, msg)
	r.event(vm, corev1.EventTypeNormal, "MigrationStarted", "Migrate", msg)
	return nil
}

// continueMigration builds the target machine, and once it is Ready
// deletes the old one and moves the VM onto the new.
func (r *Reconciler) continueMigration(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) error {
	mig := vm.Status.Migration
	target := findProviderNamed(in.Providers, vm.Namespace, mig.Target.Provider)
	kind, ok := r.Infrastructure.For(providerClass(target))
	if target == nil || !ok {
		// Gone while building there: start over from the placement.
		vm.Status.Migration = nil
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonNoTarget, fmt.Sprintf("Provider %s went away during the migration", mig.Target.Provider))
		return nil
	}
	placed := vm.DeepCopy()
	placed.Status.Scheduled = mig.Target.DeepCopy()
	m, err := r.applyMachine(ctx, kind, placed, in.Resolved, target, mig.InfrastructureRef.Name)
	if err != nil {
		return err
	}
	observed, err := r.read(m)
	if err != nil {
		return err
	}
	if c := observed.Ready; c == nil || c.Status != metav1.ConditionTrue || observed.Provisioned == nil || !*observed.Provisioned {
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionTrue, reasonMigrationPending,
			fmt.Sprintf("waiting for %s %s on Provider %s to be Ready; the VM still runs on %s", kind.GroupVersionKind.Kind, m.GetName(), mig.Target.Provider, vm.Status.Scheduled.Provider))
		return nil
	}
	// The new machine is Ready: the old one goes.
	if old := vm.Status.InfrastructureRef; old != nil {
		machines, err := r.machinesOf(ctx, vm)
		if err != nil {
			return err
		}
		for _, om := range machines {
			if om.GetName() == old.Name && om.GetObjectKind().GroupVersionKind().Kind == old.Kind {
				r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionTrue, reasonMigrationPending,
					fmt.Sprintf("%s %s is Ready; deleting %s %s", kind.GroupVersionKind.Kind, m.GetName(), old.Kind, old.Name))
				return r.deleteMachine(ctx, vm, om) // its deletion requeues us
			}
		}
	}
	msg := fmt.Sprintf("moved from Provider %s, failure domain %s, to Provider %s, failure domain %s",
		vm.Status.Scheduled.Provider, vm.Status.Scheduled.FailureDomain, mig.Target.Provider, mig.Target.FailureDomain)
	vm.Status.Scheduled, vm.Status.InfrastructureRef, vm.Status.Migration = mig.Target.DeepCopy(), mig.InfrastructureRef.DeepCopy(), nil
	r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonMigrated, msg)
	r.setCondition(vm, v1alpha1.VirtualMachinePlacementValid, metav1.ConditionTrue, placement.ReasonResolved, msg)
	r.event(vm, corev1.EventTypeNormal, reasonMigrated, "Migrate", msg)
	return r.removeAnnotation(ctx, vm, MigrateAnnotation)
}

// targetName is the machine name of vm on placement s: stable for one
// placement, different from the machine it replaces.
func targetName(vm *v1alpha1.VirtualMachine, s *v1alpha1.ScheduledPlacement) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s.Provider + "/" + s.FailureDomain + "/" + string(vm.UID)))
	return fmt.Sprintf("%s-%08x", vm.Name, h.Sum32())
}

func findProviderNamed(providers []v1alpha1.Provider, namespace, name string) *v1alpha1.Provider {
	want := placement.QualifiedProvider(namespace, name)
	for i := range providers {
		if placement.ImageStatusKey(&providers[i]) == want {
			return &providers[i]
		}
	}
	return nil
}

func providerClass(p *v1alpha1.Provider) string {
	if p == nil {
		return ""
	}
	return p.Spec.ProviderClassRef.Name
}
