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

// Package grants is the least-privilege matrix of the ServiceAccounts
// banlieue ships (API server, controller, operator, vSphere, libvirt and
// Proxmox VE providers): the questions every identity is asked about
// Secrets, ConfigMaps and the writes that matter, and the yeses each is
// granted on purpose; every other answer must be no. test/reliability asks
// it through kubectl auth can-i, impersonating each identity; the real
// node's tests ask it with each pod's own projected token.
package grants

import (
	"context"
	"fmt"
	"strings"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"

	"github.com/firestoned/banlieue/pkg/devenv"
)

// Question is one question put to the authorizer. Resource is
// RESOURCE[.GROUP][/NAME][/SUBRESOURCE] as kubectl auth can-i reads it,
// with a "/status", "/finalizers" or "/token" suffix naming the
// subresource; Namespace "" is cluster-wide.
type Question struct{ Verb, Resource, Namespace string }

func (q Question) String() string {
	if q.Namespace == "" {
		return q.Verb + " " + q.Resource + " (cluster-wide)"
	}
	return q.Verb + " " + q.Resource + " -n " + q.Namespace
}

var subresources = []string{"status", "finalizers", "token"}

// split is the question's resource, name and subresource: a "/status",
// "/finalizers" or "/token" suffix names the subresource; the resource
// keeps its ".GROUP".
func (q Question) split() (resource, name, subresource string) {
	rest := q.Resource
	for _, sub := range subresources {
		if r, ok := strings.CutSuffix(rest, "/"+sub); ok {
			rest, subresource = r, sub
			break
		}
	}
	resource, name, _ = strings.Cut(rest, "/")
	return resource, name, subresource
}

// KubectlArgs are kubectl auth can-i's verb and resource arguments:
// the subresource is --subresource (kubectl reads RESOURCE/NAME
// otherwise).
func (q Question) KubectlArgs() []string {
	resource, name, sub := q.split()
	if name != "" {
		resource += "/" + name
	}
	if sub == "" {
		return []string{q.Verb, resource}
	}
	return []string{q.Verb, resource, "--subresource=" + sub}
}

// Attributes is the question as a SelfSubjectAccessReview asks it.
func (q Question) Attributes() authorizationv1.ResourceAttributes {
	resource, name, sub := q.split()
	a := authorizationv1.ResourceAttributes{Verb: q.Verb, Namespace: q.Namespace, Name: name, Subresource: sub}
	a.Resource, a.Group, _ = strings.Cut(resource, ".")
	return a
}

// Resolved is the question as kubectl auth can-i asks it: a resource
// named without its group (clusterroles) is looked up in mapper (the
// cluster's discovery), as kubectl does.
func (q Question) Resolved(mapper meta.RESTMapper) (authorizationv1.ResourceAttributes, error) {
	a := q.Attributes()
	gvr, err := mapper.ResourceFor(schema.GroupVersionResource{Group: a.Group, Resource: a.Resource})
	if err != nil {
		return a, fmt.Errorf("%s: %w", q, err)
	}
	a.Group = gvr.Group
	return a, nil
}

// Identities are the shipped ServiceAccounts, in the matrix's order.
func Identities() []string {
	return []string{devenv.BanlieueUser, devenv.ControllerUser, devenv.OperatorUser, devenv.ProviderUser,
		devenv.ProviderUserOf("libvirt"), devenv.ProviderUserOf("proxmox")}
}

// Granted says whether user is granted q on purpose (the answer must be
// yes), given the matrix's tenant namespace.
func Granted(tenant, user string, q Question) bool {
	for _, g := range granted(tenant)[user] {
		if g == q {
			return true
		}
	}
	return false
}

// Questions are what every identity is asked; tenant is a namespace of
// VMs that has not consented to anything.
func Questions(tenant string) []Question {
	return []Question{
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
}

// granted are the yeses granted on purpose, per identity.
func granted(tenant string) map[string][]Question {
	libvirtUser := devenv.ProviderUserOf("libvirt")
	proxmoxUser := devenv.ProviderUserOf("proxmox")
	return map[string][]Question{
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
}

// Ask puts every question to ask as user, and returns how many were
// answered and each answer that is not what user is granted (an error
// asking counts as unanswered, and as wrong).
func Ask(tenant, user string, ask func(Question) (bool, error)) (answered int, wrong []string) {
	for _, q := range Questions(tenant) {
		got, err := ask(q)
		if err != nil {
			wrong = append(wrong, q.String()+": "+err.Error())
			continue
		}
		answered++
		if want := Granted(tenant, user, q); got != want {
			wrong = append(wrong, fmt.Sprintf("%s: %t, want %t", q, got, want))
		}
	}
	return answered, wrong
}

// TenantNamespace is the matrix's tenant namespace where a test asks it
// without making one (a review needs no namespace to exist).
const TenantNamespace = "grants-tenant"

// CheckPod asks every question with the own projected token of a pod of
// component (its app.kubernetes.io/component label) in namespace, which
// must be user's, through env's kube-apiserver, and fails t on each answer
// that is not what user is granted.
func CheckPod(t testing.TB, ctx context.Context, env *devenv.Env, namespace, component, user string) {
	t.Helper()
	cs, err := kubernetes.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	pods, err := cs.CoreV1().Pods(namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/component=" + component})
	if err != nil || len(pods.Items) == 0 {
		t.Fatalf("%s pods in %s: %v (%d)", component, namespace, err, len(pods.Items))
	}
	pod := &pods.Items[0]
	token, err := env.PodToken(pod)
	if err != nil {
		t.Fatal(err)
	}
	as, err := env.TokenClient(token)
	if err != nil {
		t.Fatal(err)
	}
	if who, err := devenv.WhoAmI(ctx, as); err != nil || who != user {
		t.Fatalf("pod %s's token is %q (%v), want %s", pod.Name, who, err, user)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	answered, wrong := Ask(TenantNamespace, user, func(q Question) (bool, error) {
		attrs, err := q.Resolved(mapper)
		if err != nil {
			return false, err
		}
		return devenv.MayDo(ctx, as, attrs)
	})
	for _, w := range wrong {
		t.Errorf("with pod %s's token (%s): %s", pod.Name, user, w)
	}
	t.Logf("pod %s's token (%s): %d of %d questions answered, %d answers not as granted", pod.Name, user, answered, len(Questions(TenantNamespace)), len(wrong))
}
