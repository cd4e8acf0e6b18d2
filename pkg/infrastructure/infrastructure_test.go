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

package infrastructure

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

func noSpec(*v1alpha1.VirtualMachine, *v1alpha1.ResolvedVirtualMachine, *v1alpha1.Provider) (map[string]interface{}, error) {
	return map[string]interface{}{}, nil
}

func TestRegistry(t *testing.T) {
	a := Kind{ProviderClass: "a", GroupVersionKind: schema.GroupVersionKind{Group: "g", Version: "v", Kind: "AMachine"}, BuildSpec: noSpec}
	b := Kind{ProviderClass: "b", GroupVersionKind: schema.GroupVersionKind{Group: "g", Version: "v", Kind: "BMachine"}, BuildSpec: noSpec}
	r, err := NewRegistry(b, a)
	if err != nil {
		t.Fatal(err)
	}
	if k, ok := r.For("b"); !ok || k.GroupVersionKind.Kind != "BMachine" {
		t.Errorf("For(b) = %v %v", k.GroupVersionKind, ok)
	}
	if _, ok := r.For("c"); ok {
		t.Error("For(c) found a kind")
	}
	if ks := r.Kinds(); len(ks) != 2 || ks[0].ProviderClass != "a" || ks[1].ProviderClass != "b" {
		t.Errorf("Kinds() = %v, want a then b", ks)
	}
	if _, err := NewRegistry(a, a); err == nil {
		t.Error("a class registered twice was accepted")
	}
	if _, err := NewRegistry(Kind{ProviderClass: "x", GroupVersionKind: a.GroupVersionKind}); err == nil {
		t.Error("a kind without a spec builder was accepted")
	}
}

func TestRead(t *testing.T) {
	yes := true
	for _, tc := range []struct {
		name string
		obj  map[string]interface{}
		want Observed
	}{
		{"nothing reported", map[string]interface{}{}, Observed{}},
		{"the whole contract", map[string]interface{}{
			"spec": map[string]interface{}{"providerID": "x://1"},
			"status": map[string]interface{}{
				"initialization": map[string]interface{}{"provisioned": true},
				"powerState":     "PoweredOn",
				"addresses": []interface{}{
					map[string]interface{}{"type": "Hostname", "address": "db"},
					map[string]interface{}{"type": "InternalIP", "address": "192.0.2.1"},
					map[string]interface{}{"type": "InternalIP"}, // no address: skipped
				},
				"conditions": []interface{}{
					map[string]interface{}{"type": "Paused", "status": "False", "reason": "NotPaused"},
					map[string]interface{}{"type": "Ready", "status": "False", "reason": "UserDataForbidden", "message": "grant it"},
				},
			},
		}, Observed{ProviderID: "x://1", Provisioned: &yes, PowerState: "PoweredOn",
			Addresses: []v1alpha1.MachineAddress{{Type: "Hostname", Address: "db"}, {Type: "InternalIP", Address: "192.0.2.1"}},
			Ready:     &metav1.Condition{Type: "Ready", Status: "False", Reason: "UserDataForbidden", Message: "grant it"}}},
		{"wrong shapes read as absent", map[string]interface{}{
			"status": map[string]interface{}{"initialization": map[string]interface{}{"provisioned": "yes"}, "addresses": "none", "conditions": 3},
		}, Observed{}},
	} {
		if got := Read(&unstructured.Unstructured{Object: tc.obj}); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Read = %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

// Typed turns a typed spec into the JSON-like data written, and passes
// a builder's error on.
func TestTyped(t *testing.T) {
	type spec struct {
		CPUs  int32  `json:"cpus"`
		Image string `json:"image,omitempty"`
	}
	ok := Typed(func(*v1alpha1.VirtualMachine, *v1alpha1.ResolvedVirtualMachine, *v1alpha1.Provider) (spec, error) {
		return spec{CPUs: 2}, nil
	})
	got, err := ok(nil, nil, nil)
	if err != nil || fmt.Sprint(got) != "map[cpus:2]" {
		t.Errorf("%v, %v", got, err)
	}
	failing := Typed(func(*v1alpha1.VirtualMachine, *v1alpha1.ResolvedVirtualMachine, *v1alpha1.Provider) (spec, error) {
		return spec{}, errors.New("no source")
	})
	if _, err := failing(nil, nil, nil); err == nil || err.Error() != "no source" {
		t.Errorf("error %v", err)
	}
}

func TestInterfaces(t *testing.T) {
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "pve"}, Spec: v1alpha1.ProviderSpec{Capabilities: v1alpha1.ProviderCapabilities{
		NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr1", VLAN: 20}}}}}}
	r := &v1alpha1.ResolvedVirtualMachine{Spec: v1alpha1.ResolvedVirtualMachineSpec{Interfaces: []v1alpha1.ResolvedInterface{
		{Name: "eth0", NetworkClass: "prod", Static: &v1alpha1.StaticIPConfig{Address: "192.0.2.5", Prefix: ptr.To[int32](24)}},
		{Name: "eth1"},
	}}}
	got, err := Interfaces(r, p)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].Target.Bridge != "vmbr1" || got[0].Target.VLAN != 20 || got[0].Static == nil || got[0].Static.Address != "192.0.2.5" ||
		got[1].Target != (v1alpha1.NetworkTarget{}) || got[1].Static != nil {
		t.Errorf("Interfaces = %+v", got)
	}
	r.Spec.Interfaces[1].NetworkClass = "lab"
	if _, err := Interfaces(r, p); err == nil || !strings.Contains(err.Error(), `no network class "lab"`) {
		t.Errorf("an unoffered class: %v", err)
	}
}

// TestGuestOSAndArchitecture: what CommonSpec makes of an image's osFamily,
// osDistribution, osVersion and architecture.
func TestGuestOSAndArchitecture(t *testing.T) {
	for _, tc := range []struct {
		family, dist, version string
		want                  *infrav1.GuestOS
	}{
		{"", "", "", nil},
		{"linux", "ubuntu", "22.04", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "ubuntu", Version: "22.04"}},
		{" Linux ", "Ubuntu", " 24.04 ", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "ubuntu", Version: "24.04"}},
		{"WINDOWS", "windows-server", "2022", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyWindows, Distribution: "windows-server", Version: "2022"}},
		{"bsd", "freebsd", "14", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyOther, Distribution: "freebsd", Version: "14"}},
		{"", "debian", "12", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "debian", Version: "12"}},
		{"", "windows", "11", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyWindows, Distribution: "windows", Version: "11"}},
		{"", "haiku", "", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyOther, Distribution: "haiku"}},
		{"", "Rocky Linux", "9", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "rocky", Version: "9"}},
		{"linux", "RedHat", "9.4", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "rhel", Version: "9.4"}},
		{"", "Windows Server", "2022", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyWindows, Distribution: "windows-server", Version: "2022"}},
		{"", "", "1", &infrav1.GuestOS{Family: infrav1.GuestOSFamilyOther, Version: "1"}},
	} {
		vm := &v1alpha1.VirtualMachine{Status: v1alpha1.VirtualMachineStatus{Scheduled: &v1alpha1.ScheduledPlacement{FailureDomain: "fd"}}}
		r := &v1alpha1.ResolvedVirtualMachine{}
		r.Spec.Image = v1alpha1.ResolvedImage{OSFamily: tc.family, OSDistribution: tc.dist, OSVersion: tc.version, Architecture: "x86_64"}
		spec := CommonSpec(vm, r)
		if !reflect.DeepEqual(spec.GuestOS, tc.want) {
			t.Errorf("%q/%q/%q: guest OS %+v, want %+v", tc.family, tc.dist, tc.version, spec.GuestOS, tc.want)
		}
		if spec.Architecture != infrav1.ArchitectureAMD64 {
			t.Errorf("architecture %q, want amd64", spec.Architecture)
		}
	}
	for in, want := range map[string]infrav1.Architecture{"": "", "amd64": "amd64", "X86_64": "amd64", "aarch64": "arm64", "arm64": "arm64",
		"ppc64le": "ppc64le", "s390x": "s390x", "riscv64": "riscv64", "sparc": "", "i386": ""} {
		got, known := Architecture(in)
		if got != want || known != (want != "" || in == "") {
			t.Errorf("Architecture(%q) = %q, %v; want %q", in, got, known, want)
		}
	}
	r := &v1alpha1.ResolvedVirtualMachine{}
	amd64 := []infrav1.Architecture{infrav1.ArchitectureAMD64}
	for in, refused := range map[string]bool{"": false, "amd64": false, "x86_64": false, "arm64": true, "sparc": true} {
		r.Spec.Image.Architecture = in
		err := ImageArchitecture(r, amd64, "why")
		if (err != nil) != refused || err != nil && (err.Field != "spec.image.architecture" || !strings.Contains(err.Error(), "amd64 (why)")) {
			t.Errorf("ImageArchitecture(%q) = %v, refused want %v", in, err, refused)
		}
	}
}
