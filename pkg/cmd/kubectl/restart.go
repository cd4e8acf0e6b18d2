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
	"fmt"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
)

func newRestartCommand(cfg *config, streams Streams) *cobra.Command {
	var wait bool
	var timeout time.Duration
	var requestID string
	cmd := &cobra.Command{
		Use:   "restart NAME",
		Short: "Reset a running VM once (virtualmachines/NAME/restart)",
		Long: `Asks for one reset of the running VM. The request is recorded in the VM's
status.restart before the answer, with a request ID (made here unless
--request-id names one): the same ID again restarts once. With --wait
(the default), waits until the provider reports it Done, Failed or
Unknown (the provider stopped while asking: it does not ask again).`,
		Example: `  kubectl banlieue restart db-01
  kubectl banlieue restart db-01 --request-id=upgrade-42 --wait=false`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			vms, _, err := cfg.vms()
			if err != nil {
				return err
			}
			if requestID == "" {
				requestID = string(uuid.NewUUID())
			}
			return restart(cmd.Context(), vms, streams, args[0], requestID, wait, timeout)
		},
	}
	cmd.Flags().BoolVar(&wait, "wait", true, "Wait until the restart is settled.")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Minute, "How long --wait waits.")
	cmd.Flags().StringVar(&requestID, "request-id", "", "The restart's ID: a retry with the same ID restarts once (made here when empty).")
	return cmd
}

func restart(ctx context.Context, vms banlieuev1alpha1.VirtualMachineInterface, streams Streams, name, id string, wait bool, timeout time.Duration) error {
	r, err := vms.Restart(ctx, name, &v1alpha1.VirtualMachineRestart{RequestID: id}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	fmt.Fprintf(streams.Out, "virtualmachine.banlieue.io/%s restart %s %s\n", name, r.RequestID, phaseOf(r.Status))
	if !wait {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	last, err := untilVM(ctx, vms, name, func(vm *v1alpha1.VirtualMachine) (bool, error) {
		rs := vm.Status.Restart
		return rs != nil && rs.ID == r.RequestID && settled(rs.Phase), nil
	})
	if err != nil {
		if ctx.Err() != nil && last != nil {
			return fmt.Errorf("timed out after %s waiting for restart %s of virtualmachine %s: it is %s", timeout, r.RequestID, name, phaseOf(last.Status.Restart))
		}
		return err
	}
	rs := last.Status.Restart
	if rs.Phase != v1alpha1.RestartDone {
		return fmt.Errorf("restart %s of virtualmachine %s is %s: %s", rs.ID, name, rs.Phase, rs.Message)
	}
	fmt.Fprintf(streams.Out, "virtualmachine.banlieue.io/%s restart %s Done\n", name, rs.ID)
	return nil
}

func settled(p v1alpha1.RestartPhase) bool {
	return p == v1alpha1.RestartDone || p == v1alpha1.RestartFailed || p == v1alpha1.RestartUnknown
}

func phaseOf(rs *v1alpha1.VirtualMachineRestartStatus) string {
	if rs == nil {
		return "<none>"
	}
	return string(rs.Phase)
}
