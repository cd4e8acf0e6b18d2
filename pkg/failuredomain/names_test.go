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
package failuredomain

import (
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func TestAutoName(t *testing.T) {
	long := strings.Repeat("Compute-Cluster-", 6)
	cases := []struct {
		provider, dc, cluster string
		want                  string
	}{
		{"prod-vsphere", "DC0", "DC0_C0", "prod-vsphere-dc0-dc0-c0"},
		{"prod-vsphere", "DC-East", "Compute-Cluster-A", "prod-vsphere-dc-east-compute-cluster-a"},
		{"p", "Datacenter (Paris)", "Cluster.1", "p-datacenter-paris-cluster-1"},
		{"p", "ÉTÉ", "--x--", "p-t-x"},
	}
	for _, tc := range cases {
		if got := AutoName(tc.provider, Location{Datacenter: tc.dc, Cluster: tc.cluster}); got != tc.want {
			t.Errorf("AutoName(%s, %s, %s) = %q, want %q", tc.provider, tc.dc, tc.cluster, got, tc.want)
		}
	}
	a := AutoName("prod-vsphere", Location{Datacenter: "DC-East", Cluster: long + "A"})
	b := AutoName("prod-vsphere", Location{Datacenter: "DC-East", Cluster: long + "B"})
	for _, n := range []string{a, b} {
		if len(n) > MaxLength || len(validation.IsDNS1123Label(n)) > 0 {
			t.Errorf("%q is not a DNS-1123 label: %v", n, validation.IsDNS1123Label(n))
		}
		if !strings.HasPrefix(n, "prod-vsphere-dc-east-compute-cluster-") {
			t.Errorf("%q lost its readable prefix", n)
		}
	}
	if a == b {
		t.Errorf("long names collide: %q", a)
	}
	if AutoName("prod-vsphere", Location{Datacenter: "DC-East", Cluster: long + "A"}) != a {
		t.Error("not deterministic")
	}
	if n := AutoName("", Location{Datacenter: "!!!", Cluster: "***"}); len(validation.IsDNS1123Label(n)) > 0 {
		t.Errorf("empty sanitised name gave %q", n)
	}
}

func TestResolve(t *testing.T) {
	pairs := []Location{{Datacenter: "DC-East", Cluster: "Compute-Cluster-A"}, {Datacenter: "DC-East", Cluster: "Compute-Cluster-B"}, {Datacenter: "DC-West", Cluster: "C1"}}
	fds, err := Resolve("prod-vsphere", pairs, []v1alpha1.FailureDomainNameOverride{{Datacenter: "DC-East", Cluster: "Compute-Cluster-A", Name: "cluster-01",
		Labels: map[string]string{"controlPlane": "false"}}})
	if err != nil {
		t.Fatal(err)
	}
	want0 := map[string]string{"controlPlane": "false", "name": "cluster-01", "datacenter": "DC-East", "cluster": "Compute-Cluster-A"}
	want1 := map[string]string{"name": "prod-vsphere-dc-east-compute-cluster-b", "datacenter": "DC-East", "cluster": "Compute-Cluster-B"}
	if !maps.Equal(fds[0].Labels, want0) || !maps.Equal(fds[1].Labels, want1) {
		t.Errorf("labels: %v and %v, want %v and %v", fds[0].Labels, fds[1].Labels, want0, want1)
	}
	var names []string
	for _, fd := range fds {
		names = append(names, fd.Name)
		if fd.Labels["name"] != fd.Name {
			t.Errorf("%s labels %v", fd.Name, fd.Labels)
		}
	}
	if got := strings.Join(names, ","); got != "cluster-01,prod-vsphere-dc-east-compute-cluster-b,prod-vsphere-dc-west-c1" {
		t.Errorf("names %s", got)
	}
	if fds[0].Datacenter != "DC-East" || fds[0].Cluster != "Compute-Cluster-A" {
		t.Errorf("override attached to the wrong pair: %+v", fds[0])
	}

	// An override that equals another pair's computed name collides.
	_, err = Resolve("prod-vsphere", pairs, []v1alpha1.FailureDomainNameOverride{{Datacenter: "DC-West", Cluster: "C1", Name: "prod-vsphere-dc-east-compute-cluster-b"}})
	var collision *CollisionError
	if !errors.As(err, &collision) || collision.Name != "prod-vsphere-dc-east-compute-cluster-b" || len(collision.Locations) != 2 {
		t.Errorf("err = %v, want a collision on prod-vsphere-dc-east-compute-cluster-b", err)
	}
	// Two pairs that sanitise alike collide too.
	_, err = Resolve("p", []Location{{Datacenter: "dc", Cluster: "a_b"}, {Datacenter: "dc", Cluster: "a.b"}}, nil)
	if !errors.As(err, &collision) {
		t.Errorf("err = %v, want a collision", err)
	}
}

// A libvirt Provider's failure domains are its hosts.
func TestResolveHosts(t *testing.T) {
	hosts := []Location{{Host: "kvm-01.lab"}, {Host: "localhost"}}
	fds, err := Resolve("lab", hosts, []v1alpha1.FailureDomainNameOverride{{Host: "localhost", Name: "desk"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(fds) != 2 || fds[0].Name != "desk" || fds[0].Host != "localhost" || fds[1].Name != "lab-kvm-01-lab" || fds[1].Host != "kvm-01.lab" {
		t.Errorf("failure domains %+v", fds)
	}
	_, err = Resolve("lab", []Location{{Host: "a.b"}, {Host: "a-b"}}, nil)
	var collision *CollisionError
	if !errors.As(err, &collision) || !strings.Contains(err.Error(), "a.b and a-b") {
		t.Errorf("err = %v, want a collision naming both hosts", err)
	}
}

// A location part that is no valid label value is published by name only.
func TestLocationLabels(t *testing.T) {
	for _, tc := range []struct {
		in   Location
		want map[string]string
	}{
		{Location{Datacenter: "DC0", Cluster: "DC0_C1"}, map[string]string{"datacenter": "DC0", "cluster": "DC0_C1"}},
		{Location{Host: "kvm-01.lab"}, map[string]string{"host": "kvm-01.lab"}},
		{Location{Datacenter: "DC East", Cluster: "C1"}, map[string]string{"cluster": "C1"}},
		{Location{Host: strings.Repeat("h", 64)}, map[string]string{}},
	} {
		if got := tc.in.Labels(); !maps.Equal(got, tc.want) {
			t.Errorf("%v: labels %v, want %v", tc.in, got, tc.want)
		}
	}
}

func TestUnusedOverrides(t *testing.T) {
	published := []v1alpha1.FailureDomain{{Name: "a", Datacenter: "DC0", Cluster: "C1"}, {Name: "h", Host: "kvm-01"}}
	overrides := []v1alpha1.FailureDomainNameOverride{
		{Datacenter: "DC0", Cluster: "C1", Name: "a"},
		{Datacenter: "DC0", Cluster: "C9", Name: "typo"},
		{Host: "kvm-01", Name: "h"},
		{Host: "kvm-02", Name: "gone"},
		{Datacenter: "DC0", Name: "dc-only"},
	}
	if got := UnusedOverrides(published, overrides); !slices.Equal(got, []int{1, 3, 4}) {
		t.Errorf("UnusedOverrides = %v, want [1 3 4]", got)
	}
	if got := UnusedOverrides(published, nil); len(got) != 0 {
		t.Errorf("no overrides: %v", got)
	}
}
