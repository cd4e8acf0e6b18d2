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

package apply

import (
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// kindOrder ranks kinds so that what others refer to is applied first:
// namespaces and definitions, then Secrets and RBAC, then banlieue's
// backends and catalogue, and VirtualMachines, which name a class and an
// image, last. A VM applied before its class is admitted with a warning
// and waits; applied after, it is placed at once and nothing is noisy.
var kindOrder = map[string]int{
	"Namespace": 0, "CustomResourceDefinition": 0,
	"ServiceAccount": 1, "Secret": 1, "ConfigMap": 1,
	"ClusterRole": 2, "ClusterRoleBinding": 2, "Role": 2, "RoleBinding": 2,
	"ProviderClass": 3, "Provider": 4, "VMClass": 5, "VMImage": 5,
	"VirtualMachine": 7,
}

// otherKinds rank between the catalogue and the VirtualMachines.
const otherKinds = 6

// Ordered returns objs in the order to apply them: by kind (kindOrder),
// keeping the given order within a rank.
func Ordered(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	rank := func(o *unstructured.Unstructured) int {
		if r, ok := kindOrder[o.GetKind()]; ok {
			return r
		}
		return otherKinds
	}
	out := slices.Clone(objs)
	slices.SortStableFunc(out, func(a, b *unstructured.Unstructured) int { return rank(a) - rank(b) })
	return out
}
