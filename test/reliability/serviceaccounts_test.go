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

package reliability

import (
	"fmt"
	"strings"
	"testing"

	"github.com/firestoned/banlieue/test/grants"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// TestServiceAccountMatrix asks kubectl auth can-i, as every ServiceAccount
// banlieue ships (API server, controller, operator, vSphere, libvirt and Proxmox VE providers), the same
// questions about Secrets, ConfigMaps and the writes that matter, and
// fails on any yes not granted on purpose (and on any no where the
// component needs a yes). No identity that talks to a backend may list or
// watch Secrets anywhere or get one outside the Provider's namespace; none
// may read the API server's serving key, the etcd keys or the CA
// (banlieue-apiserver), nor a tenant namespace's Secrets before it
// consents.
func TestServiceAccountMatrix(t *testing.T) {
	const tenant = "sa-matrix-tenant"
	namespace(t, tenant)
	questions := grants.Questions(tenant)
	var answered count.Ops
	wrong := 0
	var grid strings.Builder
	for _, user := range grants.Identities() {
		saNamespace := strings.Split(user, ":")[2]
		for _, q := range questions {
			args := append(append([]string{"auth", "can-i"}, q.KubectlArgs()...), "--as="+user,
				"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:"+saNamespace, "--as-group=system:authenticated")
			if q.Namespace == "" {
				args = append(args, "--all-namespaces")
			} else {
				args = append(args, "-n", q.Namespace)
			}
			out, _, _ := kubectl(t, args...)
			got := strings.TrimSpace(out)
			// An answer is kubectl's yes or no; anything else (an error
			// reaching the server) is not counted, and fails below.
			if got == "yes" || got == "no" {
				answered.Answered(user + " " + q.String())
			}
			want := "no"
			if grants.Granted(tenant, user, q) {
				want = "yes"
			}
			if got != want {
				wrong++
				t.Errorf("%s: can-i %s = %q, want %q", user, q, got, want)
			}
			fmt.Fprintf(&grid, "%s\t%s\t%s\n", user, q, got)
		}
	}
	t.Logf("kubectl auth can-i matrix:\n%s", grid.String())
	record(t, row{Scenario: fmt.Sprintf("kubectl auth can-i as each shipped ServiceAccount (API server, controller, operator, vSphere, libvirt and Proxmox VE providers) x %d questions: Secrets anywhere, the TLS/etcd/CA Secrets by name, writes beyond each role", len(questions)),
		Operations: answered.N(), Faults: "requests beyond each identity's grants"})
	if wrong > 0 {
		t.Errorf("%d of %d answers differ from the grants", wrong, answered.N())
	}
}
