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

package machinespec

import (
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

// admitMachine is Admit asked of a VSphereMachine however it was written (by
// banlieue's controller, by hand, by Cluster API), naming its own fields:
// the provider asks it before any backend call.
func admitMachine(m infrav1.Machine, p *v1alpha1.Provider) *field.Error {
	vm := m.(*infrav1.VSphereMachine)
	r := infrastructure.AsResolved(vm.Spec.CommonMachineSpec)
	for _, d := range vm.Spec.Disks {
		infrastructure.AddDisk(r, d.Name, d.SizeGiB, d.Provisioning)
	}
	for _, n := range vm.Spec.Network {
		infrastructure.AddInterface(r, n.Name, n.Static)
	}
	return infrastructure.MachineField(Admit(r, p))
}
