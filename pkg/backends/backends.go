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

// Package backends is the one list of banlieue's backends: a new backend
// adds its registration here and nowhere else in the core.
package backends

import (
	"fmt"
	"strings"

	"github.com/firestoned/banlieue/artifacts"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	libvirtmachines "github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
	proxmoxmachines "github.com/firestoned/banlieue/pkg/providers/proxmox/machinespec"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// Infrastructure is the registry of every backend's machine kind, each
// with the limits of its CRD as shipped.
func Infrastructure() (*infrastructure.Registry, error) {
	kinds := []infrastructure.Kind{
		vspheremachines.Kind(),
		libvirtmachines.Kind(),
		proxmoxmachines.Kind(),
	}
	for i := range kinds {
		var err error
		if kinds[i].Limits, err = crdLimits(kinds[i]); err != nil {
			return nil, err
		}
	}
	return infrastructure.NewRegistry(kinds...)
}

// crdLimits are the limits of k's CRD in artifacts/crds.
func crdLimits(k infrastructure.Kind) (infrastructure.Limits, error) {
	gvk := k.GroupVersionKind
	name := fmt.Sprintf("crds/%s_%ss.yaml", gvk.Group, strings.ToLower(gvk.Kind))
	doc, err := artifacts.CRDs.ReadFile(name)
	if err != nil {
		return infrastructure.Limits{}, fmt.Errorf("the CRD of %s: %w", gvk.Kind, err)
	}
	l, err := infrastructure.LimitsFromCRD(doc)
	if err != nil {
		return l, fmt.Errorf("the CRD of %s: %w", gvk.Kind, err)
	}
	return l, nil
}
