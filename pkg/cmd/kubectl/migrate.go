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

package kubectl

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// migrateAnnotation asks the VirtualMachine controller to recreate a
// placed VM elsewhere (pkg/controllers/virtualmachine.MigrateAnnotation,
// not imported so that the plugin does not link the controllers; a test
// holds them equal).
const migrateAnnotation = "banlieue.io/migrate"

// reasonMigrated is the Migrating condition's reason once a migration is
// done; any other reason with status False ends one without moving.
const reasonMigrated = "Migrated"

func newMigrateCommand(cfg *config, streams Streams) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "migrate NAME",
		Short: "Recreate a VM on another Provider or failure domain",
		Long: `Ask for a placed VM to be recreated elsewhere (the banlieue.io/migrate=true
annotation), then follow its Migrating condition and status.migration,
printing each step, until it is Migrated or the migration ends without
moving (no other placement fits, timed out, withdrawn): then the command
fails with the reason. A recreate delivers the user data again; disk
contents are not carried.`,
		Example: `  kubectl banlieue migrate db-01
  kubectl banlieue migrate db-01 --wait=false`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runMigrate(cmd.Context(), cfg, streams, args[0], wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "Follow the migration until it is done.")
	cmd.Flags().DurationVar(&timeout, "timeout", 0, "How long to follow it; 0 for the VM's spec.migrationTimeoutSeconds and two minutes more.")
	return cmd
}

func runMigrate(ctx context.Context, cfg *config, streams Streams, name string, wait bool, timeout time.Duration) error {
	vms, _, err := cfg.vms()
	if err != nil {
		return err
	}
	vm, err := vms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	// What the controller would ignore, said at once rather than waited
	// for.
	if vm.Status.Scheduled == nil {
		return fmt.Errorf("virtualmachine %s is not placed yet: there is nothing to migrate", name)
	}
	if vm.Spec.MigrationPolicy == v1alpha1.MigrationNever {
		return fmt.Errorf("virtualmachine %s has spec.migrationPolicy Never: banlieue does not migrate it", name)
	}
	before := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{migrateAnnotation: "true"}}})
	if err != nil {
		return err
	}
	if _, err := vms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(streams.Out, "virtualmachine.banlieue.io/%s annotated %s=true\n", name, migrateAnnotation)
	if !wait {
		return nil
	}
	if timeout <= 0 {
		secs := v1alpha1.DefaultMigrationTimeoutSeconds
		if t := vm.Spec.MigrationTimeoutSeconds; t != nil && *t > 0 {
			secs = *t
		}
		timeout = time.Duration(secs)*time.Second + 2*time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	f := &migrationFollower{before: before}
	last, err := untilVM(ctx, vms, name, func(vm *v1alpha1.VirtualMachine) (bool, error) {
		if line := f.progress(vm); line != "" {
			fmt.Fprintln(streams.Out, line)
		}
		return f.done(vm)
	})
	if err != nil && ctx.Err() != nil && last != nil {
		return fmt.Errorf("timed out after %s following the migration of virtualmachine %s", timeout, name)
	}
	return err
}

// migrationFollower reads a VM's migration as it goes: the Migrating
// condition as it was before the request (before), and whether one has
// been seen in progress since.
type migrationFollower struct {
	before *metav1.Condition
	seen   bool
	last   string
}

// progress is a line for what changed since the last call ("" when
// nothing did).
func (f *migrationFollower) progress(vm *v1alpha1.VirtualMachine) string {
	c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating)
	if c == nil || !f.fresh(c) {
		return ""
	}
	line := fmt.Sprintf("Migrating=%s %s: %s", c.Status, c.Reason, c.Message)
	if m := vm.Status.Migration; m != nil && c.Status == metav1.ConditionTrue {
		line += fmt.Sprintf(" [target %s", m.Target.Provider)
		if m.Target.FailureDomain != "" {
			line += "/" + m.Target.FailureDomain
		}
		line += ", machine " + m.InfrastructureRef.Kind + " " + m.InfrastructureRef.Name + "]"
	}
	if line == f.last {
		return ""
	}
	f.last = line
	return line
}

// fresh: c is about this request, not left from an earlier migration.
// Once one is seen in progress everything after is; before that, only a
// condition that differs from the one before the request.
func (f *migrationFollower) fresh(c *metav1.Condition) bool {
	if c.Status == metav1.ConditionTrue {
		f.seen = true
	}
	if f.seen || f.before == nil {
		return true
	}
	return c.Status != f.before.Status || c.Reason != f.before.Reason || c.Message != f.before.Message ||
		!c.LastTransitionTime.Equal(&f.before.LastTransitionTime)
}

// done: the migration ended, nil when the VM moved, else why not.
func (f *migrationFollower) done(vm *v1alpha1.VirtualMachine) (bool, error) {
	c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating)
	if c == nil || c.Status != metav1.ConditionFalse || !f.fresh(c) {
		return false, nil
	}
	if c.Reason == reasonMigrated {
		return true, nil
	}
	return true, fmt.Errorf("virtualmachine %s was not migrated: %s: %s", vm.Name, c.Reason, c.Message)
}
