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

package grants

import (
	"errors"
	"reflect"
	"testing"

	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/firestoned/banlieue/pkg/devenv"
)

// TestAttributes: a question reads as kubectl reads it: group after the
// first dot, a name, a subresource suffix (with or without a name).
func TestAttributes(t *testing.T) {
	for q, want := range map[Question]authorizationv1.ResourceAttributes{
		{"list", "secrets", ""}:                {Verb: "list", Resource: "secrets"},
		{"get", "secrets/vsphere-creds", "ns"}: {Verb: "get", Resource: "secrets", Name: "vsphere-creds", Namespace: "ns"},
		{"patch", "providers.banlieue.io/status", "ns"}: {Verb: "patch", Group: "banlieue.io", Resource: "providers",
			Subresource: "status", Namespace: "ns"},
		{"create", "serviceaccounts/default/token", "ns"}: {Verb: "create", Resource: "serviceaccounts", Name: "default",
			Subresource: "token", Namespace: "ns"},
		{"delete", "clusterrolebindings/cluster-admin", ""}: {Verb: "delete", Group: "", Resource: "clusterrolebindings", Name: "cluster-admin"},
		{"create", "vspheremachines.infrastructure.banlieue.io", "t"}: {Verb: "create", Group: "infrastructure.banlieue.io",
			Resource: "vspheremachines", Namespace: "t"},
	} {
		if got := q.Attributes(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, want %+v", q, got, want)
		}
	}
}

// TestEveryGrantIsAsked: a yes granted on purpose that no question asks
// would never be checked.
func TestEveryGrantIsAsked(t *testing.T) {
	asked := map[Question]bool{}
	for _, q := range Questions("t") {
		asked[q] = true
	}
	for user, qs := range granted("t") {
		for _, q := range qs {
			if !asked[q] {
				t.Errorf("%s is granted %s, which no question asks", user, q)
			}
		}
	}
	if Granted("t", devenv.ControllerUser, Question{"list", "secrets", ""}) {
		t.Error("the controller is granted listing Secrets")
	}
}

// TestAsk: an authorizer that says yes to all is wrong on every question
// not granted, one that fails answers nothing, and the granted answers
// themselves are right.
func TestAsk(t *testing.T) {
	user := devenv.ControllerUser
	all := len(Questions("t"))
	yes := 0
	for _, q := range Questions("t") {
		if Granted("t", user, q) {
			yes++
		}
	}
	if n, wrong := Ask("t", user, func(Question) (bool, error) { return true, nil }); n != all || len(wrong) != all-yes {
		t.Errorf("always yes: %d answered, %d wrong; want %d and %d", n, len(wrong), all, all-yes)
	}
	if n, wrong := Ask("t", user, func(Question) (bool, error) { return false, errors.New("unreachable") }); n != 0 || len(wrong) != all {
		t.Errorf("failing: %d answered, %d wrong; want 0 and %d", n, len(wrong), all)
	}
	if n, wrong := Ask("t", user, func(q Question) (bool, error) { return Granted("t", user, q), nil }); n != all || len(wrong) != 0 {
		t.Errorf("as granted: %d answered, wrong %v", n, wrong)
	}
}

// TestResolved: a resource named without its group takes the group the
// cluster serves it in, as kubectl auth can-i reads it; one the cluster
// does not serve is an error, not a silent no.
func TestResolved(t *testing.T) {
	rbac := schema.GroupVersion{Group: "rbac.authorization.k8s.io", Version: "v1"}
	core := schema.GroupVersion{Version: "v1"}
	m := meta.NewDefaultRESTMapper([]schema.GroupVersion{core, rbac})
	m.Add(rbac.WithKind("ClusterRole"), meta.RESTScopeRoot)
	m.Add(core.WithKind("Secret"), meta.RESTScopeNamespace)
	for q, group := range map[Question]string{
		{"bind", "clusterroles/banlieue-provider-vsphere-workload", ""}: "rbac.authorization.k8s.io",
		{"get", "secrets/x", "ns"}:                                      "",
	} {
		a, err := q.Resolved(m)
		if err != nil || a.Group != group {
			t.Errorf("%s: group %q (%v), want %q", q, a.Group, err, group)
		}
	}
	if _, err := (Question{"get", "widgets", ""}).Resolved(m); err == nil {
		t.Error("a resource the cluster does not serve resolved")
	}
}

// TestKubectlArgs: a subresource becomes --subresource, with or without a
// name; a name stays RESOURCE/NAME.
func TestKubectlArgs(t *testing.T) {
	for q, want := range map[Question][]string{
		{"list", "secrets", ""}:                           {"list", "secrets"},
		{"get", "secrets/vsphere-creds", "ns"}:            {"get", "secrets/vsphere-creds"},
		{"patch", "providers.banlieue.io/status", "ns"}:   {"patch", "providers.banlieue.io", "--subresource=status"},
		{"create", "serviceaccounts/default/token", "ns"}: {"create", "serviceaccounts/default", "--subresource=token"},
	} {
		if got := q.KubectlArgs(); !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %v, want %v", q, got, want)
		}
	}
}
