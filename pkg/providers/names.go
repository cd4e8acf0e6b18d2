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

package providers

import (
	"crypto/sha256"
	"encoding/hex"
)

// MaxBackendNameLength is the longest VM name every backend takes (vCenter
// allows 80 characters).
const MaxBackendNameLength = 80

// BackendName is the name of the VM of the object namespace/name in the
// backend: "<namespace>.<name>". A namespace holds no dot (it is a DNS
// label), so the first dot always ends it and two objects never share a
// name, as "team/a-db" and "team-a/db" did when joined with a hyphen. A
// name longer than the backend allows keeps its readable start and ends
// in a hash of the whole, so it stays unique. The VM's identity is still
// the object's UID; the name is for people.
func BackendName(namespace, name string) string {
	full := namespace + "." + name
	if len(full) <= MaxBackendNameLength {
		return full
	}
	sum := sha256.Sum256([]byte(full))
	suffix := "-" + hex.EncodeToString(sum[:4])
	return full[:MaxBackendNameLength-len(suffix)] + suffix
}

// HostName is the guest's host name for an object name: at most 63
// characters, no trailing hyphen or dot.
func HostName(name string) string {
	if len(name) > 63 {
		name = name[:63]
	}
	for len(name) > 0 && (name[len(name)-1] == '-' || name[len(name)-1] == '.') {
		name = name[:len(name)-1]
	}
	return name
}
