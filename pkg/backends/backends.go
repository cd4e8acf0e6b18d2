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
	"github.com/firestoned/banlieue/pkg/infrastructure"
	libvirtmachines "github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
	proxmoxmachines "github.com/firestoned/banlieue/pkg/providers/proxmox/machinespec"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// Infrastructure is the registry of every backend's machine kind.
func Infrastructure() (*infrastructure.Registry, error) {
	return infrastructure.NewRegistry(
		vspheremachines.Kind(),
		libvirtmachines.Kind(),
		proxmoxmachines.Kind(),
	)
}
