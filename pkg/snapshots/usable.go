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

package snapshots

import (
	"strings"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// Usability is what a restore reads of the snapshot it names, in the
// terms both API versions share.
type Usability struct {
	// Deleting: the snapshot has a deletionTimestamp.
	Deleting bool
	// ReadyReason and ReadyMessage are its Ready condition's ("" without
	// one).
	ReadyReason, ReadyMessage string
	// ReadyToUse: taken, and known to the backend under a name.
	ReadyToUse bool
	// Machine is the machine it was taken of and Current the VM's machine
	// now ("" when unknown): they differ once the VM was recreated.
	Machine, Current string
}

// Unusable says why a restore cannot use the snapshot, "" when it can.
// The API server refuses a restore naming such a snapshot; the controller
// fails a restore whose snapshot became so after it was accepted.
func (u Usability) Unusable() string {
	switch {
	case u.Deleting:
		return "it is being deleted"
	case u.ReadyReason == v1alpha1.SnapshotReasonStale:
		return "it is Stale: " + u.ReadyMessage
	case u.Machine != "" && u.Current != "" && u.Machine != u.Current:
		return "it is Stale: " + StaleMessage(u.Machine, u.Current)
	case !u.ReadyToUse:
		why := "not taken yet"
		if u.ReadyReason != "" {
			why = strings.TrimSuffix(u.ReadyReason+": "+u.ReadyMessage, ": ")
		}
		return "it is not ready to use (" + why + ")"
	}
	return ""
}
