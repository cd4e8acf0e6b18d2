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
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// MigrateAnnotation asks for a placed VM to be recreated elsewhere; the
// controller removes it when the migration is done, or has timed out.
const MigrateAnnotation = "banlieue.io/migrate"

// Reasons of the Migrating condition and of a drifted placement.
const (
	reasonPlacementDrifted  = "PlacementDrifted"
	reasonRequested         = "Requested"
	reasonMigrationPending  = "Provisioning"
	reasonNoTarget          = "NoTarget"
	reasonMigrated          = "Migrated"
	reasonNotMigrating      = "PlacementHolds"
	reasonMigrationTimedOut = "MigrationTimedOut"
	reasonDriftReverted     = "DriftReverted"
	reasonRequestWithdrawn  = "RequestWithdrawn"
)

// migration is where a placed VM stands: nothing to do, a migration to
// start, one in progress, or one just finished or cancelled (the caller
// mirrors the machine the VM now runs on, the old one until the cutover).
// It returns when to look again at the latest: a migration's deadline, or
// the end of the wait after one timed out (0 for no such time).
func (r *Reconciler) migration(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) (time.Duration, error) {
	if vm.Status.Migration == nil {
		return r.startMigration(ctx, vm, in)
	}
	return r.continueMigration(ctx, vm, in)
}

// migrationTimeout is how long vm's migration may take.
func migrationTimeout(vm *v1alpha1.VirtualMachine) time.Duration {
	if t := vm.Spec.MigrationTimeoutSeconds; t != nil && *t > 0 {
		return time.Duration(*t) * time.Second
	}
	return time.Duration(v1alpha1.DefaultMigrationTimeoutSeconds) * time.Second
}

// retryWait is how long, at now, a drift waits before it starts vm's
// migration again: one migrationTimeoutSeconds after the last one timed
// out (the Migrating condition's transition to False), 0 when it need not.
func retryWait(vm *v1alpha1.VirtualMachine, now time.Time) time.Duration {
	c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reasonMigrationTimedOut {
		return 0
	}
	return max(c.LastTransitionTime.Add(migrationTimeout(vm)).Sub(now), 0)
}

// drift is why vm's placement no longer holds ("" when it does), the
// placed VMs of its namespace weighed against its required anti-affinity.
func (r *Reconciler) drift(ctx context.Context, vm *v1alpha1.VirtualMachine, providers []v1alpha1.Provider) (string, error) {
	var peers []placement.Peer
	if len(vm.Spec.Placement.AntiAffinityTerms()) > 0 {
		var err error
		if peers, err = r.peers(ctx, vm, nil); err != nil {
			return "", err
		}
	}
	return placement.Drift(vm, findProvider(providers, vm), peers), nil
}

// startMigration begins a migration when the placement no longer holds or
// the user asked, as spec.migrationPolicy allows. A drift whose last
// migration timed out waits migrationTimeoutSeconds before it is tried
// again; the annotation is not waited for.
func (r *Reconciler) startMigration(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) (time.Duration, error) {
	s := vm.Status.Scheduled
	drift, err := r.drift(ctx, vm, in.Providers)
	if err != nil {
		return 0, err
	}
	asked := vm.Annotations[MigrateAnnotation] == "true"
	if drift == "" && !asked {
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating); c != nil {
			r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, c.Reason, c.Message)
		}
		return 0, nil
	}
	policy := vm.Spec.MigrationPolicy
	if policy == v1alpha1.MigrationNever || policy == v1alpha1.MigrationManual && !asked {
		what := "the VM stays where it is"
		if policy == v1alpha1.MigrationManual {
			what = fmt.Sprintf("to recreate it elsewhere: kubectl annotate vm %s -n %s %s=true", vm.Name, vm.Namespace, MigrateAnnotation)
		}
		r.invalid(vm, reasonPlacementDrifted, fmt.Sprintf("%s; spec.migrationPolicy is %s: %s", drift, policy, what))
		return 0, nil
	}
	if wait := retryWait(vm, time.Now()); !asked && wait > 0 {
		return wait, nil // not again at once
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
		return 0, err
	}
	if !d.Fits {
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonNoTarget, fmt.Sprintf("%s, and no other placement fits: %s", why, d.Message))
		return 0, nil
	}
	target := findProviderNamed(in.Providers, vm.Namespace, d.Scheduled.Provider)
	kind, ok := r.Infrastructure.For(target.Spec.ProviderClassRef.Name)
	if !ok {
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonNoTarget, fmt.Sprintf("no backend serves provider class %q", target.Spec.ProviderClassRef.Name))
		return 0, nil
	}
	now := metav1.Now()
	vm.Status.Migration = &v1alpha1.MigrationStatus{Target: *d.Scheduled, Reason: reason, StartTime: &now,
		InfrastructureRef: v1alpha1.InfrastructureReference{APIGroup: kind.GroupVersionKind.Group, Kind: kind.GroupVersionKind.Kind,
			Name: targetName(vm, d.Scheduled)},
		// The placement just chose where this revision is ready.
		ImageRevision: resolve.MigrationImageRevision(in.Image)}
	msg := fmt.Sprintf("%s: recreating the VM on Provider %s, failure domain %s (its user data is delivered again; disk contents are not carried)",
		why, d.Scheduled.Provider, d.Scheduled.FailureDomain)
	r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionTrue, reason, msg)
	r.event(vm, corev1.EventTypeNormal, "MigrationStarted", "Migrate", msg)
	return migrationTimeout(vm), nil
}

// continueMigration builds the target machine, and once it is Ready
// deletes the old one and moves the VM onto the new. Until the old one is
// deleted, the migration is cancelled (the target deleted, the VM staying
// where it is) when its target Provider goes, when its placement holds
// again and nobody asks for it, or when the target is not Ready by the
// deadline.
func (r *Reconciler) continueMigration(ctx context.Context, vm *v1alpha1.VirtualMachine, in placement.Input) (time.Duration, error) {
	mig := vm.Status.Migration
	source, err := r.sourceMachine(ctx, vm)
	if err != nil {
		return 0, err
	}
	// Until the cutover deletes it, the VM runs on source: a migration
	// can still be called off.
	cancellable := source != nil && source.GetDeletionTimestamp().IsZero()
	target := findProviderNamed(in.Providers, vm.Namespace, mig.Target.Provider)
	kind, ok := r.Infrastructure.For(providerClass(target))
	if target == nil || !target.DeletionTimestamp.IsZero() || !ok {
		// Gone (or going) while building there: the VM stays, and the
		// placement decides anew.
		return 0, r.cancelMigration(ctx, vm, corev1.EventTypeWarning, reasonNoTarget,
			fmt.Sprintf("Provider %s went away during the migration; the VM stays on %s", mig.Target.Provider, vm.Status.Scheduled.Provider))
	}
	// A source Provider not Ready publishes no current failure domains:
	// no drift it shows then is a reason to call the migration off.
	if current := findProvider(in.Providers, vm); cancellable && current != nil && meta.IsStatusConditionTrue(current.Status.Conditions, v1alpha1.ProviderReady) {
		drift, err := r.drift(ctx, vm, in.Providers)
		if err != nil {
			return 0, err
		}
		if drift == "" && vm.Annotations[MigrateAnnotation] != "true" {
			reason, msg := reasonDriftReverted, "the placement on Provider %s, failure domain %s, holds again"
			if mig.Reason == reasonRequested {
				reason, msg = reasonRequestWithdrawn, "the "+MigrateAnnotation+" annotation was removed: the VM stays on Provider %s, failure domain %s"
			}
			return 0, r.cancelMigration(ctx, vm, corev1.EventTypeNormal, reason,
				fmt.Sprintf(msg, vm.Status.Scheduled.Provider, vm.Status.Scheduled.FailureDomain))
		}
	}
	if mig.StartTime == nil {
		// Started before migrations had a deadline: it runs from now.
		now := metav1.Now()
		mig.StartTime = &now
	}
	placed := vm.DeepCopy()
	placed.Status.Scheduled = mig.Target.DeepCopy()
	placed.Status.Restart = nil // a restart is the running machine's
	m, err := r.applyMachine(ctx, kind, placed, resolve.AtImageRevision(in.Resolved, in.Image, mig.ImageRevision), target, mig.InfrastructureRef.Name)
	if err != nil {
		return 0, err
	}
	observed, err := r.read(m)
	if err != nil {
		return 0, err
	}
	if c := observed.Ready; c == nil || c.Status != metav1.ConditionTrue || observed.Provisioned == nil || !*observed.Provisioned || !m.GetDeletionTimestamp().IsZero() {
		deadline := mig.StartTime.Add(migrationTimeout(vm))
		left := time.Until(deadline)
		if left <= 0 && cancellable {
			timeout := migrationTimeout(vm)
			msg := fmt.Sprintf("%s %s on Provider %s was not Ready within %s: deleted it; the VM stays on %s", kind.GroupVersionKind.Kind, m.GetName(), mig.Target.Provider, timeout, vm.Status.Scheduled.Provider)
			if mig.Reason == reasonRequested {
				msg += "; annotate it " + MigrateAnnotation + "=true again to retry"
			} else {
				msg += fmt.Sprintf("; the drift starts a migration again after %s", time.Now().Add(timeout).UTC().Format(time.RFC3339))
			}
			if err := r.cancelMigration(ctx, vm, corev1.EventTypeWarning, reasonMigrationTimedOut, msg); err != nil {
				return 0, err
			}
			// A request was acted on: asking again retries.
			requestDone(vm, MigrateAnnotation)
			return timeout, nil
		}
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionTrue, reasonMigrationPending,
			fmt.Sprintf("waiting for %s %s on Provider %s to be Ready (until %s); the VM still runs on %s", kind.GroupVersionKind.Kind, m.GetName(), mig.Target.Provider,
				deadline.UTC().Format(time.RFC3339), vm.Status.Scheduled.Provider))
		return max(left, 0), nil
	}
	// The new machine is Ready: the old one goes.
	if source != nil {
		old := vm.Status.InfrastructureRef
		r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionTrue, reasonMigrationPending,
			fmt.Sprintf("%s %s is Ready; deleting %s %s", kind.GroupVersionKind.Kind, m.GetName(), old.Kind, old.Name))
		return 0, r.deleteMachine(ctx, vm, source) // its deletion requeues us
	}
	msg := fmt.Sprintf("moved from Provider %s, failure domain %s, to Provider %s, failure domain %s",
		vm.Status.Scheduled.Provider, vm.Status.Scheduled.FailureDomain, mig.Target.Provider, mig.Target.FailureDomain)
	if mig.ImageRevision != "" {
		vm.Status.ImageRevision = mig.ImageRevision
	}
	vm.Status.Scheduled, vm.Status.InfrastructureRef, vm.Status.Migration = mig.Target.DeepCopy(), mig.InfrastructureRef.DeepCopy(), nil
	r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reasonMigrated, msg)
	r.setCondition(vm, v1alpha1.VirtualMachinePlacementValid, metav1.ConditionTrue, placement.ReasonResolved, msg)
	r.event(vm, corev1.EventTypeNormal, reasonMigrated, "Migrate", msg)
	requestDone(vm, MigrateAnnotation)
	return 0, nil
}

// sourceMachine is the machine vm runs on (status.infrastructureRef), nil
// once it is gone (a migration's cutover deleted it).
func (r *Reconciler) sourceMachine(ctx context.Context, vm *v1alpha1.VirtualMachine) (client.Object, error) {
	old := vm.Status.InfrastructureRef
	if old == nil {
		return nil, nil
	}
	machines, err := r.machinesOf(ctx, vm)
	if err != nil {
		return nil, err
	}
	for _, m := range machines {
		if m.GetName() == old.Name && m.GetObjectKind().GroupVersionKind().Kind == old.Kind {
			return m, nil
		}
	}
	return nil, nil
}

// cancelMigration ends vm's migration without moving it: the target
// machine built so far is deleted, status.migration cleared,
// Migrating=False with reason, an Event.
func (r *Reconciler) cancelMigration(ctx context.Context, vm *v1alpha1.VirtualMachine, eventType, reason, msg string) error {
	mig := vm.Status.Migration
	machines, err := r.machinesOf(ctx, vm)
	if err != nil {
		return err
	}
	for _, m := range machines {
		if m.GetName() == mig.InfrastructureRef.Name && m.GetObjectKind().GroupVersionKind().Kind == mig.InfrastructureRef.Kind {
			if err := r.deleteMachine(ctx, vm, m); err != nil {
				return err
			}
		}
	}
	vm.Status.Migration = nil
	r.setCondition(vm, v1alpha1.VirtualMachineMigrating, metav1.ConditionFalse, reason, msg)
	r.event(vm, eventType, reason, "Migrate", msg)
	return nil
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
