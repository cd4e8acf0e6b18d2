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
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
)

// newPowerCommand is start, stop or suspend: spec.desiredPowerState set
// to state, and with --wait, status.powerState (what the backend reports)
// followed until it is state.
func newPowerCommand(cfg *config, streams Streams, verb string, state v1alpha1.PowerState, short string) *cobra.Command {
	var wait bool
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   verb + " NAME",
		Short: short,
		Long: fmt.Sprintf(`%s: sets spec.desiredPowerState to %s. With --wait, waits until the
backend reports it (status.powerState).`, short, state),
		Example: fmt.Sprintf(`  kubectl banlieue %s db-01
  kubectl banlieue %s db-01 --wait --timeout=10m`, verb, verb),
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			vms, _, err := cfg.vms()
			if err != nil {
				return err
			}
			return setPower(cmd.Context(), vms, streams, args[0], state, wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", false, "Wait until the VM's status.powerState is "+string(state)+".")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "How long --wait waits.")
	return cmd
}

func setPower(ctx context.Context, vms banlieuev1alpha1.VirtualMachineInterface, streams Streams, name string, state v1alpha1.PowerState, wait bool, timeout time.Duration) error {
	patch, err := json.Marshal(map[string]any{"spec": map[string]any{"desiredPowerState": state}})
	if err != nil {
		return err
	}
	before, err := vms.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	vm, err := vms.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
	if err != nil {
		return err
	}
	what := "set to"
	if before.Spec.DesiredPowerState == state {
		what = "already"
	}
	fmt.Fprintf(streams.Out, "virtualmachine.banlieue.io/%s desiredPowerState %s %s\n", name, what, state)
	if !wait {
		return nil
	}
	if vm.Status.PowerState == state {
		fmt.Fprintf(streams.Out, "virtualmachine.banlieue.io/%s is %s\n", name, state)
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last, err := untilVM(ctx, vms, name, func(vm *v1alpha1.VirtualMachine) (bool, error) {
		return vm.Status.PowerState == state, nil
	})
	if err != nil {
		if ctx.Err() != nil && last != nil {
			return fmt.Errorf("timed out after %s waiting for virtualmachine %s to be %s: it reports %s%s",
				timeout, name, state, orNone(string(last.Status.PowerState)), readyNote(last))
		}
		return err
	}
	fmt.Fprintf(streams.Out, "virtualmachine.banlieue.io/%s is %s\n", name, state)
	return nil
}

// readyNote is the VM's Ready condition as a clause, for an error saying
// why a wait ended.
func readyNote(vm *v1alpha1.VirtualMachine) string {
	c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady)
	if c == nil {
		return ""
	}
	return fmt.Sprintf(" (Ready=%s, %s: %s)", c.Status, c.Reason, c.Message)
}

func orNone(s string) string {
	if s == "" {
		return "<none>"
	}
	return s
}

// untilVM watches the VM until cond holds, returning the last version
// seen (also when ctx ends first). A VM deleted meanwhile is an error.
func untilVM(ctx context.Context, vms banlieuev1alpha1.VirtualMachineInterface, name string, cond func(*v1alpha1.VirtualMachine) (bool, error)) (*v1alpha1.VirtualMachine, error) {
	var last *v1alpha1.VirtualMachine
	err := untilNamed(ctx, "virtualmachine", name, &v1alpha1.VirtualMachine{}, vms,
		func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return vms.List(ctx, o) },
		func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return vms.Watch(ctx, o) },
		func(obj runtime.Object) (bool, error) {
			vm, ok := obj.(*v1alpha1.VirtualMachine)
			if !ok {
				return false, nil
			}
			last = vm
			return cond(vm)
		})
	return last, err
}
