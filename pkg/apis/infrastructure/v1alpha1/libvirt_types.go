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
)

// ---------------------------------------------------------------------------
// LibvirtMachine

// LibvirtMachineSpec is everything the libvirt provider needs to build and
// run one domain. banlieue's controller fills it from a VirtualMachine's
// resolved class and its placement; Cluster API fills it from a
// LibvirtMachineTemplate. The host is the failure domain's.
// +kubebuilder:validation:XValidation:rule="!has(self.tpmEnabled) || !self.tpmEnabled || (has(self.firmware) && self.firmware != 'bios')",message="tpmEnabled requires firmware efi or efi-secure"
// +kubebuilder:validation:XValidation:rule="!(has(self.userDataSecretRef) && has(self.userDataConfigMapRef))",message="userDataSecretRef and userDataConfigMapRef are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || has(self.providerID)",message="providerID may not be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || size(oldSelf.providerID) == 0 || has(self.failureDomain) == has(oldSelf.failureDomain) && (!has(self.failureDomain) || self.failureDomain == oldSelf.failureDomain)",message="failureDomain is immutable once the VM exists (providerID set): its deletion looks for it there; make a new machine to move it"
type LibvirtMachineSpec struct {
	CommonMachineSpec `json:",inline"`

	// image is the base image volume, POOL/VOLUME, the boot disk is a
	// copy-on-write overlay of.
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^[^/]+/[^/]+$`
	Image string `json:"image"`

	// installMode is how the image is used: immediate (an installed disk
	// image: the boot disk is its copy-on-write overlay) or deferred (an
	// installer medium: the image is attached as a CD-ROM and the boot disk
	// starts blank, booted from before the CD-ROM, so the guest installs
	// itself at first boot and boots the installed disk after). From the
	// VMImage's template.installMode. Defaults to immediate.
	// +optional
	// +kubebuilder:validation:Enum=immediate;deferred
	InstallMode string `json:"installMode,omitempty"`

	// disks of the domain, the first being the boot disk (the image's
	// overlay, grown to its size; blank when installMode is deferred).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Disks []LibvirtDisk `json:"disks,omitempty"`

	// network interfaces of the domain, in device order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Network []LibvirtNetworkDevice `json:"network,omitempty"`
}

// LibvirtDisk is one volume of a domain.
type LibvirtDisk struct {
	// name of the disk, unique in the VM.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// sizeGiB is the disk size in GiB, at most 64 TiB.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB int64 `json:"sizeGiB"`
	// provisioning is thin (sparse), thick or eagerZeroed (allocated in
	// full). Defaults to thin.
	// +optional
	// +kubebuilder:default=thin
	Provisioning DiskProvisioning `json:"provisioning,omitempty"`
	// pool is the storage pool of the volume; the image's pool when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Pool string `json:"pool,omitempty"`
}

// LibvirtNetworkDevice is one network interface of a domain: on a libvirt
// network or a host bridge.
// +kubebuilder:validation:XValidation:rule="!(has(self.network) && has(self.bridge))",message="at most one of network and bridge"
// +kubebuilder:validation:XValidation:rule="!(has(self.dhcp4) && self.dhcp4 && has(self.static))",message="dhcp4 and static are mutually exclusive"
type LibvirtNetworkDevice struct {
	// name of the interface in the guest (the VMClass interface name).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// network is a libvirt network. With neither network nor bridge the
	// interface is on libvirt's "default" network, which the Provider must
	// publish (as the target of one of its network classes) like any other.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Network string `json:"network,omitempty"`
	// bridge is a host bridge.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	Bridge string `json:"bridge,omitempty"`
	// dhcp4 gets the address from DHCP (the default when static is empty).
	// +optional
	DHCP4 bool `json:"dhcp4,omitempty"`
	// static configures a fixed address (delivered in the NoCloud seed).
	// +optional
	Static *StaticIP `json:"static,omitempty"`
}

// LibvirtMachineStatus is the observed state of a LibvirtMachine, in the
// Cluster API v1beta2 InfraMachine shape.
type LibvirtMachineStatus struct {
	CommonMachineStatus `json:",inline"`

	// domainUUID is the domain's UUID (what providerID is built from),
	// derived from the object's UID.
	// +optional
	DomainUUID string `json:"domainUUID,omitempty"`

	// macAddresses of the interfaces, in order, kept stable across restarts.
	// +optional
	// +listType=atomic
	MACAddresses []string `json:"macAddresses,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=libvirtmachines,scope=Namespaced,shortName=lvm,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster API cluster, when a Machine owns it"
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.powerState`
// +kubebuilder:printcolumn:name="Failure-Domain",type=string,JSONPath=`.spec.failureDomain`
// +kubebuilder:printcolumn:name="Domain",type=string,JSONPath=`.status.vmName`,priority=1,description="The domain's name in libvirt"
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.image`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LibvirtMachine is one libvirt domain, in the shape of Cluster API's
// v1beta2 InfraMachine contract: banlieue's controller creates one per
// VirtualMachine placed on a libvirt Provider, and Cluster API Machines
// can point at one directly.
type LibvirtMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the domain to build.
	Spec LibvirtMachineSpec `json:"spec"`
	// status is what the provider observed.
	// +optional
	Status LibvirtMachineStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// LibvirtMachineList is a list of LibvirtMachines.
type LibvirtMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LibvirtMachine `json:"items"`
}

// LibvirtMachineTemplateSpec holds the machine template.
type LibvirtMachineTemplateSpec struct {
	// template is stamped into each LibvirtMachine.
	Template LibvirtMachineTemplateResource `json:"template"`
}

// LibvirtMachineTemplateResource is the stamped LibvirtMachine.
type LibvirtMachineTemplateResource struct {
	// metadata to put on stamped-out objects.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// spec of the stamped-out LibvirtMachines.
	Spec LibvirtMachineSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=libvirtmachinetemplates,scope=Namespaced,shortName=lvmt,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Image",type=string,JSONPath=`.spec.template.spec.image`
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.spec.template.spec.cpus`
// +kubebuilder:printcolumn:name="Memory-MiB",type=integer,JSONPath=`.spec.template.spec.memoryMiB`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LibvirtMachineTemplate is Cluster API's InfraMachineTemplate for
// LibvirtMachines: MachineSets and control planes stamp machines from it.
type LibvirtMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	Spec LibvirtMachineTemplateSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// LibvirtMachineTemplateList is a list of LibvirtMachineTemplates.
type LibvirtMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LibvirtMachineTemplate `json:"items"`
}

// ---------------------------------------------------------------------------
// LibvirtCluster

// LibvirtClusterSpec selects the libvirt Providers whose failure domains a
// Cluster API cluster spreads its machines across.
type LibvirtClusterSpec struct {
	CommonClusterSpec `json:",inline"`
}

// LibvirtClusterStatus is the observed state, in the Cluster API v1beta2
// InfraCluster shape.
type LibvirtClusterStatus struct {
	CommonClusterStatus `json:",inline"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=libvirtclusters,scope=Namespaced,shortName=lvc,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// LibvirtCluster is Cluster API's InfraCluster for banlieue's libvirt
// machines: it advertises the failure domains of the libvirt Providers it
// selects, so a cluster can span several hosts.
type LibvirtCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the Providers.
	// +optional
	Spec LibvirtClusterSpec `json:"spec,omitempty"`
	// status reports the aggregated failure domains.
	// +optional
	Status LibvirtClusterStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// LibvirtClusterList is a list of LibvirtClusters.
type LibvirtClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []LibvirtCluster `json:"items"`
}
