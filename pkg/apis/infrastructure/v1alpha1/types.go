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

// PowerState is the power state of a vSphere VM.
// +kubebuilder:validation:Enum=PoweredOn;PoweredOff;Suspended
type PowerState string

const (
	PowerStatePoweredOn  PowerState = "PoweredOn"
	PowerStatePoweredOff PowerState = "PoweredOff"
	PowerStateSuspended  PowerState = "Suspended"
)

// PowerOffMode is how a VM is driven to PoweredOff.
// +kubebuilder:validation:Enum=Hard;Soft;TrySoft
type PowerOffMode string

const (
	// PowerOffModeHard cuts the power: the guest gets no say.
	PowerOffModeHard PowerOffMode = "Hard"
	// PowerOffModeSoft asks the guest to shut down (vSphere Tools, ACPI)
	// and waits for it, however long it takes.
	PowerOffModeSoft PowerOffMode = "Soft"
	// PowerOffModeTrySoft asks the guest, then cuts the power once the
	// grace period has passed since the request.
	PowerOffModeTrySoft PowerOffMode = "TrySoft"
)

// Firmware is the boot firmware of a vSphere VM.
// +kubebuilder:validation:Enum=bios;efi;efi-secure
type Firmware string

const (
	FirmwareBIOS      Firmware = "bios"
	FirmwareEFI       Firmware = "efi"
	FirmwareEFISecure Firmware = "efi-secure"
)

// DiskProvisioning is how a virtual disk's blocks are allocated.
// +kubebuilder:validation:Enum=thin;thick;eagerZeroed
type DiskProvisioning string

const (
	DiskProvisioningThin        DiskProvisioning = "thin"
	DiskProvisioningThick       DiskProvisioning = "thick"
	DiskProvisioningEagerZeroed DiskProvisioning = "eagerZeroed"
)

// ProviderAnnotation, set by banlieue's VirtualMachine controller, names the
// banlieue Provider (namespace/name) a VSphereMachine was scheduled on.
// Without it (Cluster API machines) the provider is found by failure domain.
const ProviderAnnotation = "banlieue.io/provider"

// Condition types and reasons of the infrastructure kinds.
const (
	// ReadyCondition is true when the VM exists and is powered as desired
	// (VSphereMachine; its addresses follow as the guest reports them), or
	// when the failure domains are known (the InfraClusters).
	ReadyCondition = "Ready"
)

// ---------------------------------------------------------------------------
// VSphereMachine

// CommonMachineSpec is what every banlieue infrastructure machine's spec
// has, whatever its backend: identity, failure domain, size, firmware,
// power and user data. Each kind embeds it, so the provider's generic
// machine reconciler reads them alike.
type CommonMachineSpec struct {
	// providerID is the VM's identity for Cluster API and Kubernetes nodes
	// (vsphere://<BIOS UUID>, libvirt://<domain UUID>, proxmox://<SMBIOS UUID>). Set by the provider
	// once the VM exists; it never changes after that.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="oldSelf == '' || self == oldSelf",message="providerID is immutable once set"
	ProviderID string `json:"providerID,omitempty"`

	// failureDomain is the banlieue failure domain (a Provider's
	// status.failureDomains[].name) the VM is placed in. Immutable once
	// the VM exists (providerID set), as every field saying where it is:
	// its deletion looks for it there.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FailureDomain string `json:"failureDomain,omitempty"`

	// hostName is the guest's host name (cloud-init local-hostname,
	// vSphere customization, Ignition): banlieue sets it to the
	// VirtualMachine's name, so a VM recreated elsewhere by a migration
	// (whose machine has another name) keeps it. Empty means the host
	// name is made from this object's name.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	HostName string `json:"hostName,omitempty"`

	// cpus is the number of virtual CPUs.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=768
	CPUs int32 `json:"cpus"`

	// memoryMiB is the memory in MiB, at most 24 TiB (vSphere 8's largest
	// VM).
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=25165824
	MemoryMiB int64 `json:"memoryMiB"`

	// firmware is bios, efi or efi-secure.
	// +optional
	Firmware Firmware `json:"firmware,omitempty"`

	// tpmEnabled attaches a virtual TPM (requires efi or efi-secure
	// firmware, and the Provider's feature vtpm).
	// +optional
	TPMEnabled bool `json:"tpmEnabled,omitempty"`

	// powerState is the power state to drive the VM to. Defaults to PoweredOn.
	// +optional
	// +kubebuilder:default=PoweredOn
	PowerState PowerState `json:"powerState,omitempty"`

	// powerOffMode is how PoweredOff is reached: Hard, Soft or TrySoft.
	// Empty means TrySoft, so a guest always gets the chance to shut down
	// cleanly and a hung one is still turned off.
	// +optional
	PowerOffMode PowerOffMode `json:"powerOffMode,omitempty"`

	// powerOffGraceSeconds is how long TrySoft waits after asking the
	// guest before it cuts the power; the provider's default (120 seconds
	// unless configured) when unset.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=3600
	PowerOffGraceSeconds *int32 `json:"powerOffGraceSeconds,omitempty"`

	// restartRequestID asks for one restart (a reset) of the running VM:
	// a new ID is a new restart; the provider acts on each ID once and
	// reports it in status.restart. banlieue's VirtualMachine controller
	// copies it from the VirtualMachine's status.restart.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	RestartRequestID string `json:"restartRequestID,omitempty"`

	// snapshots are the backend snapshots the VM is to have, each named
	// from its VirtualMachineSnapshot's UID: the provider takes those it
	// lacks and removes those it has (of banlieue's naming) that are not
	// listed. banlieue's snapshot controller writes them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Snapshots []MachineSnapshot `json:"snapshots,omitempty"`

	// restoreRequest asks for one revert to a listed snapshot: a new ID
	// is a new restore; the provider acts on each ID once and reports it
	// in status.restore. banlieue's snapshot controller writes it from a
	// VirtualMachineRestore.
	// +optional
	RestoreRequest *RestoreRequest `json:"restoreRequest,omitempty"`

	// userDataSecretRef names the Secret, in this namespace, holding the
	// first-boot payload (cloud-init), handed to the guest the backend's way
	// (guestinfo on vSphere, a NoCloud seed on libvirt). When a Cluster API
	// Machine owns this object, the
	// Machine's bootstrap data secret is used instead.
	// +optional
	UserDataSecretRef *SecretKeyReference `json:"userDataSecretRef,omitempty"`

	// userDataConfigMapRef names a ConfigMap key, in this namespace, holding a
	// first-boot payload that is not sensitive. At most one of
	// userDataSecretRef and userDataConfigMapRef is set.
	// +optional
	UserDataConfigMapRef *ConfigMapKeyReference `json:"userDataConfigMapRef,omitempty"`

	// userDataFormat is what the user data is, which decides how it reaches
	// the guest: cloud-config (cloud-init: vSphere guestinfo.userdata, a
	// libvirt NoCloud seed) or ignition (vSphere
	// guestinfo.ignition.config.data, QEMU fw_cfg opt/com.coreos/config).
	// Cluster API's bootstrap data secret says it in its "format" key, which
	// wins. Defaults to cloud-config.
	// +optional
	// +kubebuilder:validation:Enum=cloud-config;ignition
	UserDataFormat UserDataFormat `json:"userDataFormat,omitempty"`

	// cloudConfigs name Secrets, in the namespace of the Provider serving
	// this machine, whose key "cloud-config" holds a document the guest gets
	// before its user data (one MIME multipart user data, in this order).
	// They must be the cloudConfigs of a VMImage whose source is this
	// machine's image: the provider reads no other Secret of its namespace
	// for a machine (CloudConfigNotPublished otherwise). cloud-config only.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=253
	CloudConfigs []string `json:"cloudConfigs,omitempty"`

	// guestOS is the operating system the image holds, from its VMImage
	// (osFamily, osDistribution, osVersion), told to the backend the way it
	// takes it: vSphere's guestId, Proxmox VE's ostype, a libosinfo os id in
	// the libvirt domain's metadata. Set before the VM's first power-on; a
	// change reaches a vSphere or Proxmox VE VM at its next power-off.
	// Unset: the template's own is kept.
	// +optional
	GuestOS *GuestOS `json:"guestOS,omitempty"`

	// architecture is the CPU architecture the image is built for, from
	// its VMImage; the provider refuses one its backend does not run
	// (ArchitectureUnsupported: every backend runs amd64 only today).
	// Unset: the backend's own.
	// +optional
	Architecture Architecture `json:"architecture,omitempty"`
}

// GuestOS is the operating system of a machine's image.
type GuestOS struct {
	// family is linux, windows or other.
	Family GuestOSFamily `json:"family"`

	// distribution in lower case, e.g. ubuntu, debian, rhel, rocky,
	// almalinux, centos-stream, fedora, sles, opensuse, flatcar; for
	// windows, windows (desktop) or windows-server.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Distribution string `json:"distribution,omitempty"`

	// version of the distribution, e.g. "22.04", "12", "9.4", "2022".
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Version string `json:"version,omitempty"`
}

// GuestOSFamily is the family of a guest operating system.
// +kubebuilder:validation:Enum=linux;windows;other
type GuestOSFamily string

const (
	GuestOSFamilyLinux   GuestOSFamily = "linux"
	GuestOSFamilyWindows GuestOSFamily = "windows"
	// GuestOSFamilyOther is any other family (a BSD, an appliance).
	GuestOSFamilyOther GuestOSFamily = "other"
)

// Architecture is a CPU architecture, named as Go and Kubernetes nodes
// name it (kubernetes.io/arch).
// +kubebuilder:validation:Enum=amd64;arm64;ppc64le;s390x;riscv64
type Architecture string

const (
	ArchitectureAMD64   Architecture = "amd64"
	ArchitectureARM64   Architecture = "arm64"
	ArchitecturePPC64LE Architecture = "ppc64le"
	ArchitectureS390X   Architecture = "s390x"
	ArchitectureRISCV64 Architecture = "riscv64"
)

// UserDataFormat is the format of a machine's user data, named as Cluster
// API's bootstrap data secrets name it.
type UserDataFormat string

const (
	// UserDataCloudConfig: cloud-init user data (cloud-config, a script, MIME).
	UserDataCloudConfig UserDataFormat = "cloud-config"
	// UserDataIgnition: an Ignition config (JSON).
	UserDataIgnition UserDataFormat = "ignition"
)

// VSphereMachineSpec is everything the vSphere provider needs to build and
// run one VM. banlieue's controller fills it from a VirtualMachine's resolved
// class and its placement; Cluster API fills it from a VSphereMachineTemplate.
// +kubebuilder:validation:XValidation:rule="!has(self.tpmEnabled) || !self.tpmEnabled || (has(self.firmware) && self.firmware != 'bios')",message="tpmEnabled requires firmware efi or efi-secure"
// +kubebuilder:validation:XValidation:rule="!(has(self.userDataSecretRef) && has(self.userDataConfigMapRef))",message="userDataSecretRef and userDataConfigMapRef are mutually exclusive"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || has(self.providerID)",message="providerID may not be removed once set"
// +kubebuilder:validation:XValidation:rule="!has(oldSelf.providerID) || size(oldSelf.providerID) == 0 || (has(self.failureDomain) == has(oldSelf.failureDomain) && (!has(self.failureDomain) || self.failureDomain == oldSelf.failureDomain) && has(self.datacenter) == has(oldSelf.datacenter) && (!has(self.datacenter) || self.datacenter == oldSelf.datacenter) && has(self.cluster) == has(oldSelf.cluster) && (!has(self.cluster) || self.cluster == oldSelf.cluster) && has(self.resourcePool) == has(oldSelf.resourcePool) && (!has(self.resourcePool) || self.resourcePool == oldSelf.resourcePool) && has(self.folder) == has(oldSelf.folder) && (!has(self.folder) || self.folder == oldSelf.folder))",message="failureDomain, datacenter, cluster, resourcePool and folder are immutable once the VM exists (providerID set): its deletion looks for it there; make a new machine to move it"
type VSphereMachineSpec struct {
	CommonMachineSpec `json:",inline"`

	// template is the vCenter VM template to clone: its path relative to
	// the VM folder of the failure domain's datacenter ("ubuntu-22.04",
	// "templates/ubuntu-22.04"), which must hold a template (not a VM). No
	// absolute path, managed object reference, wildcard or "..".
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Template string `json:"template"`

	// datacenter is the vCenter datacenter to create the VM in.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Datacenter string `json:"datacenter,omitempty"`

	// cluster is the compute cluster to run the VM in.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Cluster string `json:"cluster,omitempty"`

	// resourcePool is the resource pool, a path relative to the cluster's
	// root pool ("team-a", "team-a/batch"); the root pool when empty. No
	// absolute path, managed object reference, wildcard or "..": it is
	// looked up under the failure domain's cluster only.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ResourcePool string `json:"resourcePool,omitempty"`

	// folder is the VM folder, a path relative to the datacenter's VM
	// folder ("team-a", "team-a/db"); that folder when empty. No absolute
	// path, managed object reference, wildcard or "..".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Folder string `json:"folder,omitempty"`

	// cpuHotAdd lets CPUs be added to the running VM (vSphere's
	// cpuHotAddEnabled), from the class feature hotAddCPU, which
	// the Provider must advertise. Applied while
	// the VM is powered off (at creation, or at its next power-off).
	// +optional
	CPUHotAdd bool `json:"cpuHotAdd,omitempty"`

	// memoryHotAdd lets memory be added to the running VM (vSphere's
	// memoryHotAddEnabled), from the class feature hotAddMemory, which
	// the Provider must advertise. Applied
	// while the VM is powered off.
	// +optional
	MemoryHotAdd bool `json:"memoryHotAdd,omitempty"`

	// disks of the VM, the first being the boot disk.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Disks []VSphereDisk `json:"disks,omitempty"`

	// network devices of the VM, in device order.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=16
	Network []VSphereNetworkDevice `json:"network,omitempty"`
}

// VSphereDisk is one virtual disk.
type VSphereDisk struct {
	// name of the disk, unique in the VM.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// sizeGiB is the disk size in GiB, at most 64 TiB.
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65536
	SizeGiB int64 `json:"sizeGiB"`
	// provisioning is thin, thick or eagerZeroed. Defaults to thin.
	// +optional
	// +kubebuilder:default=thin
	Provisioning DiskProvisioning `json:"provisioning,omitempty"`
	// datastore to place the disk on; the template's datastore when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Datastore string `json:"datastore,omitempty"`
}

// VSphereNetworkDevice is one network adapter.
// +kubebuilder:validation:XValidation:rule="!(has(self.dhcp4) && self.dhcp4 && has(self.static))",message="dhcp4 and static are mutually exclusive"
type VSphereNetworkDevice struct {
	// name of the device (the VMClass interface name), unique in the VM.
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// portGroup is the vSphere network (port group) to connect to. When
	// empty the NIC is on the template's network: the template's adapter at
	// this position as it is, or, past the template's adapters, on the
	// network of its first one.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	PortGroup string `json:"portGroup,omitempty"`
	// dhcp4 gets the address from DHCP (the default when static is empty).
	// +optional
	DHCP4 bool `json:"dhcp4,omitempty"`
	// static configures a fixed address.
	// +optional
	Static *StaticIP `json:"static,omitempty"`
}

// StaticIP is a fixed address of one network device.
type StaticIP struct {
	// address is an IPv4 or IPv6 address.
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address"
	// +kubebuilder:validation:MaxLength=64
	Address string `json:"address"`
	// prefix is the network prefix length (0-32 for IPv4, 0-128 for IPv6).
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int32 `json:"prefix"`
	// gateway is the default gateway.
	// +optional
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="must be an IPv4 or IPv6 address"
	// +kubebuilder:validation:MaxLength=64
	Gateway string `json:"gateway,omitempty"`
	// nameservers are DNS server addresses.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=8
	// +kubebuilder:validation:items:MaxLength=64
	Nameservers []string `json:"nameservers,omitempty"`
}

// SecretKeyReference selects a key of a Secret in the same namespace.
type SecretKeyReference struct {
	// name of the Secret.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the Secret's data. Defaults to "value", the key Cluster API
	// bootstrap providers write.
	// +optional
	// +kubebuilder:default=value
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// ConfigMapKeyReference selects a key of a ConfigMap in the same namespace.
type ConfigMapKeyReference struct {
	// name of the ConfigMap.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key in the ConfigMap's data. Defaults to "user-data".
	// +optional
	// +kubebuilder:default=user-data
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
}

// CommonMachineStatus is what every banlieue infrastructure machine's
// status has, in the Cluster API v1beta2 InfraMachine shape; each kind
// embeds it.
type CommonMachineStatus struct {
	// initialization.provisioned is true once the VM exists with the spec
	// applied (Cluster API's v1beta2 contract).
	// +optional
	Initialization *MachineInitialization `json:"initialization,omitempty"`

	// conditions: Ready (the VM exists and is powered as desired; its
	// addresses follow as the guest reports them) and Paused.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// addresses of the VM, in Cluster API's MachineAddress shape.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Addresses []MachineAddress `json:"addresses,omitempty"`

	// failureDomain the VM actually runs in.
	// +optional
	FailureDomain string `json:"failureDomain,omitempty"`

	// location is where the VM is built: written before the backend is
	// first asked to create it, and where every later call (converge,
	// power, delete) looks for it, whatever the spec's location fields say
	// since. Between that first call and providerID being set the CRD
	// lets those fields change; the provider then keeps the VM here and
	// reports the edit (Ready=False, LocationChanged).
	// +optional
	Location *BuiltLocation `json:"location,omitempty"`

	// powerState the VM is in.
	// +optional
	PowerState PowerState `json:"powerState,omitempty"`

	// softPowerOffTime is when the guest was asked to shut down for the
	// power-off in progress (Soft, TrySoft). It is written before the
	// request is sent, so a restarted provider counts the grace period
	// from the first request instead of starting it again; cleared once
	// the VM is in its desired power state.
	// +optional
	SoftPowerOffTime *metav1.Time `json:"softPowerOffTime,omitempty"`

	// restart is the last restart asked by spec.restartRequestID, as the
	// provider acted on it. Sending is written before the backend is
	// asked: a provider that finds it on its restart does not ask again
	// (Unknown), so a restart is never repeated.
	// +optional
	Restart *RestartStatus `json:"restart,omitempty"`

	// snapshots are the backend snapshots of spec.snapshots as the
	// provider took them. Creating, with its taskRef, is written before
	// the backend task is awaited: a provider that restarts follows that
	// task (or finds the snapshot by name) instead of taking another.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Snapshots []MachineSnapshotStatus `json:"snapshots,omitempty"`

	// restore is the last restore asked by spec.restoreRequest, as the
	// provider acted on it (Restoring is written before the backend is
	// asked, with its task once there is one).
	// +optional
	Restore *RestoreStatus `json:"restore,omitempty"`

	// vmName is the VM's name in the backend, "<namespace>.<name>" (ending
	// in a hash when longer than 80 characters): unique across namespaces.
	// +optional
	VMName string `json:"vmName,omitempty"`

	// taskRef is the backend task in flight for this VM that the backend
	// cannot find again by itself (a vCenter clone or destroy; a libvirt
	// step; a Proxmox UPID), so a restarted provider resumes instead of
	// repeating it.
	// +optional
	TaskRef string `json:"taskRef,omitempty"`

	// observedGeneration is the metadata.generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// BuiltLocation is the place a machine's VM is built at, in the
// backend's terms.
type BuiltLocation struct {
	// failureDomain is the spec.failureDomain the VM was built for.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	FailureDomain string `json:"failureDomain,omitempty"`

	// datacenter and cluster (vSphere), or host (libvirt, Proxmox VE), are
	// the failure domain's place in the backend.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Datacenter string `json:"datacenter,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Cluster string `json:"cluster,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Host string `json:"host,omitempty"`

	// options are the backend's own location settings, by name (vSphere:
	// resourcePool, folder); absent means the backend's default.
	// +optional
	// +kubebuilder:validation:MaxProperties=8
	Options map[string]string `json:"options,omitempty"`
}

// VSphereMachineStatus is the observed state of a VSphereMachine, in the
// Cluster API v1beta2 InfraMachine shape.
type VSphereMachineStatus struct {
	CommonMachineStatus `json:",inline"`

	// biosUUID is the VM's BIOS UUID (what providerID is built from).
	// +optional
	BIOSUUID string `json:"biosUUID,omitempty"`

	// instanceUUID is the VM's vCenter instance UUID.
	// +optional
	InstanceUUID string `json:"instanceUUID,omitempty"`
}

// MachineInitialization follows Cluster API's v1beta2 initialization shape.
type MachineInitialization struct {
	// provisioned is true once the infrastructure is provisioned.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// MachineAddressType is Cluster API's address vocabulary.
// +kubebuilder:validation:Enum=Hostname;ExternalIP;InternalIP;ExternalDNS;InternalDNS
type MachineAddressType string

// MachineAddress is one address of a machine (Cluster API's shape).
type MachineAddress struct {
	// type is Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.
	Type MachineAddressType `json:"type"`
	// address itself.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=vspheremachines,scope=Namespaced,shortName=vsm,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`,description="Cluster API cluster, when a Machine owns it"
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Power",type=string,JSONPath=`.status.powerState`
// +kubebuilder:printcolumn:name="Failure-Domain",type=string,JSONPath=`.spec.failureDomain`
// +kubebuilder:printcolumn:name="VM",type=string,JSONPath=`.status.vmName`,priority=1,description="The VM's name in vCenter"
// +kubebuilder:printcolumn:name="ProviderID",type=string,JSONPath=`.spec.providerID`,priority=1
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// VSphereMachine is one VM in vCenter, in the shape of Cluster API's v1beta2
// InfraMachine contract: banlieue's controller creates one per
// VirtualMachine, and Cluster API Machines can point at one directly.
type VSphereMachine struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the VM to build.
	Spec VSphereMachineSpec `json:"spec"`
	// status is what the provider observed.
	// +optional
	Status VSphereMachineStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// VSphereMachineList is a list of VSphereMachines.
type VSphereMachineList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VSphereMachine `json:"items"`
}

// ---------------------------------------------------------------------------
// VSphereMachineTemplate

// VSphereMachineTemplateSpec is the spec of a VSphereMachineTemplate.
type VSphereMachineTemplateSpec struct {
	// template is what each stamped-out VSphereMachine gets.
	Template VSphereMachineTemplateResource `json:"template"`
}

// VSphereMachineTemplateResource is the metadata and spec of stamped-out
// VSphereMachines.
type VSphereMachineTemplateResource struct {
	// metadata: labels and annotations for the VSphereMachines.
	// +optional
	ObjectMeta TemplateObjectMeta `json:"metadata,omitempty"`
	// spec of the VSphereMachines.
	Spec VSphereMachineSpec `json:"spec"`
}

// TemplateObjectMeta is the metadata a template may set.
type TemplateObjectMeta struct {
	// labels to put on stamped-out objects.
	// +optional
	Labels map[string]string `json:"labels,omitempty"`
	// annotations to put on stamped-out objects.
	// +optional
	Annotations map[string]string `json:"annotations,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=vspheremachinetemplates,scope=Namespaced,shortName=vsmt,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Template",type=string,JSONPath=`.spec.template.spec.template`
// +kubebuilder:printcolumn:name="CPUs",type=integer,JSONPath=`.spec.template.spec.cpus`
// +kubebuilder:printcolumn:name="Memory-MiB",type=integer,JSONPath=`.spec.template.spec.memoryMiB`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// VSphereMachineTemplate is Cluster API's InfraMachineTemplate for
// VSphereMachines: MachineSets and control planes stamp machines from it.
type VSphereMachineTemplate struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec holds the machine template.
	Spec VSphereMachineTemplateSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// VSphereMachineTemplateList is a list of VSphereMachineTemplates.
type VSphereMachineTemplateList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VSphereMachineTemplate `json:"items"`
}

// ---------------------------------------------------------------------------
// VSphereCluster

// APIEndpoint is a host and port (Cluster API's controlPlaneEndpoint shape).
type APIEndpoint struct {
	// host is a DNS name or IP address.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Host string `json:"host,omitempty"`
	// port is the TCP port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`
}

// CommonClusterSpec is what every banlieue InfraCluster's spec has,
// whatever its backend; each kind embeds it, so one generic controller
// (pkg/controllers/infracluster) serves them all.
type CommonClusterSpec struct {
	// providerSelector selects, by label, the banlieue Providers of this
	// kind's backend in this namespace and in the shared Provider
	// namespace; their status.failureDomains are aggregated into this
	// object's status. Empty selects every one.
	// +optional
	ProviderSelector *metav1.LabelSelector `json:"providerSelector,omitempty"`

	// controlPlaneEndpoint is the cluster's API endpoint, when known.
	// +optional
	ControlPlaneEndpoint APIEndpoint `json:"controlPlaneEndpoint,omitempty"`
}

// CommonClusterStatus is the observed state of any banlieue InfraCluster,
// in the Cluster API v1beta2 InfraCluster shape.
type CommonClusterStatus struct {
	// initialization.provisioned is true once the failure domains are known.
	// +optional
	Initialization *ClusterInitialization `json:"initialization,omitempty"`

	// failureDomains aggregated from the selected Providers.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=1024
	FailureDomains []FailureDomain `json:"failureDomains,omitempty"`

	// conditions: Ready (failure domains known) and FailureDomainsUnique.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=32
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// observedGeneration is the metadata.generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
}

// VSphereClusterSpec selects the vSphere Providers whose failure domains a
// Cluster API cluster spreads its machines across.
type VSphereClusterSpec struct {
	CommonClusterSpec `json:",inline"`
}

// VSphereClusterStatus is the observed state, in the Cluster API v1beta2
// InfraCluster shape.
type VSphereClusterStatus struct {
	CommonClusterStatus `json:",inline"`
}

// ClusterInitialization follows Cluster API's v1beta2 initialization shape.
type ClusterInitialization struct {
	// provisioned is true once the cluster infrastructure is provisioned.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty"`
}

// FailureDomain is one failure domain, in Cluster API's v1beta2 shape.
type FailureDomain struct {
	// name of the failure domain (a banlieue Provider's failure-domain name).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Name string `json:"name"`
	// controlPlane: control-plane machines may be placed here.
	// +optional
	ControlPlane *bool `json:"controlPlane,omitempty"`
	// attributes of the failure domain (provider, datacenter, cluster).
	// +optional
	Attributes map[string]string `json:"attributes,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=vsphereclusters,scope=Namespaced,shortName=vsc,categories=cluster-api;banlieue-infra
// +kubebuilder:metadata:labels="cluster.x-k8s.io/v1beta2=v1alpha1"
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.metadata.labels['cluster\.x-k8s\.io/cluster-name']`
// +kubebuilder:printcolumn:name="Provisioned",type=boolean,JSONPath=`.status.initialization.provisioned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Endpoint",type=string,JSONPath=`.spec.controlPlaneEndpoint.host`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// VSphereCluster is Cluster API's InfraCluster for banlieue: it advertises
// the failure domains of one or more banlieue Providers, so a cluster can
// span several vCenters.
type VSphereCluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec selects the Providers.
	// +optional
	Spec VSphereClusterSpec `json:"spec,omitempty"`
	// status reports the aggregated failure domains.
	// +optional
	Status VSphereClusterStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// VSphereClusterList is a list of VSphereClusters.
type VSphereClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VSphereCluster `json:"items"`
}

// RestartPhase is how far a restart went.
// +kubebuilder:validation:Enum=Pending;Sending;Done;Failed;Unknown
type RestartPhase string

const (
	// RestartPending: asked, not acted on yet.
	RestartPending RestartPhase = "Pending"
	// RestartSending: the backend is being asked.
	RestartSending RestartPhase = "Sending"
	// RestartDone: the backend reset the VM.
	RestartDone RestartPhase = "Done"
	// RestartFailed: the backend refused or the VM was not running.
	RestartFailed RestartPhase = "Failed"
	// RestartUnknown: the provider stopped while asking the backend; it
	// does not ask again, as the reset may have happened.
	RestartUnknown RestartPhase = "Unknown"
)

// RestartStatus is one restart as the provider acted on it.
type RestartStatus struct {
	// id is the restartRequestID acted on.
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// phase is Sending, Done, Failed or Unknown.
	Phase RestartPhase `json:"phase"`
	// message says why, for Failed and Unknown.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// time of the last phase change.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// MachineSnapshot is one snapshot a machine is to have.
type MachineSnapshot struct {
	// name is the backend name (banlieue-snap- and the
	// VirtualMachineSnapshot's UID).
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[A-Za-z][A-Za-z0-9_-]*$`
	Name string `json:"name"`
	// description is shown in the backend's own tools.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Description string `json:"description,omitempty"`
	// includeMemory keeps the running VM's memory.
	// +optional
	IncludeMemory bool `json:"includeMemory,omitempty"`
}

// SnapshotPhase is how far a machine's snapshot is.
// +kubebuilder:validation:Enum=Creating;Ready;Failed;Deleting
type SnapshotPhase string

const (
	// SnapshotCreating: the backend is taking it (taskRef set once asked).
	SnapshotCreating SnapshotPhase = "Creating"
	// SnapshotReady: the backend holds it.
	SnapshotReady SnapshotPhase = "Ready"
	// SnapshotFailed: the backend refused or failed; not asked again.
	SnapshotFailed SnapshotPhase = "Failed"
	// SnapshotDeleting: it is being removed (no longer in the spec).
	SnapshotDeleting SnapshotPhase = "Deleting"
)

// MachineSnapshotStatus is one snapshot as the provider took it.
type MachineSnapshotStatus struct {
	// name is the backend name.
	// +kubebuilder:validation:MaxLength=40
	Name string `json:"name"`
	// phase is Creating, Ready, Failed or Deleting.
	Phase SnapshotPhase `json:"phase"`
	// ref is the backend's own reference to it.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Ref string `json:"ref,omitempty"`
	// creationTime is when the backend took it.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty"`
	// memory: it holds the VM's running memory.
	// +optional
	Memory bool `json:"memory,omitempty"`
	// taskRef is the backend task in flight for it, recorded before it
	// is awaited.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	TaskRef string `json:"taskRef,omitempty"`
	// message says why, for Failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// RestoreRequest is one revert of the VM to a snapshot.
type RestoreRequest struct {
	// id is the VirtualMachineRestore's UID.
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// snapshot is the backend name of a snapshot in spec.snapshots.
	// +kubebuilder:validation:MaxLength=40
	Snapshot string `json:"snapshot"`
}

// RestorePhase is how far a machine's restore went.
// +kubebuilder:validation:Enum=PoweringOff;Restoring;Done;Failed;Unknown
type RestorePhase string

const (
	// RestorePoweringOff: the backend reverts only a stopped VM; it is
	// being powered off first.
	RestorePoweringOff RestorePhase = "PoweringOff"
	// RestoreRestoring: the backend is being asked to revert.
	RestoreRestoring RestorePhase = "Restoring"
	// RestoreDone: reverted.
	RestoreDone RestorePhase = "Done"
	// RestoreFailed: the backend refused or failed.
	RestoreFailed RestorePhase = "Failed"
	// RestoreUnknown: the provider stopped while asking the backend and
	// has no task to follow; it does not ask again.
	RestoreUnknown RestorePhase = "Unknown"
)

// RestoreStatus is one restore as the provider acted on it.
type RestoreStatus struct {
	// id is the restoreRequest's id acted on.
	// +kubebuilder:validation:MaxLength=128
	ID string `json:"id"`
	// snapshot is the backend name reverted to.
	// +kubebuilder:validation:MaxLength=40
	Snapshot string `json:"snapshot"`
	// phase is PoweringOff, Restoring, Done, Failed or Unknown.
	Phase RestorePhase `json:"phase"`
	// taskRef is the backend task in flight, recorded before it is
	// awaited.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	TaskRef string `json:"taskRef,omitempty"`
	// message says why, for Failed and Unknown, and what the provider
	// does, for PoweringOff.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// time of the last phase change.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}
