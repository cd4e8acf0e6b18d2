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
// ProxmoxMachine

// ProxmoxMachineSpec is everything the Proxmox VE provider needs to build
// and run one VM: a full clone of a template on the failure domain's node.
// banlieue's controller fills it from a VirtualMachine's resolved class and
// its placement; Cluster API fills it from a ProxmoxMachineTemplate.
// +kubebuilder:validation:XValidation:rule="!has(self.tpmEnabled) || !self.tpmEnabled || (has(self.firmware) && self.firmware != 'bios')",message="tpmEnabled requires firmware efi or efi-secure"
// +kubebuilder:validation:XValidation:rule="!(has(self.userDataSecretRef) && has(self.userDataConfigMapRef))",message="userDataSecretRef and userDataConfigMapRef are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || has(self.providerID)",message="providerID may not be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || size(oldSelf.providerID) == 0 || has(self.failureDomain) == has(oldSelf.failureDomain) && (!has(self.failureDomain) || self.failureDomain == oldSelf.failureDomain)",message="failureDomain is immutable once the VM exists (providerID set): its deletion looks for it there; make a new machine to move it"
type ProxmoxMachineSpec struct {
	CommonMachineSpec `json:",inline"`

	// template is the template VM cloned: its name, or its VMID.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:Pattern=`^[^/\s]+$`
	Template string `json:"template"`

	// disks of the VM, the first being the boot disk (the template's,
	// grown to its size); the others are added on their storage.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=30
	Disks []ProxmoxDisk `json:"disks,omitempty"`

	// network interfaces of the VM, in device order (net0, net1, ...).
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Network []ProxmoxNetworkDevice `json:"network,omitempty"`
}

// ProxmoxDisk is one disk of a VM.
type ProxmoxDisk struct {
	// name of the disk, unique in the VM.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// sizeGiB is the disk size in GiB, at most 64 TiB.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB int64 `json:"sizeGiB"`
	// provisioning is thin (the storage allocates on write: lvmthin, zfs,
	// ceph, qcow2 on directories) or thick. Defaults to thin.
	// +optional
	// +kubebuilder:default=thin
	Provisioning DiskProvisioning `json:"provisioning,omitempty"`
	// storage is the Proxmox VE storage of the disk; the template's when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Storage string `json:"storage,omitempty"`
}

// ProxmoxNetworkDevice is one network interface of a VM, on a node's bridge.
// +kubebuilder:validation:XValidation:rule="!(has(self.dhcp4) && self.dhcp4 && has(self.static))",message="dhcp4 and static are mutually exclusive"
type ProxmoxNetworkDevice struct {
	// name of the interface in the guest (the VMClass interface name).
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=15
	Name string `json:"name"`
	// bridge is the node's bridge (vmbr0); the template's first
	// interface's when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	Bridge string `json:"bridge,omitempty"`
	// vlan tags the interface's traffic on the bridge.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4094
	VLAN int32 `json:"vlan,omitempty"`
	// dhcp4 gets the address from DHCP (the default when static is empty).
	// +optional
	DHCP4 bool `json:"dhcp4,omitempty"`
	// static configures a fixed address (delivered by cloud-init).
	// +optional
	Static *StaticIP `json:"static,omitempty"`
}

// ProxmoxMachineStatus is the observed state of a ProxmoxMachine, in the
// Cluster API v1beta2 InfraMachine shape.
type ProxmoxMachineStatus struct {
	CommonMachineStatus `json:",inline"`

	// node is the node the VM lives on.
	// +optional
	Node string `json:"node,omitempty"`
	// vmid is the VM's VMID, recorded before its clone starts, so that a
	// restarted provider finds its VM instead of cloning another.
	// +optional
	VMID int32 `json:"vmid,omitempty"`
	// macAddresses of the interfaces, in order.
	// +optional
	// +listType=atomic
	MACAddresses []string `json:"macAddresses,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=proxmoxmachines,scope=Namespaced,shortName=pxm,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster API cluster, when a Machine owns it"
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.powerState`
// +kubebuilder:printcolumn:name="Failure-Domain",type=string,JSONPath=`.spec.failureDomain`
// +kubebuilder:printcolumn:name="VMID",type=integer,JSONPath=`.status.vmid`,priority=1
// +kubebuilder:printcolumn:name="Node",type=string,JSONPath=`.status.node`,priority=1
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ProxmoxMachine is one Proxmox VE VM, in the shape of Cluster API's v1beta2
// InfraMachine contract: banlieue's controller creates one per
// VirtualMachine placed on a Proxmox Provider, and Cluster API Machines can
// point at one directly.
type ProxmoxMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the VM to build.
	Spec ProxmoxMachineSpec `json:"spec"`
	// status is what the provider observed.
	// +optional
	Status ProxmoxMachineStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ProxmoxMachineList is a list of ProxmoxMachines.
type ProxmoxMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxmoxMachine `json:"items"`
}

// ProxmoxMachineTemplateSpec holds the machine template.
type ProxmoxMachineTemplateSpec struct {
	// template is stamped into each ProxmoxMachine.
	Template ProxmoxMachineTemplateResource `json:"template"`
}

// ProxmoxMachineTemplateResource is the stamped ProxmoxMachine.
type ProxmoxMachineTemplateResource struct {
	// metadata to put on stamped-out objects.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// spec of the stamped-out ProxmoxMachines.
	Spec ProxmoxMachineSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=proxmoxmachinetemplates,scope=Namespaced,shortName=pxmt,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template.spec.template`
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.spec.template.spec.cpus`
// +kubebuilder:printcolumn:name="Memory-MiB",type=integer,JSONPath=`.spec.template.spec.memoryMiB`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ProxmoxMachineTemplate is Cluster API's InfraMachineTemplate for
// ProxmoxMachines: MachineSets and control planes stamp machines from it.
type ProxmoxMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the template.
	Spec ProxmoxMachineTemplateSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ProxmoxMachineTemplateList is a list of ProxmoxMachineTemplates.
type ProxmoxMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxmoxMachineTemplate `json:"items"`
}

// ---------------------------------------------------------------------------
// ProxmoxCluster

// ProxmoxClusterSpec selects the Proxmox VE Providers whose failure domains a
// Cluster API cluster spreads its machines across.
type ProxmoxClusterSpec struct {
	CommonClusterSpec `json:",inline"`
}

// ProxmoxClusterStatus is the observed state, in the Cluster API v1beta2
// InfraCluster shape.
type ProxmoxClusterStatus struct {
	CommonClusterStatus `json:",inline"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=proxmoxclusters,scope=Namespaced,shortName=pxc,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ProxmoxCluster is Cluster API's InfraCluster for banlieue's Proxmox VE
// machines: it advertises the failure domains of the Proxmox VE Providers it
// selects, so a cluster can span several nodes and Proxmox clusters.
type ProxmoxCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the Providers.
	// +optional
	Spec ProxmoxClusterSpec `json:"spec,omitempty"`
	// status reports the aggregated failure domains.
	// +optional
	Status ProxmoxClusterStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// ProxmoxClusterList is a list of ProxmoxClusters.
type ProxmoxClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ProxmoxCluster `json:"items"`
}
