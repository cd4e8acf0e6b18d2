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
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// TestStatusWriteHoldsPlacedVM: the status write that records a placement
// adds the VM's finalizer (no request of its own); a status without one,
// a VM being deleted (whose finalizer its controller may have removed)
// and a VM that has it already are left as they are.
func TestStatusWriteHoldsPlacedVM(t *testing.T) {
	placed := &banlieue.ScheduledPlacement{Provider: "lab", FailureDomain: "dc0"}
	now := metav1.Now()
	for _, tc := range []struct {
		name     string
		old      banlieue.VirtualMachine
		status   banlieue.VirtualMachineStatus
		deleting bool
		want     []string
	}{
		{name: "placed now", status: banlieue.VirtualMachineStatus{Scheduled: placed}, want: []string{banlieue.VirtualMachineFinalizer}},
		{name: "not placed", status: banlieue.VirtualMachineStatus{ObservedGeneration: 1}},
		{name: "being deleted", status: banlieue.VirtualMachineStatus{Scheduled: placed}, deleting: true},
		{name: "held already", old: banlieue.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"example.com/x", banlieue.VirtualMachineFinalizer}}},
			status: banlieue.VirtualMachineStatus{Scheduled: placed}, want: []string{"example.com/x", banlieue.VirtualMachineFinalizer}},
	} {
		old := tc.old.DeepCopy()
		if tc.deleting {
			old.DeletionTimestamp = &now
		}
		vm := old.DeepCopy()
		vm.Status = tc.status
		NewStatusStrategy(Strategy{}).PrepareForUpdate(context.Background(), vm, old)
		if !slices.Equal(vm.Finalizers, tc.want) {
			t.Errorf("%s: finalizers %v, want %v", tc.name, vm.Finalizers, tc.want)
		}
	}
}
