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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// ReadyCondition is the contract's Ready condition type.
const ReadyCondition = "Ready"

// Observed is what the InfraMachine contract says of one machine.
type Observed struct {
	ProviderID string
	// Provisioned is status.initialization.provisioned (nil: not said yet).
	Provisioned *bool
	Addresses   []v1alpha1.MachineAddress
	// PowerState is status.powerState, banlieue's addition to the contract.
	PowerState string
	// Ready is the Ready condition, nil when not reported yet.
	Ready *metav1.Condition
	// Restart is status.restart (banlieue's addition): the last restart
	// the provider acted on; ID empty when none.
	Restart ObservedRestart
}

// ObservedRestart is a machine's status.restart.
type ObservedRestart struct {
	ID, Phase, Message string
}

// Read reads u through the contract fields only; fields of the wrong
// shape read as absent.
func Read(u *unstructured.Unstructured) Observed {
	var o Observed
	o.ProviderID, _, _ = unstructured.NestedString(u.Object, "spec", "providerID")
	if p, found, err := unstructured.NestedBool(u.Object, "status", "initialization", "provisioned"); found && err == nil {
		o.Provisioned = &p
	}
	o.PowerState, _, _ = unstructured.NestedString(u.Object, "status", "powerState")
	o.Restart.ID, _, _ = unstructured.NestedString(u.Object, "status", "restart", "id")
	o.Restart.Phase, _, _ = unstructured.NestedString(u.Object, "status", "restart", "phase")
	o.Restart.Message, _, _ = unstructured.NestedString(u.Object, "status", "restart", "message")
	if addrs, found, _ := unstructured.NestedSlice(u.Object, "status", "addresses"); found {
		for _, a := range addrs {
			m, ok := a.(map[string]interface{})
			if !ok {
				continue
			}
			t, _ := m["type"].(string)
			addr, _ := m["address"].(string)
			if addr != "" {
				o.Addresses = append(o.Addresses, v1alpha1.MachineAddress{Type: v1alpha1.MachineAddressType(t), Address: addr})
			}
		}
	}
	if conds, found, _ := unstructured.NestedSlice(u.Object, "status", "conditions"); found {
		for _, c := range conds {
			raw, err := json.Marshal(c)
			if err != nil {
				continue
			}
			var cond metav1.Condition
			if json.Unmarshal(raw, &cond) == nil && cond.Type == ReadyCondition {
				o.Ready = &cond
			}
		}
	}
	return o
}
