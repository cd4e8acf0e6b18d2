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

// Package snapshots holds the rules of VirtualMachineSnapshots that the
// API server's checks and the snapshot controller both apply: how many a
// VM may have, and whether one still belongs to the VM's machine.
package snapshots

import (
	"fmt"

	"github.com/firestoned/banlieue/pkg/providers"
)

// Bound is how many snapshots one VM may have on a Provider: Max when
// Bounded, and why, for a refusal's message.
type Bound struct {
	Bounded bool
	Max     int32
	Why     string
}

// BoundOf is the tighter of the Provider's spec.capabilities.maxSnapshotsPerVM
// (nil: unset) and the backend's own bound (limits.MaxPerVM, 0: none).
func BoundOf(provider string, providerMax *int32, limits providers.SnapshotLimits) Bound {
	backend := limits.MaxPerVM
	switch {
	case providerMax != nil && (backend == 0 || *providerMax < backend):
		return Bound{Bounded: true, Max: *providerMax, Why: fmt.Sprintf("Provider %s's spec.capabilities.maxSnapshotsPerVM", provider)}
	case backend > 0:
		return Bound{Bounded: true, Max: backend, Why: fmt.Sprintf("the backend's own bound, which Provider %s keeps", provider)}
	}
	return Bound{}
}

// Allows tells whether a VM that has n snapshots may take one more.
func (b Bound) Allows(n int) bool { return !b.Bounded || int32(n) < b.Max }

// Refusal says why a VM with n snapshots takes no more.
func (b Bound) Refusal(vm string, n int) string {
	return fmt.Sprintf("VirtualMachine %s has %d snapshots, the most %s allows (%d): delete one first", vm, n, b.Why, b.Max)
}

// StaleMessage says why a snapshot taken of machine no longer belongs to
// a VM that now runs on current ("" when it has none): it was recreated
// (migrated), and its backend snapshots went with the old machine.
func StaleMessage(machine, current string) string {
	if current == "" {
		return fmt.Sprintf("taken of machine %s; the VM has no machine now", machine)
	}
	return fmt.Sprintf("taken of machine %s; the VM was recreated since (migrated) and runs on machine %s, which does not have it", machine, current)
}
