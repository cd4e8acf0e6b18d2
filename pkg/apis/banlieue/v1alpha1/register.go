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
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupName is the API group of banlieue's user-facing resources.
const GroupName = "banlieue.io"

// SchemeGroupVersion is the group version used to register these objects.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

// Resource takes an unqualified resource and returns a group-qualified GroupResource.
func Resource(resource string) schema.GroupResource {
	return SchemeGroupVersion.WithResource(resource).GroupResource()
}

var (
	// localSchemeBuilder is extended by the generated conversion and defaulting code.
	localSchemeBuilder = &SchemeBuilder
	// SchemeBuilder collects the functions that add this version to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes, addDefaultingFuncs, addFieldLabelConversions)
	// AddToScheme adds this version to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion,
		&VirtualMachine{}, &VirtualMachineList{},
		&ResolvedVirtualMachine{}, &VirtualMachinePlacement{}, &VirtualMachineConsoleOptions{}, &VirtualMachineRestart{}, &VirtualMachineWebConsole{},
		&VirtualMachineSnapshot{}, &VirtualMachineSnapshotList{},
		&VirtualMachineRestore{}, &VirtualMachineRestoreList{},
		&VMClass{}, &VMClassList{},
		&VMImage{}, &VMImageList{},
		&Provider{}, &ProviderList{},
		&ProviderClass{}, &ProviderClassList{},
	)
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
