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

package apply

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestOrdered(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		// The seed examples in file-name order.
		{"Namespace/ns Provider/p Secret/creds VirtualMachine/a VirtualMachine/b VMClass/c VMImage/i Secret/cc",
			"Namespace/ns Secret/creds Secret/cc Provider/p VMClass/c VMImage/i VirtualMachine/a VirtualMachine/b"},
		{"Deployment/d VirtualMachine/v Role/r ProviderClass/pc", "Role/r ProviderClass/pc Deployment/d VirtualMachine/v"},
		{"", ""},
	} {
		var objs []*unstructured.Unstructured
		for _, kn := range strings.Fields(tc.in) {
			kind, name, _ := strings.Cut(kn, "/")
			o := &unstructured.Unstructured{}
			o.SetKind(kind)
			o.SetName(name)
			objs = append(objs, o)
		}
		var got []string
		for _, o := range Ordered(objs) {
			got = append(got, o.GetKind()+"/"+o.GetName())
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("Ordered(%s) = %s, want %s", tc.in, strings.Join(got, " "), tc.want)
		}
	}
}
