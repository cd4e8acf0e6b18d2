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
package main

import (
	"encoding/json"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/kube-openapi/pkg/common"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/generated/openapi"
)

// BenchGroup serves the CRD twin of banlieue's VirtualMachine.
const BenchGroup = "bench.banlieue.io"

// virtualMachineCRD is VirtualMachine as a CRD of BenchGroup: the schema is
// banlieue's generated v1alpha1 OpenAPI with every reference inlined, so the
// CRD alternative validates, prunes and stores the same shape. Only what a
// structural schema forbids is changed: metadata is a plain object, and
// object or list defaults (which would not validate against their own
// required fields) are dropped.
func virtualMachineCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	defs := openapi.GetOpenAPIDefinitions(func(path string) spec.Ref { return spec.MustCreateRef(path) })
	root, err := inline(defs, v1alpha1.VirtualMachine{}.OpenAPIModelName(), 0)
	if err != nil {
		return nil, err
	}
	root.Properties["metadata"] = spec.Schema{SchemaProps: spec.SchemaProps{Type: []string{"object"}}}
	raw, err := json.Marshal(root)
	if err != nil {
		return nil, err
	}
	var props apiextensionsv1.JSONSchemaProps
	if err := json.Unmarshal(raw, &props); err != nil {
		return nil, fmt.Errorf("converting the OpenAPI schema: %w", err)
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "virtualmachines." + BenchGroup},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: BenchGroup,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "virtualmachines", Singular: "virtualmachine", Kind: "VirtualMachine", ListKind: "VirtualMachineList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
				Name: "v1alpha1", Served: true, Storage: true,
				Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &props},
				Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
			}},
		},
	}, nil
}

// inline returns the definition name with every $ref replaced by the
// definition it names.
func inline(defs map[string]common.OpenAPIDefinition, name string, depth int) (*spec.Schema, error) {
	def, ok := defs[name]
	if !ok {
		return nil, fmt.Errorf("no OpenAPI definition %s", name)
	}
	s := def.Schema
	if err := inlineSchema(defs, &s, depth); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return &s, nil
}

func inlineSchema(defs map[string]common.OpenAPIDefinition, s *spec.Schema, depth int) error {
	if depth > 32 {
		return fmt.Errorf("references nest too deep")
	}
	if ref := s.Ref.String(); ref != "" {
		target, err := inline(defs, ref, depth+1)
		if err != nil {
			return err
		}
		desc := s.Description
		*s = *target
		if desc != "" {
			s.Description = desc
		}
	}
	// A structural schema lists one type per node; allOf wrappers of a
	// single reference (how OpenAPI v3 adds a description) are flattened.
	if len(s.AllOf) == 1 && len(s.Type) == 0 {
		inner := s.AllOf[0]
		if err := inlineSchema(defs, &inner, depth+1); err != nil {
			return err
		}
		desc := s.Description
		*s = inner
		if desc != "" {
			s.Description = desc
		}
	}
	// Object and list defaults would not validate against their own
	// required fields; zero-value defaults ("" for enums) not against enums.
	switch d := s.Default.(type) {
	case map[string]interface{}, []interface{}:
		s.Default = nil
	case string:
		if d == "" {
			s.Default = nil
		}
	case float64:
		if d == 0 {
			s.Default = nil
		}
	case int, int32, int64:
		if fmt.Sprint(d) == "0" {
			s.Default = nil
		}
	case bool:
		if !d {
			s.Default = nil
		}
	}
	for k, p := range s.Properties {
		if err := inlineSchema(defs, &p, depth+1); err != nil {
			return err
		}
		s.Properties[k] = p
	}
	if s.Items != nil && s.Items.Schema != nil {
		if err := inlineSchema(defs, s.Items.Schema, depth+1); err != nil {
			return err
		}
	}
	if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
		if err := inlineSchema(defs, s.AdditionalProperties.Schema, depth+1); err != nil {
			return err
		}
	}
	return nil
}
