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

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Machine is an infrastructure machine of any backend as the provider's
// generic reconcilers see it: an object with the common spec and status
// every kind embeds.
type Machine interface {
	metav1.Object
	runtime.Object
	// CommonSpec and CommonStatus point into the object.
	CommonSpec() *CommonMachineSpec
	CommonStatus() *CommonMachineStatus
}

// CommonSpec implements Machine.
func (m *VSphereMachine) CommonSpec() *CommonMachineSpec { return &m.Spec.CommonMachineSpec }

// CommonStatus implements Machine.
func (m *VSphereMachine) CommonStatus() *CommonMachineStatus { return &m.Status.CommonMachineStatus }

// CommonSpec implements Machine.
func (m *LibvirtMachine) CommonSpec() *CommonMachineSpec { return &m.Spec.CommonMachineSpec }

// CommonStatus implements Machine.
func (m *LibvirtMachine) CommonStatus() *CommonMachineStatus { return &m.Status.CommonMachineStatus }

// CommonSpec implements Machine.
func (m *ProxmoxMachine) CommonSpec() *CommonMachineSpec { return &m.Spec.CommonMachineSpec }

// CommonStatus implements Machine.
func (m *ProxmoxMachine) CommonStatus() *CommonMachineStatus { return &m.Status.CommonMachineStatus }

// SnapshotNamed is the entry of snapshot name in a machine's
// status.snapshots, pointing into the list; nil when it has none.
func SnapshotNamed(statuses []MachineSnapshotStatus, name string) *MachineSnapshotStatus {
	for i := range statuses {
		if statuses[i].Name == name {
			return &statuses[i]
		}
	}
	return nil
}
