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
package v1alpha1

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
)

// Field selectors each kind accepts beyond metadata.name and
// metadata.namespace. The registry computes the same fields (GetAttrs); this
// list makes the conversion layer accept them.
var fieldSelectors = map[string][]string{
	"VirtualMachine":         {"spec.classRef.name", "spec.imageRef.name", "status.scheduled.provider", "spec.desiredPowerState"},
	"Provider":               {"spec.providerClassRef.name"},
	"VMClass":                nil,
	"VMImage":                nil,
	"VirtualMachineSnapshot": {"spec.vmName"},
	"VirtualMachineRestore":  {"spec.vmName"},
}

func addFieldLabelConversions(scheme *runtime.Scheme) error {
	for kind, extra := range fieldSelectors {
		allowed := map[string]bool{"metadata.name": true, "metadata.namespace": true}
		for _, f := range extra {
			allowed[f] = true
		}
		if err := scheme.AddFieldLabelConversionFunc(SchemeGroupVersion.WithKind(kind),
			func(label, value string) (string, string, error) {
				if allowed[label] {
					return label, value, nil
				}
				return "", "", fmt.Errorf("field label not supported for %s: %s", kind, label)
			}); err != nil {
			return err
		}
	}
	return nil
}
