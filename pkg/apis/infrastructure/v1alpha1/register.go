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

// GroupName is the API group of banlieue's infrastructure kinds.
const GroupName = "infrastructure.banlieue.io"

// GroupVersion is the group version of these types.
var GroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha1"}

var (
	// SchemeBuilder collects the functions that add these types to a scheme.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds these types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(GroupVersion,
		&VSphereMachine{}, &VSphereMachineList{},
		&VSphereMachineTemplate{}, &VSphereMachineTemplateList{},
		&VSphereCluster{}, &VSphereClusterList{},
		&LibvirtMachine{}, &LibvirtMachineList{},
		&LibvirtMachineTemplate{}, &LibvirtMachineTemplateList{},
		&LibvirtCluster{}, &LibvirtClusterList{},
		&ProxmoxMachine{}, &ProxmoxMachineList{},
		&ProxmoxMachineTemplate{}, &ProxmoxMachineTemplateList{},
		&ProxmoxCluster{}, &ProxmoxClusterList{},
		&IPPool{}, &IPPoolList{},
		&IPAddressReservation{}, &IPAddressReservationList{},
	)
	metav1.AddToGroupVersion(scheme, GroupVersion)
	return nil
}
