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
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// Limits are the bounds a backend's machine CRD puts on what the core
// writes into its spec. kube-apiserver enforces them when the machine is
// created, after scheduling; the scheduler checks them first (through
// Registry.Admit), so a VM the CRD would refuse is never placed. Read from
// the CRD itself (LimitsFromCRD), they cannot drift from it. Zero: no
// bound.
type Limits struct {
	CPUs       int64
	MemoryMiB  int64
	Disks      int64
	DiskGiB    int64
	Interfaces int64
}

// Admit refuses the first value of resolved beyond a limit, by the path of
// the resolved field.
func (l Limits) Admit(resolved *v1alpha1.ResolvedVirtualMachine) *field.Error {
	s, p := resolved.Spec, field.NewPath("spec")
	if err := atMost(p.Child("cpus"), int64(s.CPUs.Value), l.CPUs); err != nil {
		return err
	}
	if err := atMost(p.Child("memoryMiB"), s.MemoryMiB.Value, l.MemoryMiB); err != nil {
		return err
	}
	if l.Disks > 0 && int64(len(s.Disks)) > l.Disks {
		return field.TooMany(p.Child("disks"), len(s.Disks), int(l.Disks))
	}
	for i, d := range s.Disks {
		if err := atMost(p.Child("disks").Index(i).Child("sizeGiB"), d.SizeGiB.Value, l.DiskGiB); err != nil {
			return err
		}
	}
	if l.Interfaces > 0 && int64(len(s.Interfaces)) > l.Interfaces {
		return field.TooMany(p.Child("interfaces"), len(s.Interfaces), int(l.Interfaces))
	}
	return nil
}

func atMost(p *field.Path, v, limit int64) *field.Error {
	if limit > 0 && v > limit {
		return field.Invalid(p, v, fmt.Sprintf("must be at most %d on this backend", limit))
	}
	return nil
}

// LimitsFromCRD reads the limits out of a machine CRD (YAML): the
// maxima of spec.cpus, spec.memoryMiB and each disk's sizeGiB, and the
// maximum counts of spec.disks and spec.network, in the served version.
func LimitsFromCRD(doc []byte) (Limits, error) {
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(doc, &crd); err != nil {
		return Limits{}, fmt.Errorf("reading a CRD: %w", err)
	}
	for _, v := range crd.Spec.Versions {
		if !v.Served || v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			continue
		}
		spec := v.Schema.OpenAPIV3Schema.Properties["spec"]
		disks, network := spec.Properties["disks"], spec.Properties["network"]
		l := Limits{
			CPUs:       maximum(spec.Properties["cpus"]),
			MemoryMiB:  maximum(spec.Properties["memoryMiB"]),
			Disks:      ptrOr(disks.MaxItems),
			Interfaces: ptrOr(network.MaxItems),
		}
		if disks.Items != nil && disks.Items.Schema != nil {
			l.DiskGiB = maximum(disks.Items.Schema.Properties["sizeGiB"])
		}
		return l, nil
	}
	return Limits{}, fmt.Errorf("CRD %s serves no version with a schema", crd.Name)
}

func maximum(s apiextensionsv1.JSONSchemaProps) int64 {
	if s.Maximum == nil {
		return 0
	}
	return int64(*s.Maximum)
}

func ptrOr(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}
