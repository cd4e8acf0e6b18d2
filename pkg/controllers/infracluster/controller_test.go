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

package infracluster

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func TestAggregate(t *testing.T) {
	provider := func(ns, name string, ready bool, fds ...v1alpha1.FailureDomain) v1alpha1.Provider {
		status := metav1.ConditionFalse
		if ready {
			status = metav1.ConditionTrue
		}
		return v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Status: v1alpha1.ProviderStatus{Conditions: []metav1.Condition{{Type: "Ready", Status: status}}, FailureDomains: fds}}
	}
	fd := func(name string, labels map[string]string) v1alpha1.FailureDomain {
		return v1alpha1.FailureDomain{Name: name, Datacenter: "DC0", Cluster: name, Labels: labels}
	}
	fds, dups := aggregate([]v1alpha1.Provider{
		provider("banlieue-system", "shared", true, fd("a", nil), fd("b", map[string]string{"controlPlane": "false"})),
		provider("team", "own", true, fd("a", nil), fd("c", nil)),
		provider("team", "down", false, fd("d", nil)),
	}, "team")
	var got []string
	for _, f := range fds {
		got = append(got, fmt.Sprintf("%s@%s cp=%v", f.Name, f.Attributes["provider"], ptr.Deref(f.ControlPlane, true)))
	}
	// Sorted by how the namespace names them: "banlieue-system/shared" < "own".
	want := []string{"a@banlieue-system/shared cp=true", "b@banlieue-system/shared cp=false", "c@own cp=true"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("failure domains %v, want %v", got, want)
	}
	if len(dups) != 1 || !strings.Contains(dups[0], "banlieue-system/shared and own") {
		t.Errorf("duplicates %v, want a reports naming both Providers", dups)
	}
}

// TestAttributes: each backend's location fields, and only those it has.
func TestAttributes(t *testing.T) {
	for _, tc := range []struct {
		name string
		fd   v1alpha1.FailureDomain
		want string
	}{
		{"vSphere", v1alpha1.FailureDomain{Name: "a", Datacenter: "DC0", Cluster: "C0"}, "map[cluster:C0 datacenter:DC0 provider:p]"},
		{"libvirt or Proxmox VE", v1alpha1.FailureDomain{Name: "a", Host: "pve1"}, "map[host:pve1 provider:p]"},
		{"no location", v1alpha1.FailureDomain{Name: "a"}, "map[provider:p]"},
	} {
		if got := fmt.Sprint(attributes("p", tc.fd)); got != tc.want {
			t.Errorf("%s: attributes %s, want %s", tc.name, got, tc.want)
		}
	}
}
