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

package infrastructure

import (
	"encoding/json"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// SnapshotFields are the machine spec fields banlieue's snapshot
// controller writes (infrastructure.banlieue.io's CommonMachineSpec, every
// backend's): the VirtualMachine controller keeps them when it updates
// the rest of the spec.
var SnapshotFields = []string{"snapshots", "restoreRequest"}

// MachineSnapshots is what a machine says of its snapshots and restore,
// in the common machine fields every backend's machine embeds.
type MachineSnapshots struct {
	Spec           []infrav1.MachineSnapshot
	RestoreRequest *infrav1.RestoreRequest
	Status         []infrav1.MachineSnapshotStatus
	Restore        *infrav1.RestoreStatus
}

// ReadSnapshots reads the snapshot fields of u; fields of the wrong shape
// read as absent.
func ReadSnapshots(u map[string]interface{}) MachineSnapshots {
	var out MachineSnapshots
	read(u, &out.Spec, "spec", "snapshots")
	read(u, &out.RestoreRequest, "spec", "restoreRequest")
	read(u, &out.Status, "status", "snapshots")
	read(u, &out.Restore, "status", "restore")
	return out
}

func read(u map[string]interface{}, into any, path ...string) {
	v, found, err := unstructured.NestedFieldNoCopy(u, path...)
	if !found || err != nil {
		return
	}
	data, err := json.Marshal(v)
	if err != nil {
		return
	}
	_ = json.Unmarshal(data, into)
}

// SnapshotStatusOf is the status entry of the snapshot named name, nil
// when the machine reports none.
func (m MachineSnapshots) SnapshotStatusOf(name string) *infrav1.MachineSnapshotStatus {
	return infrav1.SnapshotNamed(m.Status, name)
}
