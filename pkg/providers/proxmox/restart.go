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

package proxmox

import (
	"context"
	"fmt"

	"github.com/firestoned/banlieue/pkg/providers"
)

var _ providers.Restarter = &Client{}

// RestartMachine resets the VM (POST status/reset, a qmreset task),
// recording the task before it is awaited.
func (c *Client) RestartMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) error {
	c.resume(ctx, spec.TaskRef)
	vm, err := c.find(ctx, spec)
	if err != nil {
		return err
	}
	if vm == nil {
		return fmt.Errorf("resetting %s: no VM of instance %s", spec.Name, spec.InstanceUUID)
	}
	task, err := vm.Reset(ctx)
	if err != nil {
		return fmt.Errorf("resetting %s: %w", spec.Name, err)
	}
	h := handle{node: vm.Node, vmid: int(vm.VMID)}
	if err := c.wait(ctx, task, record, h.String()); err != nil {
		return fmt.Errorf("resetting %s: %w", spec.Name, err)
	}
	return nil
}
