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

	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// canI is one question put to kubectl auth can-i. resource is
// RESOURCE[/NAME]; a "/status" suffix names the status subresource.
type canI struct{ verb, resource, namespace string }

func (c canI) String() string {
	if c.namespace == "" {
		return c.verb + " " + c.resource + " (cluster-wide)"
	}
	return c.verb + " " + c.resource + " -n " + c.namespace
}

// args are kubectl's: "x/status" and "x/finalizers" are --subresource
// (kubectl reads RESOURCE/NAME otherwise).
func (c canI) args() []string {
	for _, sub := range []string{"status", "finalizers", "token"} {
		if r, ok := strings.CutSuffix(c.resource, "/"+sub); ok {
			return []string{c.verb, r, "--subresource=" + sub}
		}
	}
	return []string{c.verb, c.resource}
}

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
	questions := []canI{
		{"get", "secrets", "kube-system"},
		{"get", "secrets", "default"},
		{"get", "secrets", tenant},
		{"get", "configmaps", tenant},
		{"list", "secrets", devenv.Namespace},
		{"watch", "secrets", devenv.Namespace},
		{"list", "secrets", ""},
		{"watch", "secrets", ""},
		{"list", "configmaps", devenv.Namespace},
		// Each backend's credentials by name: only its own provider (and
		// the operator, which grants them) may read them.
		{"get", "secrets/vsphere-creds", devenv.Namespace},
		{"get", "configmaps/vcenter-ca", devenv.Namespace},
		{"get", "secrets/lab-proxmox-token", devenv.Namespace},
		{"get", "secrets/libvirt-creds", devenv.Namespace},
		{"get", "secrets/some-vm-cloudinit", devenv.Namespace},
		{"get", "secrets/banlieue-apiserver-tls", devenv.APIServerNamespace},
		{"get", "secrets/banlieue-etcd-client-tls", devenv.APIServerNamespace},
		{"get", "secrets/banlieue-etcd-server-tls", devenv.APIServerNamespace},
		{"get", "secrets/banlieue-ca", devenv.APIServerNamespace},
		{"get", "secrets", devenv.APIServerNamespace},
		{"get", "configmaps/extension-apiserver-authentication", "kube-system"},
		{"create", "pods", devenv.Namespace},
		// Services: the operator makes its workloads' metrics Services
		// where it runs them (the admission policy keeps it to those it
		// labelled); nobody makes one elsewhere, nor touches the API
		// server's.
		{"create", "services", devenv.Namespace},
		{"delete", "services", devenv.Namespace},
		{"create", "services", tenant},
		{"patch", "services/banlieue-apiserver", devenv.APIServerNamespace},
		{"create", "rolebindings", tenant},
		{"bind", "clusterroles", ""},
		{"escalate", "clusterroles", ""},
		{"impersonate", "serviceaccounts", ""},
		// The API server mints console tokens of itself only
		// (TokenRequest); nobody mints another identity's.
		{"create", "serviceaccounts/banlieue-apiserver/token", devenv.APIServerNamespace},
		{"create", "serviceaccounts/default/token", devenv.APIServerNamespace},
		{"create", "serviceaccounts/banlieue-provider-libvirt/token", devenv.Namespace},
		{"create", "serviceaccounts/banlieue-controller/token", devenv.Namespace},
		{"create", "tokenreviews.authentication.k8s.io", ""},
		{"create", "subjectaccessreviews.authorization.k8s.io", ""},
		{"patch", "virtualmachines.banlieue.io/status", tenant},
		// Snapshots and restores: the controller writes their status and
		// a snapshot's finalizer; no provider touches them (it acts on
		// its machines' spec.snapshots), nobody here creates one.
		{"patch", "virtualmachinesnapshots.banlieue.io/status", tenant},
		{"patch", "virtualmachinerestores.banlieue.io/status", tenant},
		{"patch", "virtualmachinesnapshots.banlieue.io", tenant},
		{"create", "virtualmachinesnapshots.banlieue.io", tenant},
		{"create", "virtualmachinerestores.banlieue.io", tenant},
		// A Provider's spec names the Secrets its provider is granted: no
		// identity serving it may write it (status and finalizers only).
		{"patch", "providers.banlieue.io", devenv.Namespace},
		{"update", "providers.banlieue.io", devenv.Namespace},
		{"patch", "providers.banlieue.io/status", devenv.Namespace},
		{"patch", "providers.banlieue.io/finalizers", devenv.Namespace},
		{"patch", "providers.banlieue.io", tenant},
		{"patch", "providers.banlieue.io/status", tenant},
		{"patch", "providers.banlieue.io/finalizers", tenant},
		{"patch", "vmimages.banlieue.io/status", ""},
		// The cluster's RBAC: nobody here rewrites it; the operator binds
		// its backends' shipped roles only and sets their bindings'
		// subjects, creating and deleting none.
		{"delete", "clusterrolebindings/cluster-admin", ""},
		{"update", "clusterrolebindings/cluster-admin", ""},
		{"create", "clusterrolebindings", ""},
		{"update", "clusterroles/admin", ""},
		{"delete", "clusterroles/edit", ""},
		{"create", "clusterroles", ""},
		{"bind", "clusterroles/cluster-admin", ""},
		{"bind", "clusterroles/banlieue-provider-vsphere-workload", ""},
		{"update", "clusterrolebindings/banlieue-provider-vsphere-workloads", ""},
		{"create", "vspheremachines.infrastructure.banlieue.io", tenant},
		{"patch", "vspheremachines.infrastructure.banlieue.io/status", tenant},
		{"delete", "vspheremachines.infrastructure.banlieue.io", tenant},
		{"create", "libvirtmachines.infrastructure.banlieue.io", tenant},
		{"patch", "libvirtmachines.infrastructure.banlieue.io/status", tenant},
		{"delete", "libvirtmachines.infrastructure.banlieue.io", tenant},
		{"create", "proxmoxmachines.infrastructure.banlieue.io", tenant},
		{"patch", "proxmoxmachines.infrastructure.banlieue.io/status", tenant},
		{"delete", "proxmoxmachines.infrastructure.banlieue.io", tenant},
		// Pool addresses: the controller claims and serves them; nobody
		// deletes an IPAddress (its claim's deletion does) or edits a pool.
		{"create", "ipaddressclaims.ipam.cluster.x-k8s.io", tenant},
		{"create", "ipaddresses.ipam.cluster.x-k8s.io", tenant},
		{"delete", "ipaddresses.ipam.cluster.x-k8s.io", tenant},
		{"patch", "ippools.infrastructure.banlieue.io", ""},
		{"patch", "ippools.infrastructure.banlieue.io/status", ""},
		// Reservations keep each pool address unique: only the controller
		// makes and frees them, and nobody edits one.
		{"create", "ipaddressreservations.infrastructure.banlieue.io", ""},
		{"delete", "ipaddressreservations.infrastructure.banlieue.io", ""},
		{"patch", "ipaddressreservations.infrastructure.banlieue.io", ""},
		{"update", "ipaddressreservations.infrastructure.banlieue.io", ""},
	}
	libvirtUser := devenv.ProviderUserOf("libvirt")
	proxmoxUser := devenv.ProviderUserOf("proxmox")
	// The yeses granted on purpose, per identity; every other answer is no.
	granted := map[string][]canI{
		devenv.BanlieueUser: {
			{"get", "configmaps/extension-apiserver-authentication", "kube-system"},
			{"create", "serviceaccounts/banlieue-apiserver/token", devenv.APIServerNamespace},
			{"create", "tokenreviews.authentication.k8s.io", ""},
			{"create", "subjectaccessreviews.authorization.k8s.io", ""},
		},
		devenv.ControllerUser: {
			// Its HTTPS metrics endpoint asks kube-apiserver who calls and
			// whether they may read /metrics (banlieue-metrics-auth).
			{"create", "tokenreviews.authentication.k8s.io", ""},
			{"create", "subjectaccessreviews.authorization.k8s.io", ""},
			{"patch", "virtualmachines.banlieue.io/status", tenant},
			{"patch", "virtualmachinesnapshots.banlieue.io/status", tenant},
			{"patch", "virtualmachinerestores.banlieue.io/status", tenant},
			{"patch", "virtualmachinesnapshots.banlieue.io", tenant},
			{"create", "vspheremachines.infrastructure.banlieue.io", tenant},
			{"delete", "vspheremachines.infrastructure.banlieue.io", tenant},
			{"create", "libvirtmachines.infrastructure.banlieue.io", tenant},
			{"delete", "libvirtmachines.infrastructure.banlieue.io", tenant},
			{"create", "proxmoxmachines.infrastructure.banlieue.io", tenant},
			{"delete", "proxmoxmachines.infrastructure.banlieue.io", tenant},
			// Ready FailureDomainRequired of a machine no provider serves
			// (pkg/controllers/capispread).
			{"patch", "vspheremachines.infrastructure.banlieue.io/status", tenant},
			{"patch", "libvirtmachines.infrastructure.banlieue.io/status", tenant},
			{"patch", "proxmoxmachines.infrastructure.banlieue.io/status", tenant},
			{"create", "ipaddressclaims.ipam.cluster.x-k8s.io", tenant},
			{"create", "ipaddresses.ipam.cluster.x-k8s.io", tenant},
			{"patch", "ippools.infrastructure.banlieue.io/status", ""},
			{"create", "ipaddressreservations.infrastructure.banlieue.io", ""},
			{"delete", "ipaddressreservations.infrastructure.banlieue.io", ""},
		},
		// Each provider writes its own kind's machines only, and gets only
		// its own backend's credentials, by the names in its credentials
		// Role (artifacts/deploy/providers/*/rbac.yaml).
		proxmoxUser: {
			{"create", "tokenreviews.authentication.k8s.io", ""},
			{"create", "subjectaccessreviews.authorization.k8s.io", ""},
			{"get", "secrets/lab-proxmox-token", devenv.Namespace},
			{"patch", "providers.banlieue.io/status", devenv.Namespace},
			{"patch", "providers.banlieue.io/finalizers", devenv.Namespace},
			{"patch", "vmimages.banlieue.io/status", ""},
			{"patch", "proxmoxmachines.infrastructure.banlieue.io/status", tenant},
		},
		libvirtUser: {
			{"create", "tokenreviews.authentication.k8s.io", ""},
			{"create", "subjectaccessreviews.authorization.k8s.io", ""},
			{"get", "secrets/libvirt-creds", devenv.Namespace},
			{"patch", "providers.banlieue.io/status", devenv.Namespace},
			{"patch", "providers.banlieue.io/finalizers", devenv.Namespace},
			{"patch", "vmimages.banlieue.io/status", ""},
			{"patch", "libvirtmachines.infrastructure.banlieue.io/status", tenant},
		},
		// The operator grants its workloads, in the namespaces it serves,
		// what it holds there (no escalate): their Providers and the
		// Secrets Providers name (get by name). Cluster-wide it holds
		// nothing of what its workloads do: it binds the shipped role.
		devenv.OperatorUser: {
			{"create", "tokenreviews.authentication.k8s.io", ""},
			{"create", "subjectaccessreviews.authorization.k8s.io", ""},
			{"get", "secrets/vsphere-creds", devenv.Namespace},
			{"get", "configmaps/vcenter-ca", devenv.Namespace},
			{"get", "secrets/lab-proxmox-token", devenv.Namespace},
			{"get", "secrets/libvirt-creds", devenv.Namespace},
			{"get", "secrets/some-vm-cloudinit", devenv.Namespace},
			{"patch", "providers.banlieue.io/status", devenv.Namespace},
			{"patch", "providers.banlieue.io/finalizers", devenv.Namespace},
			{"patch", "providers.banlieue.io/status", tenant},
			{"patch", "providers.banlieue.io/finalizers", tenant},
			{"bind", "clusterroles/banlieue-provider-vsphere-workload", ""},
			{"update", "clusterrolebindings/banlieue-provider-vsphere-workloads", ""},
			{"create", "services", devenv.Namespace},
			{"delete", "services", devenv.Namespace},
		},
		devenv.ProviderUser: {
			{"create", "tokenreviews.authentication.k8s.io", ""},
			{"create", "subjectaccessreviews.authorization.k8s.io", ""},
			// Credentials and CA bundles of the Providers it serves, by name.
			{"get", "secrets/vsphere-creds", devenv.Namespace},
			{"get", "configmaps/vcenter-ca", devenv.Namespace},
			{"patch", "providers.banlieue.io/status", devenv.Namespace},
			{"patch", "providers.banlieue.io/finalizers", devenv.Namespace},
			{"patch", "vmimages.banlieue.io/status", ""},
			{"patch", "vspheremachines.infrastructure.banlieue.io/status", tenant},
		},
	}
	var answered count.Ops
	wrong := 0
	var grid strings.Builder
	for _, user := range []string{devenv.BanlieueUser, devenv.ControllerUser, devenv.OperatorUser, devenv.ProviderUser, libvirtUser, proxmoxUser} {
		saNamespace := strings.Split(user, ":")[2]
		yes := map[canI]bool{}
		for _, q := range granted[user] {
			yes[q] = true
		}
		for _, q := range questions {
			args := append(append([]string{"auth", "can-i"}, q.args()...), "--as="+user,
				"--as-group=system:serviceaccounts", "--as-group=system:serviceaccounts:"+saNamespace, "--as-group=system:authenticated")
			if q.namespace == "" {
				args = append(args, "--all-namespaces")
			} else {
				args = append(args, "-n", q.namespace)
			}
			out, _, _ := kubectl(t, args...)
			got := strings.TrimSpace(out)
			// An answer is kubectl's yes or no; anything else (an error
			// reaching the server) is not counted, and fails below.
			if got == "yes" || got == "no" {
				answered.Answered(user + " " + q.String())
			}
			want := "no"
			if yes[q] {
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
