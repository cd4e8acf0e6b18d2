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

package artifacts

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	crdvalidation "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/validation"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"sigs.k8s.io/yaml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

// crdSchema is the structural schema of the shipped CRD file's only version.
func crdSchema(t *testing.T, file string) *structuralschema.Structural {
	t.Helper()
	b, err := CRDs.ReadFile("crds/" + file)
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.Unmarshal(b, &crd); err != nil {
		t.Fatal(err)
	}
	// As kube-apiserver would take it: its CEL rules compile, within
	// their cost budget.
	var whole apiextensions.CustomResourceDefinition
	if err := apiextensionsv1.Convert_v1_CustomResourceDefinition_To_apiextensions_CustomResourceDefinition(&crd, &whole, nil); err != nil {
		t.Fatal(err)
	}
	whole.Status.StoredVersions = []string{whole.Spec.Versions[0].Name} // as once created
	if errs := crdvalidation.ValidateCustomResourceDefinition(context.Background(), &whole); len(errs) > 0 {
		t.Fatalf("%s: %v", file, errs)
	}
	var internal apiextensions.JSONSchemaProps
	if err := apiextensionsv1.Convert_v1_JSONSchemaProps_To_apiextensions_JSONSchemaProps(crd.Spec.Versions[0].Schema.OpenAPIV3Schema, &internal, nil); err != nil {
		t.Fatal(err)
	}
	s, err := structuralschema.NewStructural(&internal)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// celErrors are the CEL rules' errors on updating old to new, as
// kube-apiserver would run them.
func celErrors(t *testing.T, s *structuralschema.Structural, old, new runtime.Object) field.ErrorList {
	t.Helper()
	o, err := runtime.DefaultUnstructuredConverter.ToUnstructured(old)
	if err != nil {
		t.Fatal(err)
	}
	n, err := runtime.DefaultUnstructuredConverter.ToUnstructured(new)
	if err != nil {
		t.Fatal(err)
	}
	errs, _ := cel.NewValidator(s, true, celconfig.PerCallLimit).Validate(context.Background(), nil, s, n, o, celconfig.RuntimeCELCostBudget)
	return errs
}

// TestLocationImmutableOnceBuilt (issue 31): once a machine's VM exists
// (spec.providerID set), the fields saying where it is cannot change, nor
// providerID go: its deletion looks for the VM where the spec says, and an
// edited location let the finalizer go with the VM still running. Before
// that, and for every other field, an update passes.
func TestLocationImmutableOnceBuilt(t *testing.T) {
	built := func(providerID string) *infrav1.VSphereMachine {
		return &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.VSphereMachineSpec{Template: "ubuntu", Datacenter: "DC0", Cluster: "C0", ResourcePool: "team-a",
				CommonMachineSpec: infrav1.CommonMachineSpec{ProviderID: providerID, FailureDomain: "fd-dc0-c0", CPUs: 1, MemoryMiB: 512}}}
	}
	s := crdSchema(t, "infrastructure.banlieue.io_vspheremachines.yaml")
	for _, tc := range []struct {
		name       string
		providerID string
		mutate     func(*infrav1.VSphereMachine)
		refused    string
	}{
		{"datacenter before the VM exists", "", func(m *infrav1.VSphereMachine) { m.Spec.Datacenter = "DC1" }, ""},
		{"failureDomain before the VM exists", "", func(m *infrav1.VSphereMachine) { m.Spec.FailureDomain = "" }, ""},
		{"cpus and memory of a built VM", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.CPUs, m.Spec.MemoryMiB = 4, 8192 }, ""},
		{"datacenter", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.Datacenter = "DC1" }, "immutable"},
		{"cluster", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.Cluster = "C1" }, "immutable"},
		{"failureDomain", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.FailureDomain = "fd-dc1-c0" }, "immutable"},
		{"failureDomain removed", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.FailureDomain = "" }, "immutable"},
		{"resourcePool removed", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.ResourcePool = "" }, "immutable"},
		{"folder added", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.Folder = "other" }, "immutable"},
		{"providerID removed, then datacenter", "vsphere://42", func(m *infrav1.VSphereMachine) { m.Spec.ProviderID = "" }, "may not be removed"},
	} {
		old := built(tc.providerID)
		m := old.DeepCopy()
		tc.mutate(m)
		errs := celErrors(t, s, old, m)
		switch {
		case tc.refused == "" && len(errs) > 0:
			t.Errorf("%s: refused: %v", tc.name, errs)
		case tc.refused != "" && (len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), tc.refused)):
			t.Errorf("%s: %v, want a refusal saying %q", tc.name, errs, tc.refused)
		}
	}

	for file, obj := range map[string]func(fd, providerID string) runtime.Object{
		"infrastructure.banlieue.io_libvirtmachines.yaml": func(fd, providerID string) runtime.Object {
			return &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: infrav1.LibvirtMachineSpec{Image: "images/debian.qcow2",
				CommonMachineSpec: infrav1.CommonMachineSpec{ProviderID: providerID, FailureDomain: fd, CPUs: 1, MemoryMiB: 512}}}
		},
		"infrastructure.banlieue.io_proxmoxmachines.yaml": func(fd, providerID string) runtime.Object {
			return &infrav1.ProxmoxMachine{ObjectMeta: metav1.ObjectMeta{Name: "m"}, Spec: infrav1.ProxmoxMachineSpec{Template: "debian",
				CommonMachineSpec: infrav1.CommonMachineSpec{ProviderID: providerID, FailureDomain: fd, CPUs: 1, MemoryMiB: 512}}}
		},
	} {
		s := crdSchema(t, file)
		if errs := celErrors(t, s, obj("host-a", ""), obj("host-b", "")); len(errs) > 0 {
			t.Errorf("%s: failureDomain before the VM exists: %v", file, errs)
		}
		if errs := celErrors(t, s, obj("host-a", "x://1"), obj("host-a", "x://1")); len(errs) > 0 {
			t.Errorf("%s: unchanged: %v", file, errs)
		}
		for _, fd := range []string{"host-b", ""} {
			if errs := celErrors(t, s, obj("host-a", "x://1"), obj(fd, "x://1")); len(errs) == 0 || !strings.Contains(errs.ToAggregate().Error(), "immutable") {
				t.Errorf("%s: failureDomain host-a → %q once built: %v", file, fd, errs)
			}
		}
		if errs := celErrors(t, s, obj("host-a", "x://1"), obj("host-a", "")); len(errs) == 0 {
			t.Errorf("%s: providerID removed: admitted", file)
		}
	}
}

// TestSizesBounded: every machine kind bounds its memory and disk sizes
// (issue 31: a tenant's machine asked for any size).
func TestSizesBounded(t *testing.T) {
	for _, file := range []string{"infrastructure.banlieue.io_vspheremachines.yaml", "infrastructure.banlieue.io_libvirtmachines.yaml", "infrastructure.banlieue.io_proxmoxmachines.yaml"} {
		spec := crdSchema(t, file).Properties["spec"]
		for what, s := range map[string]structuralschema.Structural{
			"memoryMiB": spec.Properties["memoryMiB"], "disks[].sizeGiB": spec.Properties["disks"].Items.Properties["sizeGiB"], "cpus": spec.Properties["cpus"],
		} {
			if s.ValueValidation == nil || s.ValueValidation.Maximum == nil {
				t.Errorf("%s: %s has no maximum", file, what)
			}
		}
	}
}
