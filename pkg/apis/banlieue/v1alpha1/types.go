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
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LocalObjectReference names an object of a known kind. For namespaced
// referrers it lives in the referrer's namespace; cluster-scoped kinds
// (VMClass, VMImage) are found by name alone.
type LocalObjectReference struct {
	// name of the referenced object. Must be a DNS-1123 subdomain.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
}

// KeySelector selects one key of a Secret or ConfigMap in the referrer's namespace.
type KeySelector struct {
	// name of the Secret or ConfigMap. Must be a DNS-1123 subdomain.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// key inside the object's data. Defaulted per field (see the field's documentation).
	// +optional
	Key string `json:"key,omitempty" protobuf:"bytes,2,opt,name=key"`
}

// PowerState is the power state of a virtual machine.
// +enum
type PowerState string

const (
	// PowerStatePoweredOn means the VM runs.
	PowerStatePoweredOn PowerState = "PoweredOn"
	// PowerStatePoweredOff means the VM is stopped.
	PowerStatePoweredOff PowerState = "PoweredOff"
	// PowerStateSuspended means the VM's memory is saved and it does not run.
	PowerStateSuspended PowerState = "Suspended"
)

// PowerOffMode is how a virtual machine is driven to PoweredOff.
// +enum
type PowerOffMode string

const (
	// PowerOffModeHard cuts the power: the guest gets no say.
	PowerOffModeHard PowerOffMode = "Hard"
	// PowerOffModeSoft asks the guest to shut down and waits for it.
	PowerOffModeSoft PowerOffMode = "Soft"
	// PowerOffModeTrySoft asks the guest to shut down and cuts the power
	// once the grace period has passed.
	PowerOffModeTrySoft PowerOffMode = "TrySoft"
)

// Firmware is the boot firmware of a virtual machine.
// +enum
type Firmware string

const (
	// FirmwareBIOS boots with legacy BIOS.
	FirmwareBIOS Firmware = "bios"
	// FirmwareEFI boots with UEFI.
	FirmwareEFI Firmware = "efi"
	// FirmwareEFISecure boots with UEFI and secure boot.
	FirmwareEFISecure Firmware = "efi-secure"
)

// DiskProvisioning is how a disk's blocks are allocated on its datastore.
// +enum
type DiskProvisioning string

const (
	// DiskProvisioningThin allocates blocks on first write.
	DiskProvisioningThin DiskProvisioning = "thin"
	// DiskProvisioningThick allocates all blocks at creation, zeroing them lazily.
	DiskProvisioningThick DiskProvisioning = "thick"
	// DiskProvisioningEagerZeroed allocates and zeroes all blocks at creation.
	DiskProvisioningEagerZeroed DiskProvisioning = "eagerZeroed"
)

// ---------------------------------------------------------------------------
// VirtualMachine

// +genclient
// +genclient:method=GetResolved,verb=get,subresource=resolved,result=ResolvedVirtualMachine
// +genclient:method=GetPlacement,verb=get,subresource=placement,result=VirtualMachinePlacement
// +genclient:method=Restart,verb=create,subresource=restart,input=VirtualMachineRestart,result=VirtualMachineRestart
// +genclient:method=CreateWebConsole,verb=create,subresource=webconsole,input=VirtualMachineWebConsole,result=VirtualMachineWebConsole
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachine is a provider-agnostic virtual machine. It names a VMClass
// (its shape) and a VMImage (what it boots); banlieue places it on a Provider
// whose labels match spec.placement and drives that backend.
type VirtualMachine struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the desired state of the virtual machine.
	Spec VirtualMachineSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status is the observed state, written by banlieue's controllers.
	// +optional
	Status VirtualMachineStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// VirtualMachineSpec is the desired state of a VirtualMachine. It carries no
// backend-specific settings: the class, the image and the placement selectors
// are all a backend needs.
type VirtualMachineSpec struct {
	// classRef names the cluster-scoped VMClass that gives the VM its hardware
	// shape and network topology. Immutable.
	ClassRef LocalObjectReference `json:"classRef" protobuf:"bytes,1,opt,name=classRef"`
	// imageRef names the cluster-scoped VMImage the VM boots from. Immutable.
	ImageRef LocalObjectReference `json:"imageRef" protobuf:"bytes,2,opt,name=imageRef"`
	// placement constrains which Providers and failure domains may run the VM.
	// There is no reference to a Provider by name: the scheduler matches labels.
	// May change until the VM is scheduled (status.scheduled is set).
	// +optional
	Placement *Placement `json:"placement,omitempty" protobuf:"bytes,3,opt,name=placement"`
	// desiredPowerState is the power state the VM should be driven to:
	// PoweredOn, PoweredOff or Suspended. Defaults to PoweredOn.
	// +optional
	// +default="PoweredOn"
	DesiredPowerState PowerState `json:"desiredPowerState,omitempty" protobuf:"bytes,4,opt,name=desiredPowerState,casttype=PowerState"`
	// powerOffMode is how PoweredOff is reached: Hard cuts the power,
	// Soft asks the guest to shut down and waits for it, TrySoft (also
	// when empty) asks the guest and cuts the power after
	// powerOffGraceSeconds.
	// +optional
	PowerOffMode PowerOffMode `json:"powerOffMode,omitempty" protobuf:"bytes,10,opt,name=powerOffMode,casttype=PowerOffMode"`
	// powerOffGraceSeconds is how long TrySoft waits for the guest before
	// cutting the power, 0 to 3600; the provider's default (120 seconds
	// unless configured) when unset.
	// +optional
	PowerOffGraceSeconds *int32 `json:"powerOffGraceSeconds,omitempty" protobuf:"varint,11,opt,name=powerOffGraceSeconds"`
	// userData references the cloud-init / ignition / sysprep payload: exactly
	// one of secretRef or configMapRef. The key defaults to "user-data". Immutable.
	// +optional
	UserData *UserData `json:"userData,omitempty" protobuf:"bytes,5,opt,name=userData"`
	// hardwareOverride holds per-VM deltas over the class's hardware. Only the
	// fields set here replace the class's values; everything else is inherited.
	// An empty override is removed. Disk sizes may only grow on update.
	// +optional
	HardwareOverride *HardwareOverride `json:"hardwareOverride,omitempty" protobuf:"bytes,6,opt,name=hardwareOverride"`
	// networkOverrides replace the IPAM of named class interfaces for this VM
	// only. Entries without a change are removed. Immutable once the VM is
	// scheduled.
	// +optional
	// +listType=map
	// +listMapKey=name
	NetworkOverrides []NetworkOverride `json:"networkOverrides,omitempty" protobuf:"bytes,7,rep,name=networkOverrides"`
	// paused stops all work on the VM and its infrastructure object while
	// true: nothing is scheduled, changed, powered or deleted (a deleted
	// paused VM waits), and the infrastructure object carries Cluster API's
	// cluster.x-k8s.io/paused annotation so its provider stops too. The
	// Paused condition shows it. Setting it back to false resumes.
	// +optional
	Paused bool `json:"paused,omitempty" protobuf:"varint,8,opt,name=paused"`
	// migrationPolicy says what banlieue does when the VM's placement no
	// longer holds (its Provider or failure domain gone or no longer
	// matching, its placement edited): Automatic (also when empty) recreates it
	// on a new placement, Manual waits for the banlieue.io/migrate=true
	// annotation, Never only reports it (PlacementValid=False). A migration
	// builds the new machine, waits for it to be Ready, then deletes the old
	// one: user data is delivered again, disk contents are not carried.
	// +optional
	MigrationPolicy MigrationPolicy `json:"migrationPolicy,omitempty" protobuf:"bytes,9,opt,name=migrationPolicy,casttype=MigrationPolicy"`
	// migrationTimeoutSeconds bounds a migration: when the new machine is
	// not Ready this many seconds after the migration started
	// (status.migration.startTime), it is deleted and the VM stays where it
	// is (Migrating=False, reason MigrationTimedOut, and an Event). A
	// migration asked for with the banlieue.io/migrate annotation is not
	// tried again by itself: the annotation is removed, annotate again to
	// retry. One a drifted placement started is tried again once another
	// migrationTimeoutSeconds has passed since it timed out. Defaults to
	// 1800 (30 minutes); at least 1.
	// +optional
	// +default=1800
	MigrationTimeoutSeconds *int32 `json:"migrationTimeoutSeconds,omitempty" protobuf:"varint,12,opt,name=migrationTimeoutSeconds"`
}

// MigrationPolicy is when a VM is recreated elsewhere.
// +enum
type MigrationPolicy string

const (
	MigrationAutomatic MigrationPolicy = "Automatic"
	MigrationManual    MigrationPolicy = "Manual"
	MigrationNever     MigrationPolicy = "Never"
)

// Placement constrains where a VM may run.
type Placement struct {
	// providerSelector selects the Providers (by their labels) that may run
	// the VM. Empty or absent selects every Provider.
	// +optional
	ProviderSelector *metav1.LabelSelector `json:"providerSelector,omitempty" protobuf:"bytes,1,opt,name=providerSelector"`
	// failureDomainSelector selects failure domains by the labels a Provider
	// publishes in status.failureDomains[].labels, which always include
	// "name" (the resolved failure-domain name).
	// +optional
	FailureDomainSelector *metav1.LabelSelector `json:"failureDomainSelector,omitempty" protobuf:"bytes,2,opt,name=failureDomainSelector"`
	// antiAffinity keeps the VM apart from the other VMs of its namespace
	// that a term's labelSelector selects: never on the same Provider or
	// failure domain (mode required, else AntiAffinityUnsatisfied), or as
	// rarely as the Providers allow (mode preferred). /placement explains
	// each term per failure domain.
	// +optional
	// +listType=atomic
	AntiAffinity []AntiAffinityTerm `json:"antiAffinity,omitempty" protobuf:"bytes,3,rep,name=antiAffinity"`
}

// AntiAffinityTerms are p's anti-affinity terms; none for no placement.
func (p *Placement) AntiAffinityTerms() []AntiAffinityTerm {
	if p == nil {
		return nil
	}
	return p.AntiAffinity
}

// AntiAffinityTopology is what two VMs must not share.
// +enum
type AntiAffinityTopology string

const (
	// AntiAffinityProvider: not the same Provider.
	AntiAffinityProvider AntiAffinityTopology = "provider"
	// AntiAffinityFailureDomain: not the same failure domain of a Provider.
	AntiAffinityFailureDomain AntiAffinityTopology = "failureDomain"
)

// AntiAffinityMode is how strictly a term holds.
// +enum
type AntiAffinityMode string

const (
	// AntiAffinityRequired: a placement breaking the term is not made.
	AntiAffinityRequired AntiAffinityMode = "required"
	// AntiAffinityPreferred: among the fitting placements, those breaking
	// the term least win (before the least loaded).
	AntiAffinityPreferred AntiAffinityMode = "preferred"
)

// AntiAffinityTerm keeps a VM apart from the VMs a selector picks.
type AntiAffinityTerm struct {
	// topologyKey is what the VMs must not share: provider or failureDomain.
	TopologyKey AntiAffinityTopology `json:"topologyKey" protobuf:"bytes,1,opt,name=topologyKey,casttype=AntiAffinityTopology"`
	// labelSelector selects the other VMs (of the VM's namespace) by label.
	LabelSelector *metav1.LabelSelector `json:"labelSelector" protobuf:"bytes,2,opt,name=labelSelector"`
	// mode is required (the default) or preferred.
	// +optional
	// +default="required"
	Mode AntiAffinityMode `json:"mode,omitempty" protobuf:"bytes,3,opt,name=mode,casttype=AntiAffinityMode"`
}

// UserData references the first-boot payload of a VM. Exactly one of
// secretRef or configMapRef must be set.
type UserData struct {
	// secretRef selects a key of a Secret in the VM's namespace. Use it for
	// anything sensitive. The key defaults to "user-data".
	// +optional
	SecretRef *KeySelector `json:"secretRef,omitempty" protobuf:"bytes,1,opt,name=secretRef"`
	// configMapRef selects a key of a ConfigMap in the VM's namespace, for
	// non-sensitive data. The key defaults to "user-data".
	// +optional
	ConfigMapRef *KeySelector `json:"configMapRef,omitempty" protobuf:"bytes,2,opt,name=configMapRef"`
}

// HardwareOverride is a delta over VMClass.spec.hardware. Omitted fields are
// inherited from the class and are never filled in by the server.
type HardwareOverride struct {
	// cpus replaces VMClass.spec.hardware.cpus. Minimum 1.
	// +optional
	CPUs *int32 `json:"cpus,omitempty" protobuf:"varint,1,opt,name=cpus"`
	// memoryMiB replaces VMClass.spec.hardware.memoryMiB. Minimum 1.
	// +optional
	MemoryMiB *int64 `json:"memoryMiB,omitempty" protobuf:"varint,2,opt,name=memoryMiB"`
	// diskOverrides replace the size of class disks, matched by name. Every
	// name must be a disk of the class. Entries without sizeGiB are removed.
	// +optional
	// +listType=map
	// +listMapKey=name
	DiskOverrides []DiskOverride `json:"diskOverrides,omitempty" protobuf:"bytes,3,rep,name=diskOverrides"`
}

// DiskOverride replaces the size of one class disk.
type DiskOverride struct {
	// name of the class disk to override.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// sizeGiB is the disk's size in GiB for this VM. Minimum 1.
	// +optional
	SizeGiB *int64 `json:"sizeGiB,omitempty" protobuf:"varint,2,opt,name=sizeGiB"`
}

// NetworkOverride replaces the IPAM of one class interface: exactly one of
// static, dhcp or pool.
type NetworkOverride struct {
	// name of the class interface to override.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// static pins the interface to a static address. An address written in
	// CIDR form ("192.0.2.90/24") is split into address and prefix.
	// +optional
	Static *StaticIPConfig `json:"static,omitempty" protobuf:"bytes,2,opt,name=static"`
	// dhcp gets the interface's address from DHCP, whatever the class says.
	// +optional
	DHCP bool `json:"dhcp,omitempty" protobuf:"varint,3,opt,name=dhcp"`
	// pool claims the interface's address from an IP pool (Cluster API's
	// IPAM contract), whatever the class says.
	// +optional
	Pool *IPPoolReference `json:"pool,omitempty" protobuf:"bytes,4,opt,name=pool"`
}

// IPPoolReference names the pool an interface's address is claimed from,
// through Cluster API's IPAM contract: banlieue creates an IPAddressClaim
// (ipam.cluster.x-k8s.io) in the VM's namespace whose poolRef is this, so
// any IPAM provider serves it; banlieue's own is the IPPool kind.
type IPPoolReference struct {
	// apiGroup of the pool; infrastructure.banlieue.io when empty.
	// +optional
	APIGroup string `json:"apiGroup,omitempty" protobuf:"bytes,1,opt,name=apiGroup"`
	// kind of the pool; IPPool (banlieue's, cluster-scoped) when empty.
	// +optional
	Kind string `json:"kind,omitempty" protobuf:"bytes,2,opt,name=kind"`
	// name of the pool.
	Name string `json:"name" protobuf:"bytes,3,opt,name=name"`
}

// StaticIPConfig is a static IPv4 or IPv6 configuration of one interface.
type StaticIPConfig struct {
	// address is the interface's IP address. CIDR form ("192.0.2.90/24") is
	// accepted when prefix is omitted and is split into address and prefix.
	Address string `json:"address" protobuf:"bytes,1,opt,name=address"`
	// prefix is the network prefix length: 0-32 for IPv4, 0-128 for IPv6.
	// Required unless given with the address in CIDR form.
	// +optional
	Prefix *int32 `json:"prefix,omitempty" protobuf:"varint,2,opt,name=prefix"`
	// gateway is the default gateway; it must lie inside address/prefix.
	// +optional
	Gateway string `json:"gateway,omitempty" protobuf:"bytes,3,opt,name=gateway"`
	// nameservers are DNS server IP addresses.
	// +optional
	// +listType=atomic
	Nameservers []string `json:"nameservers,omitempty" protobuf:"bytes,4,rep,name=nameservers"`
}

// Condition types of a VirtualMachine.
const (
	// VirtualMachineReady: the VM exists, is provisioned and is reachable:
	// True only when provisioned, in the desired power state, powered on and
	// reporting an IP address. Otherwise False with the infrastructure's
	// reason, or PoweredOff, Suspended or WaitingForAddress.
	VirtualMachineReady = "Ready"
	// VirtualMachineScheduled: a Provider matching placement has been selected.
	VirtualMachineScheduled = "Scheduled"
	// VirtualMachinePlacementValid: the VMClass/VMImage/placement combination is resolvable.
	VirtualMachinePlacementValid = "PlacementValid"
	// VirtualMachineInfrastructureReady: the backend infrastructure object reports Ready.
	VirtualMachineInfrastructureReady = "InfrastructureReady"
	// VirtualMachineMigrating: a recreate-based migration is in progress.
	VirtualMachineMigrating = "Migrating"
	// VirtualMachinePaused: spec.paused is true and nothing acts on the VM.
	VirtualMachinePaused = "Paused"
	// VirtualMachineClassOutOfDate: the VMClass changed (or is gone) since
	// the VM pinned it; the VM keeps its pinned shape.
	VirtualMachineClassOutOfDate = "ClassOutOfDate"
)

// VirtualMachineFinalizer holds a placed VirtualMachine until its
// infrastructure machine is gone. banlieue's API server adds it with the
// status write that first records a placement (status.scheduled), so the
// controller needs no write of its own for it.
const VirtualMachineFinalizer = "banlieue.io/virtualmachine"

// VirtualMachineStatus is the observed state of a VirtualMachine, mirrored
// from its backend infrastructure object.
type VirtualMachineStatus struct {
	// observedGeneration is the metadata.generation the controllers last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`
	// conditions: Ready, Scheduled, PlacementValid, InfrastructureReady, Migrating, Paused, ClassOutOfDate.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`
	// initialization tracks whether the backend has ever accepted the spec.
	// +optional
	Initialization *VirtualMachineInitialization `json:"initialization,omitempty" protobuf:"bytes,3,opt,name=initialization"`
	// scheduled records where the scheduler placed the VM.
	// +optional
	Scheduled *ScheduledPlacement `json:"scheduled,omitempty" protobuf:"bytes,4,opt,name=scheduled"`
	// classRevision is the VMClass shape the VM is built from, pinned when
	// it is scheduled: later edits of the class change nothing of a placed
	// VM (ClassOutOfDate says they exist) until the VM is annotated
	// banlieue.io/update-class=true, which pins the class as it is then.
	// +optional
	ClassRevision *ClassRevision `json:"classRevision,omitempty" protobuf:"bytes,5,opt,name=classRevision"`
	// migration is the recreation in progress: where the VM goes and the
	// machine being built there (status.scheduled and infrastructureRef
	// stay the old ones until it is Ready and the old machine is gone).
	// +optional
	Migration *MigrationStatus `json:"migration,omitempty" protobuf:"bytes,6,opt,name=migration"`
	// infrastructureRef points at the backend infrastructure object (for
	// vSphere, a VSphereMachine in the VM's namespace).
	// +optional
	InfrastructureRef *InfrastructureReference `json:"infrastructureRef,omitempty" protobuf:"bytes,7,opt,name=infrastructureRef"`
	// addresses reported by the backend.
	// +optional
	// +listType=atomic
	Addresses []MachineAddress `json:"addresses,omitempty" protobuf:"bytes,8,rep,name=addresses"`
	// powerState is the power state the backend reports.
	// +optional
	PowerState PowerState `json:"powerState,omitempty" protobuf:"bytes,9,opt,name=powerState,casttype=PowerState"`
	// imageRevision is the revision of the VMImage's import
	// (status.revision) the VM is built from, pinned when it is scheduled:
	// a later change of spec.import builds a new revision for new VMs,
	// while this VM's machine keeps naming what was built of this one
	// (which is kept until no machine names it).
	// +optional
	ImageRevision string `json:"imageRevision,omitempty" protobuf:"bytes,10,opt,name=imageRevision"`
	// restart is the last restart asked through
	// virtualmachines/NAME/restart, and how far it went: recorded by the
	// API server before it answers, so a retried request (same requestID)
	// restarts once, and a crash loses none.
	// +optional
	Restart *VirtualMachineRestartStatus `json:"restart,omitempty" protobuf:"bytes,11,opt,name=restart"`
}

// RestartPhase is how far a restart went: Pending (recorded), Sending
// (the backend is being asked), Done, Failed, or Unknown (the provider
// stopped while asking; it does not ask again).
type RestartPhase string

// The phases of a restart.
const (
	RestartPending RestartPhase = "Pending"
	RestartSending RestartPhase = "Sending"
	RestartDone    RestartPhase = "Done"
	RestartFailed  RestartPhase = "Failed"
	RestartUnknown RestartPhase = "Unknown"
)

// VirtualMachineRestartStatus is one restart of a VM.
type VirtualMachineRestartStatus struct {
	// id names the restart: the request's requestID, or one the API server
	// made.
	ID string `json:"id" protobuf:"bytes,1,opt,name=id"`
	// requestedAt is when it was asked.
	RequestedAt metav1.Time `json:"requestedAt" protobuf:"bytes,2,opt,name=requestedAt"`
	// requester is who asked.
	// +optional
	Requester string `json:"requester,omitempty" protobuf:"bytes,3,opt,name=requester"`
	// phase is Pending, Sending, Done, Failed or Unknown.
	Phase RestartPhase `json:"phase" protobuf:"bytes,4,opt,name=phase,casttype=RestartPhase"`
	// message says why, for Failed and Unknown.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,5,opt,name=message"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineRestart is the body of a POST to
// virtualmachines/NAME/restart, and its answer: one restart (a reset) of
// the running VM, acted on once by the provider.
type VirtualMachineRestart struct {
	metav1.TypeMeta `json:",inline"`
	// metadata.name is the VM's.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	// requestID makes a retried request safe: the same ID restarts once.
	// One is made when empty.
	// +optional
	RequestID string `json:"requestID,omitempty" protobuf:"bytes,2,opt,name=requestID"`
	// status is the restart as recorded (in the answer).
	// +optional
	Status *VirtualMachineRestartStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// VirtualMachineInitialization follows the Cluster API v1beta2 initialization shape.
type VirtualMachineInitialization struct {
	// provisioned is true once the backend has accepted the spec. It is
	// mirrored from the infrastructure object, never set by the core controller.
	// +optional
	Provisioned *bool `json:"provisioned,omitempty" protobuf:"varint,1,opt,name=provisioned"`
}

// MigrationStatus is a migration in progress.
type MigrationStatus struct {
	// target is the new placement.
	Target ScheduledPlacement `json:"target" protobuf:"bytes,1,opt,name=target"`
	// infrastructureRef is the machine being built there.
	InfrastructureRef InfrastructureReference `json:"infrastructureRef" protobuf:"bytes,2,opt,name=infrastructureRef"`
	// reason the VM moves: PlacementDrifted or Requested.
	Reason string `json:"reason" protobuf:"bytes,3,opt,name=reason"`
	// startTime is when the migration started: it times out
	// spec.migrationTimeoutSeconds later.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty" protobuf:"bytes,4,opt,name=startTime"`
	// imageRevision is the revision of the image's import the new machine
	// is built from: the image's current one when the migration started,
	// as for a new VM (a recreate carries no disk contents, and an older
	// revision is kept only where a machine already uses it). It becomes
	// status.imageRevision at the cutover.
	// +optional
	ImageRevision string `json:"imageRevision,omitempty" protobuf:"bytes,5,opt,name=imageRevision"`
}

// ClassRevision is a VMClass's spec at one generation.
type ClassRevision struct {
	// generation of the VMClass this spec is.
	Generation int64 `json:"generation" protobuf:"varint,1,opt,name=generation"`
	// spec of the VMClass at that generation.
	Spec VMClassSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
}

// ScheduledPlacement is the scheduler's decision for a VM.
type ScheduledPlacement struct {
	// provider is the name of the chosen Provider (in the VM's namespace or
	// given as namespace/name).
	Provider string `json:"provider" protobuf:"bytes,1,opt,name=provider"`
	// failureDomain is the chosen failure domain of that Provider.
	// +optional
	FailureDomain string `json:"failureDomain,omitempty" protobuf:"bytes,2,opt,name=failureDomain"`
	// storage is the resolved backend target of each disk.
	// +optional
	// +listType=map
	// +listMapKey=name
	Storage []StorageResolution `json:"storage,omitempty" protobuf:"bytes,3,rep,name=storage"`
	// network is the resolved backend target of each interface.
	// +optional
	// +listType=map
	// +listMapKey=name
	Network []NetworkResolution `json:"network,omitempty" protobuf:"bytes,4,rep,name=network"`
}

// StorageResolution maps one disk to its backend storage.
type StorageResolution struct {
	// name of the disk.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// storageClass the disk asked for.
	// +optional
	StorageClass string `json:"storageClass,omitempty" protobuf:"bytes,2,opt,name=storageClass"`
	// target is the backend storage the Provider maps that storage class
	// to (a vSphere datastore, a libvirt pool).
	// +optional
	Target string `json:"target,omitempty" protobuf:"bytes,3,opt,name=target"`
}

// NetworkResolution maps one interface to its backend network.
type NetworkResolution struct {
	// name of the interface.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// networkClass the interface asked for.
	// +optional
	NetworkClass string `json:"networkClass,omitempty" protobuf:"bytes,2,opt,name=networkClass"`
	// target is the backend network the Provider maps that network class
	// to (a vSphere port group, a libvirt network or bridge).
	// +optional
	Target string `json:"target,omitempty" protobuf:"bytes,3,opt,name=target"`
}

// InfrastructureReference points at an infrastructure object in the same
// namespace, in the Cluster API v1beta2 contract-versioned shape.
type InfrastructureReference struct {
	// apiGroup of the referenced object, e.g. infrastructure.banlieue.io.
	APIGroup string `json:"apiGroup" protobuf:"bytes,1,opt,name=apiGroup"`
	// kind of the referenced object, e.g. VSphereMachine.
	Kind string `json:"kind" protobuf:"bytes,2,opt,name=kind"`
	// name of the referenced object.
	Name string `json:"name" protobuf:"bytes,3,opt,name=name"`
}

// MachineAddressType is the kind of a machine address (Cluster API's vocabulary).
// +enum
type MachineAddressType string

const (
	MachineHostName    MachineAddressType = "Hostname"
	MachineExternalIP  MachineAddressType = "ExternalIP"
	MachineInternalIP  MachineAddressType = "InternalIP"
	MachineExternalDNS MachineAddressType = "ExternalDNS"
	MachineInternalDNS MachineAddressType = "InternalDNS"
)

// MachineAddress is one address of a VM.
type MachineAddress struct {
	// type of the address: Hostname, ExternalIP, InternalIP, ExternalDNS or InternalDNS.
	Type MachineAddressType `json:"type" protobuf:"bytes,1,opt,name=type,casttype=MachineAddressType"`
	// address itself.
	Address string `json:"address" protobuf:"bytes,2,opt,name=address"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineList is a list of VirtualMachines.
type VirtualMachineList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []VirtualMachine `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// ---------------------------------------------------------------------------
// ResolvedVirtualMachine (the read-only "resolved" subresource)

// Provenance tells where an effective value came from.
// +enum
type Provenance string

const (
	// ProvenanceClass: the value comes from the VMClass.
	ProvenanceClass Provenance = "class"
	// ProvenanceOverride: the value comes from the VM's override delta.
	ProvenanceOverride Provenance = "override"
	// ProvenanceImage: the value comes from the VMImage (its template
	// block), the class naming none.
	ProvenanceImage Provenance = "image"
	// ProvenanceDefault: neither set it; banlieue's default applies.
	ProvenanceDefault Provenance = "default"
)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ResolvedVirtualMachine is the effective configuration of a VirtualMachine:
// its VMClass merged with its override deltas, with the provenance of every
// overridable value. Served read-only at .../virtualmachines/NAME/resolved.
type ResolvedVirtualMachine struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the VirtualMachine's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the merged, effective configuration: of the pinned class
	// (status.classRevision) once the VM is placed.
	Spec ResolvedVirtualMachineSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// current is the configuration with the VMClass as it is now, when that
	// differs from the pinned one (the VM is ClassOutOfDate): what
	// annotating it banlieue.io/update-class=true would apply.
	// +optional
	Current *ResolvedVirtualMachineSpec `json:"current,omitempty" protobuf:"bytes,3,opt,name=current"`
}

// ResolvedVirtualMachineSpec is the merged configuration of a VM.
type ResolvedVirtualMachineSpec struct {
	// class is the name of the VMClass merged in.
	Class string `json:"class" protobuf:"bytes,1,opt,name=class"`
	// classGeneration is the generation of the VMClass merged in.
	// +optional
	ClassGeneration int64 `json:"classGeneration,omitempty" protobuf:"varint,2,opt,name=classGeneration"`
	// cpus is the effective number of virtual CPUs.
	CPUs ResolvedInt32 `json:"cpus" protobuf:"bytes,3,opt,name=cpus"`
	// memoryMiB is the effective memory in MiB.
	MemoryMiB ResolvedInt64 `json:"memoryMiB" protobuf:"bytes,4,opt,name=memoryMiB"`
	// disks are the effective disks, in class order.
	// +listType=map
	// +listMapKey=name
	Disks []ResolvedDisk `json:"disks,omitempty" protobuf:"bytes,5,rep,name=disks"`
	// interfaces are the effective network interfaces, in class order.
	// +listType=map
	// +listMapKey=name
	Interfaces []ResolvedInterface `json:"interfaces,omitempty" protobuf:"bytes,6,rep,name=interfaces"`
	// firmware is the effective boot firmware: the class's, else the
	// image template's, else empty: the backend keeps the firmware of what
	// it clones (an EFI template stays EFI).
	// +optional
	Firmware Firmware `json:"firmware,omitempty" protobuf:"bytes,7,opt,name=firmware,casttype=Firmware"`
	// firmwareFrom tells whether firmware came from the class, the image or
	// neither (default: the template's own).
	FirmwareFrom Provenance `json:"firmwareFrom" protobuf:"bytes,8,opt,name=firmwareFrom,casttype=Provenance"`
	// features the class requires of a Provider.
	// +listType=set
	Features []string `json:"features,omitempty" protobuf:"bytes,9,rep,name=features"`
	// tpmEnabled: the VM gets a virtual TPM.
	TPMEnabled bool `json:"tpmEnabled" protobuf:"varint,10,opt,name=tpmEnabled"`
	// image is the VMImage the VM boots, with its per-provider sources.
	Image ResolvedImage `json:"image" protobuf:"bytes,11,opt,name=image"`
	// placement is the VM's placement constraints.
	// +optional
	Placement *Placement `json:"placement,omitempty" protobuf:"bytes,12,opt,name=placement"`
	// powerState is the desired power state.
	PowerState PowerState `json:"powerState" protobuf:"bytes,13,opt,name=powerState,casttype=PowerState"`
	// userData is the VM's first-boot payload reference.
	// +optional
	UserData *UserData `json:"userData,omitempty" protobuf:"bytes,14,opt,name=userData"`
}

// ResolvedInt32 is an effective integer and where it came from.
type ResolvedInt32 struct {
	// value is the effective value.
	Value int32 `json:"value" protobuf:"varint,1,opt,name=value"`
	// from is class, override or default.
	From Provenance `json:"from" protobuf:"bytes,2,opt,name=from,casttype=Provenance"`
}

// ResolvedInt64 is an effective integer and where it came from.
type ResolvedInt64 struct {
	// value is the effective value.
	Value int64 `json:"value" protobuf:"varint,1,opt,name=value"`
	// from is class, override or default.
	From Provenance `json:"from" protobuf:"bytes,2,opt,name=from,casttype=Provenance"`
}

// ResolvedDisk is one effective disk.
type ResolvedDisk struct {
	// name of the disk.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// sizeGiB is the effective size, with its provenance.
	SizeGiB ResolvedInt64 `json:"sizeGiB" protobuf:"bytes,2,opt,name=sizeGiB"`
	// storageClass of the disk (from the class).
	StorageClass string `json:"storageClass,omitempty" protobuf:"bytes,3,opt,name=storageClass"`
	// provisioning of the disk (from the class).
	Provisioning DiskProvisioning `json:"provisioning,omitempty" protobuf:"bytes,4,opt,name=provisioning,casttype=DiskProvisioning"`
}

// IPAMMode is how an interface gets its address.
// +enum
type IPAMMode string

const (
	// IPAMDHCP: the address comes from DHCP.
	IPAMDHCP IPAMMode = "DHCP"
	// IPAMStatic: the address is static.
	IPAMStatic IPAMMode = "Static"
	// IPAMPool: the address is allocated from a named pool.
	IPAMPool IPAMMode = "Pool"
)

// ResolvedInterface is one effective network interface.
type ResolvedInterface struct {
	// name of the interface.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// networkClass of the interface (from the class).
	NetworkClass string `json:"networkClass,omitempty" protobuf:"bytes,2,opt,name=networkClass"`
	// mode is the effective IPAM mode: DHCP, Static or Pool.
	Mode IPAMMode `json:"mode" protobuf:"bytes,3,opt,name=mode,casttype=IPAMMode"`
	// static is the effective static configuration when mode is Static.
	// +optional
	Static *StaticIPConfig `json:"static,omitempty" protobuf:"bytes,4,opt,name=static"`
	// pool is the IP pool when mode is Pool.
	// +optional
	Pool *IPPoolReference `json:"pool,omitempty" protobuf:"bytes,5,opt,name=pool"`
	// from is where the IPAM came from: class, override, or default (DHCP).
	From Provenance `json:"from" protobuf:"bytes,6,opt,name=from,casttype=Provenance"`
}

// ResolvedImage is the image a VM boots.
type ResolvedImage struct {
	// name of the VMImage.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// osFamily of the image.
	// +optional
	OSFamily string `json:"osFamily,omitempty" protobuf:"bytes,2,opt,name=osFamily"`
	// osDistribution of the image, e.g. ubuntu.
	// +optional
	OSDistribution string `json:"osDistribution,omitempty" protobuf:"bytes,7,opt,name=osDistribution"`
	// osVersion of the image, e.g. "22.04".
	// +optional
	OSVersion string `json:"osVersion,omitempty" protobuf:"bytes,8,opt,name=osVersion"`
	// architecture of the image, e.g. amd64 or arm64: a backend that
	// cannot run it refuses the VM before it is placed.
	// +optional
	Architecture string `json:"architecture,omitempty" protobuf:"bytes,9,opt,name=architecture"`
	// sources of the image per provider class.
	// +optional
	// +listType=map
	// +listMapKey=providerClass
	Sources []ImageSource `json:"sources,omitempty" protobuf:"bytes,3,rep,name=sources"`
	// installMode of the image's template.
	// +optional
	InstallMode InstallMode `json:"installMode,omitempty" protobuf:"bytes,4,opt,name=installMode,casttype=InstallMode"`
	// guestAgent of the image: how the user data reaches the guest.
	// +optional
	GuestAgent GuestAgent `json:"guestAgent,omitempty" protobuf:"bytes,5,opt,name=guestAgent,casttype=GuestAgent"`
	// cloudConfigs of the image, delivered before the VM's user data.
	// +optional
	// +listType=atomic
	CloudConfigs []CloudConfigSource `json:"cloudConfigs,omitempty" protobuf:"bytes,6,rep,name=cloudConfigs"`
	// imported names what banlieue built of the image's spec.import, for
	// classes without a source: the VM is built from this revision.
	// +optional
	Imported *ResolvedImport `json:"imported,omitempty" protobuf:"bytes,10,opt,name=imported"`
}

// ResolvedImport is the revision of an imported image a VM uses.
type ResolvedImport struct {
	// name every backend gives what it built of this revision (derived
	// from the image's UID and the revision).
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// revision of the image.
	Revision string `json:"revision" protobuf:"bytes,2,opt,name=revision"`
	// format of the import.
	Format ImageFormat `json:"format" protobuf:"bytes,3,opt,name=format,casttype=ImageFormat"`
	// providerClasses the import is limited to; all when empty.
	// +optional
	// +listType=set
	ProviderClasses []string `json:"providerClasses,omitempty" protobuf:"bytes,4,rep,name=providerClasses"`
}

// ---------------------------------------------------------------------------
// VMClass

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VMClass is a reusable, cluster-scoped hardware shape (CPUs, memory, disks,
// network interfaces, firmware) plus the abstract storage/network classes and
// features a Provider must offer to run it.
type VMClass struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the class's shape.
	Spec VMClassSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
}

// VMClassSpec is the shape of a VMClass. Changing a class does not
// reconfigure VMs that already run with it.
type VMClassSpec struct {
	// hardware is the CPU, memory and disk shape.
	Hardware VMClassHardware `json:"hardware" protobuf:"bytes,1,opt,name=hardware"`
	// network lists the VM's network interfaces.
	// +optional
	Network *VMClassNetwork `json:"network,omitempty" protobuf:"bytes,2,opt,name=network"`
	// firmware is the boot firmware: bios, efi or efi-secure. When omitted,
	// the resolved firmware is bios.
	// +optional
	Firmware Firmware `json:"firmware,omitempty" protobuf:"bytes,3,opt,name=firmware,casttype=Firmware"`
	// features a Provider must advertise in spec.capabilities.features to run
	// this class (for example hotAddCPU, efiSecureBoot, vtpm).
	// +optional
	// +listType=set
	Features []string `json:"features,omitempty" protobuf:"bytes,4,rep,name=features"`
	// tpmEnabled attaches a virtual TPM. Requires firmware efi or efi-secure,
	// and a Provider advertising the vtpm feature.
	// +optional
	TPMEnabled bool `json:"tpmEnabled,omitempty" protobuf:"varint,5,opt,name=tpmEnabled"`
}

// VMClassHardware is the CPU, memory and disk shape of a class.
type VMClassHardware struct {
	// cpus is the number of virtual CPUs. Minimum 1.
	CPUs int32 `json:"cpus" protobuf:"varint,1,opt,name=cpus"`
	// memoryMiB is the memory in MiB. Minimum 1.
	MemoryMiB int64 `json:"memoryMiB" protobuf:"varint,2,opt,name=memoryMiB"`
	// disks of the VM, the first being the boot disk.
	// +optional
	// +listType=map
	// +listMapKey=name
	Disks []DiskSpec `json:"disks,omitempty" protobuf:"bytes,3,rep,name=disks"`
}

// DiskSpec is one disk of a class.
type DiskSpec struct {
	// name of the disk, unique in the class; overrides refer to it.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// sizeGiB is the disk size in GiB. Minimum 1.
	SizeGiB int64 `json:"sizeGiB" protobuf:"varint,2,opt,name=sizeGiB"`
	// storageClass is the abstract storage class a Provider maps to a
	// datastore (Provider.spec.capabilities.storageClasses).
	// +optional
	StorageClass string `json:"storageClass,omitempty" protobuf:"bytes,3,opt,name=storageClass"`
	// provisioning is thin, thick or eagerZeroed. Defaults to thin.
	// +optional
	// +default="thin"
	Provisioning DiskProvisioning `json:"provisioning,omitempty" protobuf:"bytes,4,opt,name=provisioning,casttype=DiskProvisioning"`
}

// VMClassNetwork is the network topology of a class.
type VMClassNetwork struct {
	// interfaces of the VM, in device order.
	// +optional
	// +listType=map
	// +listMapKey=name
	Interfaces []NetworkInterfaceSpec `json:"interfaces,omitempty" protobuf:"bytes,1,rep,name=interfaces"`
}

// NetworkInterfaceSpec is one network interface of a class.
type NetworkInterfaceSpec struct {
	// name of the interface, unique in the class; overrides refer to it.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// networkClass is the abstract network class a Provider maps to a port
	// group (Provider.spec.capabilities.networkClasses).
	// +optional
	NetworkClass string `json:"networkClass,omitempty" protobuf:"bytes,2,opt,name=networkClass"`
	// ipam is how the interface gets its address: DHCP when empty, or at
	// most one of static or pool.
	// +optional
	IPAM IPAMConfig `json:"ipam,omitempty" protobuf:"bytes,3,opt,name=ipam"`
}

// IPAMConfig selects how an interface is addressed. Empty means DHCP.
type IPAMConfig struct {
	// static gives the interface a fixed address.
	// +optional
	Static *StaticIPConfig `json:"static,omitempty" protobuf:"bytes,1,opt,name=static"`
	// pool allocates the address from a named IP pool.
	// +optional
	Pool *IPPoolReference `json:"pool,omitempty" protobuf:"bytes,2,opt,name=pool"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VMClassList is a list of VMClasses.
type VMClassList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []VMClass `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// ---------------------------------------------------------------------------
// VMImage

// ImageSourceKind is the kind of a backend image source.
// +enum
type ImageSourceKind string

const (
	// ImageSourceTemplate: ref names a VM template in the backend.
	ImageSourceTemplate ImageSourceKind = "Template"
	// ImageSourceVolume: ref names a base image volume, POOL/VOLUME (libvirt).
	ImageSourceVolume ImageSourceKind = "Volume"
)

// GuestAgent is the first-boot agent of an image.
// +enum
type GuestAgent string

const (
	// GuestAgentCloudInit: cloud-init reads the user data (and the image's
	// cloudConfigs) as cloud-config or a script.
	GuestAgentCloudInit GuestAgent = "cloud-init"
	// GuestAgentIgnition: Ignition reads the user data as an Ignition config.
	GuestAgentIgnition GuestAgent = "ignition"
	// GuestAgentSysprep is named to be refused: Windows sysprep answer files
	// are not delivered by any backend yet.
	GuestAgentSysprep GuestAgent = "sysprep"
)

// InstallMode says when an image's OS is installed.
// +enum
type InstallMode string

const (
	// InstallModeImmediate: the OS is installed into the template; clones boot installed.
	InstallModeImmediate InstallMode = "immediate"
	// InstallModeDeferred: each clone installs the OS at its own first boot.
	InstallModeDeferred InstallMode = "deferred"
)

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VMImage maps a backend-agnostic OS image name to a source per provider class.
type VMImage struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec describes the image and its sources.
	Spec VMImageSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status reports, per Provider, whether the image can be used there.
	// +optional
	Status VMImageStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// VMImageSpec describes an image.
type VMImageSpec struct {
	// osFamily is linux, windows or another family (any case). With
	// osDistribution and osVersion it names the guest OS to the backend:
	// vSphere's guestId, Proxmox VE's ostype, a libosinfo os id in the
	// libvirt domain's metadata (the machine's spec.guestOS). Naming none
	// keeps the template's.
	// +optional
	OSFamily string `json:"osFamily,omitempty" protobuf:"bytes,1,opt,name=osFamily"`
	// osDistribution in lower case, e.g. ubuntu, debian, rhel,
	// centos-stream, rocky, almalinux, oraclelinux, fedora, sles, opensuse,
	// flatcar, fedora-coreos, photon, amazonlinux; windows or
	// windows-server; freebsd. A distribution known as linux makes the
	// family linux when osFamily is empty.
	// +optional
	OSDistribution string `json:"osDistribution,omitempty" protobuf:"bytes,2,opt,name=osDistribution"`
	// osVersion, e.g. "22.04", "12", "9.4", "2022".
	// +optional
	OSVersion string `json:"osVersion,omitempty" protobuf:"bytes,3,opt,name=osVersion"`
	// architecture the image is built for: amd64 (or x86_64), arm64 (or
	// aarch64), ppc64le, s390x or riscv64. A backend that does not run it
	// refuses the VM before it is placed (BackendUnsupported on
	// spec.image.architecture); every backend runs amd64 only today.
	// +optional
	Architecture string `json:"architecture,omitempty" protobuf:"bytes,4,opt,name=architecture"`
	// guestAgent is the first-boot agent in the image, which decides how
	// the VM's user data reaches the guest: cloud-init (the default; vSphere
	// guestinfo.userdata/metadata, a libvirt NoCloud seed ISO) or ignition
	// (vSphere guestinfo.ignition.config.data, QEMU fw_cfg
	// opt/com.coreos/config on libvirt). sysprep is refused until supported.
	// +optional
	// +default="cloud-init"
	GuestAgent GuestAgent `json:"guestAgent,omitempty" protobuf:"bytes,5,opt,name=guestAgent,casttype=GuestAgent"`
	// sources give the image's backend source, at most one per provider class.
	// +optional
	// +listType=map
	// +listMapKey=providerClass
	Sources []ImageSource `json:"sources,omitempty" protobuf:"bytes,6,rep,name=sources"`
	// template describes how the image's template is built.
	// +optional
	Template *ImageTemplate `json:"template,omitempty" protobuf:"bytes,7,opt,name=template"`
	// cloudConfigs are cloud-config documents every VM of the image gets
	// with its own user data, before it (cloud-init merges them in order,
	// the VM's user data last): e.g. a deferred image's unattended-install
	// configuration. Each names a Secret, in the namespace of the Provider
	// serving the VM, whose key "cloud-config" holds the document; the
	// provider reads only Secrets a VMImage names this way. cloud-init
	// images only: refused with guestAgent ignition.
	// +optional
	// +listType=atomic
	CloudConfigs []CloudConfigSource `json:"cloudConfigs,omitempty" protobuf:"bytes,8,rep,name=cloudConfigs"`
	// import is an image banlieue fetches and materialises itself, in
	// every failure domain of every Provider that serves it, naming no
	// backend: a disk image (qcow2, raw, ova) becomes a libvirt base
	// volume, a Proxmox VE template, a vSphere template; an installer (iso,
	// with template) is installed into a template by a build VM. A class
	// with an entry in sources uses that entry instead (bring your own).
	// +optional
	Import *ImageImport `json:"import,omitempty" protobuf:"bytes,9,opt,name=import"`
}

// ImageFormat is the format of an imported image.
// +enum
type ImageFormat string

const (
	// ImageFormatQCOW2 is a QEMU copy-on-write disk image (a cloud image);
	// converted while streaming where a backend cannot take it.
	ImageFormatQCOW2 ImageFormat = "qcow2"
	// ImageFormatRaw is a raw disk image.
	ImageFormatRaw ImageFormat = "raw"
	// ImageFormatOVA is an OVF package (tar) with its disks.
	ImageFormatOVA ImageFormat = "ova"
	// ImageFormatISO is an installer medium: needs spec.template.
	ImageFormatISO ImageFormat = "iso"
)

// ImageImport is an image the providers fetch from a URL.
type ImageImport struct {
	// url is where the image is fetched from: http or https, no user
	// information (credentials come from secretRef). Only the provider
	// serving a failure domain fetches it; a URL (or a redirect) to a
	// link-local address (the cloud metadata service) or to a range the
	// provider denies is refused (FetchFailed).
	URL string `json:"url" protobuf:"bytes,1,opt,name=url"`
	// checksum of the image's bytes as fetched, "sha256:" followed by 64
	// hex digits or "sha512:" followed by 128; computed while streaming: a
	// mismatch leaves nothing behind (ChecksumMismatch).
	Checksum string `json:"checksum" protobuf:"bytes,2,opt,name=checksum"`
	// format of the image: qcow2, raw, ova, or iso (an installer, which
	// needs spec.template).
	Format ImageFormat `json:"format" protobuf:"bytes,3,opt,name=format,casttype=ImageFormat"`
	// secretRef names a Secret, in the namespace of each Provider serving
	// the image, with a private mirror's credentials (keys username and
	// password for HTTP basic authentication, or token for a bearer token)
	// and CA (ca.crt). Read by name only.
	// +optional
	SecretRef *LocalObjectReference `json:"secretRef,omitempty" protobuf:"bytes,4,opt,name=secretRef"`
	// providerClasses limits the import to Providers of these classes;
	// every class without a source in spec.sources when empty.
	// +optional
	// +listType=set
	ProviderClasses []string `json:"providerClasses,omitempty" protobuf:"bytes,5,rep,name=providerClasses"`
	// installTimeoutSeconds bounds an installer's run in a build VM
	// (immediate mode): a guest that has not powered itself off by then
	// fails the failure domain (InstallTimedOut). Default 1800.
	// +optional
	InstallTimeoutSeconds *int32 `json:"installTimeoutSeconds,omitempty" protobuf:"varint,6,opt,name=installTimeoutSeconds"`
	// retainOnDelete keeps what was built (volumes, templates) when the
	// VMImage is deleted; removed otherwise, once no VM uses it.
	// +optional
	RetainOnDelete bool `json:"retainOnDelete,omitempty" protobuf:"varint,7,opt,name=retainOnDelete"`
}

// ImageSource is the image's source for one provider class.
type ImageSource struct {
	// providerClass this source serves, e.g. vsphere.
	ProviderClass string `json:"providerClass" protobuf:"bytes,1,opt,name=providerClass"`
	// kind of source: Template (vsphere), Volume (libvirt).
	Kind ImageSourceKind `json:"kind" protobuf:"bytes,2,opt,name=kind,casttype=ImageSourceKind"`
	// ref is the backend name of the source: for vSphere, the template's
	// name, which must exist in every failure-domain datacenter; for
	// libvirt, POOL/VOLUME, which must exist on every failure-domain host.
	Ref string `json:"ref" protobuf:"bytes,3,opt,name=ref"`
}

// ImageTemplate describes the template build of an image.
type ImageTemplate struct {
	// firmware the template is built with: bios, efi or efi-secure.
	// +optional
	Firmware Firmware `json:"firmware,omitempty" protobuf:"bytes,1,opt,name=firmware,casttype=Firmware"`
	// installMode is immediate (installed into the template) or deferred
	// (each clone installs at first boot, e.g. to seal keys to its own vTPM).
	// Defaults to immediate.
	// +optional
	// +default="immediate"
	InstallMode InstallMode `json:"installMode,omitempty" protobuf:"bytes,2,opt,name=installMode,casttype=InstallMode"`
}

// CloudConfigSource references a cloud-config document.
type CloudConfigSource struct {
	// secretRef names a Secret holding the cloud-config.
	SecretRef LocalObjectReference `json:"secretRef" protobuf:"bytes,1,opt,name=secretRef"`
}

// VMImageStatus is the observed state of a VMImage.
type VMImageStatus struct {
	// perProvider reports, for each Provider ("namespace/name"), whether the
	// image's source exists there.
	// +optional
	// +listType=map
	// +listMapKey=provider
	PerProvider []ImageProviderStatus `json:"perProvider,omitempty" protobuf:"bytes,1,rep,name=perProvider"`
	// revision names the spec's import (URL, checksum, format, template):
	// set by the API server, it changes when any of them does, and what is
	// built for it is named after it. VMs keep the revision they were
	// built from.
	// +optional
	Revision string `json:"revision,omitempty" protobuf:"bytes,2,opt,name=revision"`
	// conditions: Ready (computed by the API server from perProvider)
	// is True when every Provider reporting has the image ready in all its
	// failure domains.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,3,rep,name=conditions"`
}

// ImagePhase is how far an image is in one failure domain.
// +enum
type ImagePhase string

const (
	ImagePhasePending    ImagePhase = "Pending"
	ImagePhaseImporting  ImagePhase = "Importing"
	ImagePhaseInstalling ImagePhase = "Installing"
	ImagePhaseReady      ImagePhase = "Ready"
	ImagePhaseFailed     ImagePhase = "Failed"
)

// ImageReady is the VMImage's condition type.
const ImageReady = "Ready"

// ImageDeleting is the condition of a deleted VMImage whose artifacts are
// still in use (True, reason InUse, naming the machines) or being
// removed; the provider processes write it, the API server keeps it.
const ImageDeleting = "Deleting"

// ImageReasonInUse: a deleted VMImage waits for the machines using what
// was built of it.
const ImageReasonInUse = "InUse"

// Reasons of an imported image in a failure domain.
const (
	ImageReasonFetchFailed         = "FetchFailed"
	ImageReasonChecksumMismatch    = "ChecksumMismatch"
	ImageReasonFormatUnsupported   = "FormatUnsupported"
	ImageReasonFormatMismatch      = "FormatMismatch"
	ImageReasonInsufficientStorage = "InsufficientStorage"
	ImageReasonImportFailed        = "ImportFailed"
	ImageReasonInstallTimedOut     = "InstallTimedOut"
	ImageReasonImporting           = "Importing"
	ImageReasonInstalling          = "Installing"
	ImageReasonPending             = "Pending"
	ImageReasonReady               = "Ready"
	ImageReasonNotReady            = "NotReady"
)

// ImageFailureDomainStatus is an imported image in one failure domain.
type ImageFailureDomainStatus struct {
	// name of the failure domain.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// phase: Pending, Importing, Installing, Ready or Failed.
	Phase ImagePhase `json:"phase" protobuf:"bytes,2,opt,name=phase,casttype=ImagePhase"`
	// revision this entry is about (status.revision when current).
	// +optional
	Revision string `json:"revision,omitempty" protobuf:"bytes,3,opt,name=revision"`
	// ref is what was built, in the backend's terms (POOL/VOLUME, a
	// template's name).
	// +optional
	Ref string `json:"ref,omitempty" protobuf:"bytes,4,opt,name=ref"`
	// bytesDone of bytesTotal fetched (bytesTotal 0 when the server did
	// not say).
	// +optional
	BytesDone int64 `json:"bytesDone,omitempty" protobuf:"varint,5,opt,name=bytesDone"`
	// +optional
	BytesTotal int64 `json:"bytesTotal,omitempty" protobuf:"varint,6,opt,name=bytesTotal"`
	// reason in CamelCase when not Ready (FetchFailed, ChecksumMismatch,
	// FormatUnsupported, ImportFailed, InstallTimedOut).
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,7,opt,name=reason"`
	// message for humans.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,8,opt,name=message"`
	// previousRevisions were built in this failure domain before revision
	// and may still be there: written by the provider when the failure
	// domain moves to a new revision, each removed from the list once
	// what was built of it is deleted (no machine names it any more). The
	// provider keeps this record here, rather than asking each backend to
	// list what it holds, so that removal needs nothing of a backend but
	// DeleteImportedImage, and a restarted provider still knows.
	// +optional
	// +listType=set
	PreviousRevisions []string `json:"previousRevisions,omitempty" protobuf:"bytes,9,rep,name=previousRevisions"`
}

// Reasons a VMImage is not ready on a Provider.
const (
	ImageReasonTemplateNotFound = "TemplateNotFound"
	ImageReasonConnectFailed    = "ConnectFailed"
	ImageReasonLookupFailed     = "LookupFailed"
	ImageReasonNoVSphereSource  = "NoVSphereSource"
)

// ImageProviderStatus is the readiness of an image on one Provider.
type ImageProviderStatus struct {
	// provider is the Provider, as "namespace/name".
	Provider string `json:"provider" protobuf:"bytes,1,opt,name=provider"`
	// ready is true when the image can be used on that Provider.
	Ready bool `json:"ready" protobuf:"varint,2,opt,name=ready"`
	// reason is a CamelCase reason when not ready: TemplateNotFound,
	// ConnectFailed, LookupFailed or NoVSphereSource.
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,3,opt,name=reason"`
	// message is a human-readable explanation.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,4,opt,name=message"`
	// failureDomains report an imported image (spec.import) in each of
	// the Provider's failure domains; ready is true when all are Ready.
	// +optional
	// +listType=map
	// +listMapKey=name
	FailureDomains []ImageFailureDomainStatus `json:"failureDomains,omitempty" protobuf:"bytes,5,rep,name=failureDomains"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VMImageList is a list of VMImages.
type VMImageList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []VMImage `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// ---------------------------------------------------------------------------
// ProviderClass

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ProviderClass describes how the providers of one backend run when
// "banlieue operator" runs them: the image, where and how many, their
// resources and log level. A Provider names it in spec.providerClassRef;
// VMImage sources name it in providerClass. Cluster-scoped: platform
// administrators own it.
type ProviderClass struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec describes the backend's provider workloads.
	Spec ProviderClassSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
}

// ProviderDeploymentStrategy is how many provider workloads a class runs.
type ProviderDeploymentStrategy string

const (
	// ProviderDeploymentPerProvider runs one workload per Provider, whose
	// identity reads that Provider's credentials and no other's.
	ProviderDeploymentPerProvider ProviderDeploymentStrategy = "PerProvider"
	// ProviderDeploymentShared runs one workload for every Provider of
	// the class in the class's namespace (the static install's shape).
	ProviderDeploymentShared ProviderDeploymentStrategy = "Shared"
)

// ProviderClassSpec describes a backend's provider workloads.
type ProviderClassSpec struct {
	// backend is the provider banlieue runs ("banlieue provider BACKEND"):
	// vsphere, libvirt or proxmox. Today it must equal the class's name, which
	// Providers and VMImage sources use as the backend's name. Immutable.
	Backend string `json:"backend" protobuf:"bytes,1,opt,name=backend"`
	// image of the provider workloads: a banlieue release image.
	Image string `json:"image" protobuf:"bytes,2,opt,name=image"`
	// namespace the workloads run in; it must hold the Providers the
	// class serves. Defaults to banlieue-system.
	// +optional
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,3,opt,name=namespace"`
	// deploymentStrategy: PerProvider (default), one workload per
	// Provider with an identity limited to that Provider's credentials, or
	// Shared, one workload for every Provider of the class.
	// +optional
	DeploymentStrategy ProviderDeploymentStrategy `json:"deploymentStrategy,omitempty" protobuf:"bytes,4,opt,name=deploymentStrategy,casttype=ProviderDeploymentStrategy"`
	// replicas of each workload; replicas take turns through a Lease.
	// Defaults to 1.
	// +optional
	Replicas *int32 `json:"replicas,omitempty" protobuf:"varint,5,opt,name=replicas"`
	// resources of the provider container. Defaults to requests of 50m CPU
	// and 64Mi memory and a 512Mi memory limit.
	// +optional
	Resources *ProviderResources `json:"resources,omitempty" protobuf:"bytes,6,opt,name=resources"`
	// logLevel is the providers' klog verbosity (0-10). Defaults to 2.
	// +optional
	LogLevel *int32 `json:"logLevel,omitempty" protobuf:"varint,7,opt,name=logLevel"`
	// paused stops the operator from changing the class's workloads: they
	// keep running as they are, and new Providers get none until unpaused.
	// +optional
	Paused bool `json:"paused,omitempty" protobuf:"varint,8,opt,name=paused"`
}

// ProviderResources are the compute resources of a provider container:
// cpu and memory.
type ProviderResources struct {
	// requests the scheduler reserves.
	// +optional
	Requests map[string]resource.Quantity `json:"requests,omitempty" protobuf:"bytes,1,rep,name=requests"`
	// limits the container may not exceed.
	// +optional
	Limits map[string]resource.Quantity `json:"limits,omitempty" protobuf:"bytes,2,rep,name=limits"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ProviderClassList is a list of ProviderClasses.
type ProviderClassList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []ProviderClass `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// ---------------------------------------------------------------------------
// Provider

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// Provider declares one backend endpoint (today a vCenter) and the storage
// classes, network classes and features it offers to the scheduler.
type Provider struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec declares the backend and what it offers.
	Spec ProviderSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status reports connectivity and the discovered failure domains.
	// +optional
	Status ProviderStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// ProviderSpec declares a backend.
type ProviderSpec struct {
	// providerClassRef names the backend implementation: vsphere, libvirt
	// or proxmox.
	// Immutable.
	ProviderClassRef LocalObjectReference `json:"providerClassRef" protobuf:"bytes,1,opt,name=providerClassRef"`
	// connection tells the provider how to reach and authenticate to the backend.
	Connection ProviderConnection `json:"connection" protobuf:"bytes,2,opt,name=connection"`
	// capabilities is the explicit contract the scheduler matches a VMClass
	// against: every storage class, network class and feature a class asks
	// for must be listed here.
	// +optional
	Capabilities ProviderCapabilities `json:"capabilities,omitempty" protobuf:"bytes,3,opt,name=capabilities"`
	// failureDomainNameOverrides replace the auto-computed name
	// (<provider>-<datacenter>-<cluster> on vSphere, <provider>-<host> on
	// libvirt) of chosen failure domains. Override names must be unique.
	// +optional
	// +listType=atomic
	FailureDomainNameOverrides []FailureDomainNameOverride `json:"failureDomainNameOverrides,omitempty" protobuf:"bytes,4,rep,name=failureDomainNameOverrides"`
}

// ProviderConnection is how to reach a backend.
type ProviderConnection struct {
	// endpoint is the backend's URL: https://vcenter.example.com/sdk
	// (vsphere), qemu+tls://HOST/system or qemu+unix:///system?socket=PATH
	// (libvirt, one host). A libvirt Provider of several hosts gives hosts
	// instead.
	// +optional
	Endpoint string `json:"endpoint,omitempty" protobuf:"bytes,1,opt,name=endpoint"`
	// hosts are the hosts of a backend reached host by host (libvirt), each
	// a failure domain named after it; instead of endpoint. They share
	// credentialsRef and caBundle.
	// +optional
	// +listType=map
	// +listMapKey=name
	Hosts []ProviderHost `json:"hosts,omitempty" protobuf:"bytes,2,rep,name=hosts"`
	// credentialsRef names a Secret in the Provider's namespace holding the
	// backend's credentials: for vsphere the keys username and password; for
	// proxmox an API token, tokenID (USER@REALM!TOKENID) and tokenSecret; for
	// libvirt a TLS client certificate, tls.crt and tls.key (qemu+tls).
	CredentialsRef LocalObjectReference `json:"credentialsRef" protobuf:"bytes,3,opt,name=credentialsRef"`
	// insecureSkipTLSVerify disables TLS verification of the endpoint.
	// Self-signed test endpoints only; prefer caBundle. Cannot be combined
	// with caBundle.
	// +optional
	InsecureSkipTLSVerify bool `json:"insecureSkipTLSVerify,omitempty" protobuf:"varint,4,opt,name=insecureSkipTLSVerify"`
	// caBundle is the CA that signs the endpoint's certificate: exactly one of
	// inline, configMapRef or secretRef. The key of a reference defaults to ca.crt.
	// +optional
	CABundle *CABundleSource `json:"caBundle,omitempty" protobuf:"bytes,5,opt,name=caBundle"`
}

// ProviderHost is one host of a Provider and how to reach it.
type ProviderHost struct {
	// name of the host, as failure domains and overrides name it.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// endpoint of the host, as spec.connection.endpoint.
	Endpoint string `json:"endpoint" protobuf:"bytes,2,opt,name=endpoint"`
}

// CABundleSource gives PEM-encoded CA certificates. Exactly one field must be set.
type CABundleSource struct {
	// inline PEM-encoded certificates.
	// +optional
	Inline string `json:"inline,omitempty" protobuf:"bytes,1,opt,name=inline"`
	// configMapRef selects a key of a ConfigMap in the Provider's namespace.
	// The key defaults to ca.crt.
	// +optional
	ConfigMapRef *KeySelector `json:"configMapRef,omitempty" protobuf:"bytes,2,opt,name=configMapRef"`
	// secretRef selects a key of a Secret in the Provider's namespace. The key
	// defaults to ca.crt.
	// +optional
	SecretRef *KeySelector `json:"secretRef,omitempty" protobuf:"bytes,3,opt,name=secretRef"`
}

// ProviderCapabilities is what a Provider offers to the scheduler.
type ProviderCapabilities struct {
	// storageClasses map abstract storage classes to backend datastores.
	// +optional
	// +listType=map
	// +listMapKey=name
	StorageClasses []StorageClassCapability `json:"storageClasses,omitempty" protobuf:"bytes,1,rep,name=storageClasses"`
	// networkClasses map abstract network classes to backend port groups.
	// +optional
	// +listType=map
	// +listMapKey=name
	NetworkClasses []NetworkClassCapability `json:"networkClasses,omitempty" protobuf:"bytes,2,rep,name=networkClasses"`
	// features the backend supports, e.g. hotAddCPU, efiSecureBoot, vtpm.
	// Set by hand; never auto-discovered.
	// +optional
	// +listType=set
	Features []string `json:"features,omitempty" protobuf:"bytes,3,rep,name=features"`
	// maxSnapshotsPerVM bounds how many VirtualMachineSnapshots one VM on
	// this Provider may have; a snapshot beyond it is refused by name
	// before any backend call. Unset: the backend's own bound (vSphere
	// 32 in a chain), or none where the backend has none. It cannot
	// raise the backend's bound.
	// +optional
	MaxSnapshotsPerVM *int32 `json:"maxSnapshotsPerVM,omitempty" protobuf:"varint,4,opt,name=maxSnapshotsPerVM"`
}

// StorageClassCapability maps a storage class to a datastore.
type StorageClassCapability struct {
	// name of the storage class, as VMClass disks name it.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// target is the backend storage.
	Target StorageTarget `json:"target" protobuf:"bytes,2,opt,name=target"`
}

// StorageTarget is a backend storage location: exactly one field, the
// one the Provider's class uses.
type StorageTarget struct {
	// datastore is a vSphere datastore.
	// +optional
	Datastore string `json:"datastore,omitempty" protobuf:"bytes,1,opt,name=datastore"`
	// pool is a libvirt storage pool.
	// +optional
	Pool string `json:"pool,omitempty" protobuf:"bytes,2,opt,name=pool"`
	// storage is a Proxmox VE storage (local-lvm, a Ceph pool, ...), present
	// on the nodes that use it.
	// +optional
	Storage string `json:"storage,omitempty" protobuf:"bytes,3,opt,name=storage"`
}

// Name is the target's backend name, whatever its kind.
func (t StorageTarget) Name() string {
	switch {
	case t.Datastore != "":
		return t.Datastore
	case t.Pool != "":
		return t.Pool
	}
	return t.Storage
}

// NetworkClassCapability maps a network class to a port group.
type NetworkClassCapability struct {
	// name of the network class, as VMClass interfaces name it.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// target is the backend network.
	Target NetworkTarget `json:"target" protobuf:"bytes,2,opt,name=target"`
}

// NetworkTarget is a backend network: exactly one field, of those the
// Provider's class uses.
type NetworkTarget struct {
	// portGroup is a vSphere port group (standard or distributed).
	// +optional
	PortGroup string `json:"portGroup,omitempty" protobuf:"bytes,1,opt,name=portGroup"`
	// network is a libvirt network.
	// +optional
	Network string `json:"network,omitempty" protobuf:"bytes,2,opt,name=network"`
	// bridge is a host bridge: on libvirt, for networks libvirt does not
	// manage; on Proxmox VE, the node's Linux bridge (vmbr0).
	// +optional
	Bridge string `json:"bridge,omitempty" protobuf:"bytes,3,opt,name=bridge"`
	// vlan tags the interface's traffic on the bridge (Proxmox VE, a
	// VLAN-aware bridge), 1-4094.
	// +optional
	VLAN int32 `json:"vlan,omitempty" protobuf:"varint,4,opt,name=vlan"`
}

// Name is the target's backend name, whatever its kind.
func (t NetworkTarget) Name() string {
	switch {
	case t.PortGroup != "":
		return t.PortGroup
	case t.Network != "":
		return t.Network
	}
	return t.Bridge
}

// FailureDomainNameOverride gives one failure domain a chosen name: a
// (datacenter, cluster) pair on vSphere, a host on libvirt.
type FailureDomainNameOverride struct {
	// datacenter as named in the backend (vSphere).
	// +optional
	Datacenter string `json:"datacenter,omitempty" protobuf:"bytes,1,opt,name=datacenter"`
	// cluster (compute cluster) as named in the backend (vSphere).
	// +optional
	Cluster string `json:"cluster,omitempty" protobuf:"bytes,2,opt,name=cluster"`
	// host as the Provider names it (a libvirt host, a Proxmox VE node).
	// +optional
	Host string `json:"host,omitempty" protobuf:"bytes,3,opt,name=host"`
	// name to publish for this failure domain. Must be a DNS-1123 label.
	Name string `json:"name" protobuf:"bytes,4,opt,name=name"`
	// labels to publish with it (status.failureDomains[].labels), which a
	// VM's placement.failureDomainSelector matches; "name" is always the
	// name. controlPlane: "false" keeps Cluster API control planes out of
	// it (a VSphereCluster reports it controlPlane false).
	// +optional
	Labels map[string]string `json:"labels,omitempty" protobuf:"bytes,5,rep,name=labels"`
}

// Reasons of a Provider's Ready condition.
const (
	ProviderReady               = "Ready"
	ProviderReasonSecretMissing = "SecretMissing"
	ProviderReasonSecretInvalid = "SecretInvalid"
	// ProviderReasonSecretForbidden: the provider's identity may not read
	// a Secret or ConfigMap the Provider names (it reads them by name
	// only, as its Role grants).
	ProviderReasonSecretForbidden = "SecretForbidden"
	ProviderReasonConnectFailed   = "ConnectFailed"
	ProviderReasonInventoryFailed = "InventoryFailed"
)

// The OverridesApplied condition of a Provider with
// failureDomainNameOverrides: False (OverrideUnused) while one names a
// location the backend does not report, which would otherwise rename
// nothing, silently.
const (
	ProviderOverridesApplied     = "OverridesApplied"
	ProviderReasonOverridesUsed  = "AllUsed"
	ProviderReasonOverrideUnused = "OverrideUnused"
)

// ProviderStatus is the observed state of a Provider.
type ProviderStatus struct {
	// observedGeneration is the metadata.generation last reconciled.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty" protobuf:"varint,1,opt,name=observedGeneration"`
	// conditions: Ready, with reasons SecretMissing, SecretInvalid,
	// SecretForbidden, ConnectFailed or InventoryFailed when False; and,
	// with failureDomainNameOverrides, OverridesApplied (False,
	// OverrideUnused, naming each override that matches no location).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,2,rep,name=conditions"`
	// failureDomains found in the backend, one per (datacenter, cluster).
	// +optional
	// +listType=map
	// +listMapKey=name
	FailureDomains []FailureDomain `json:"failureDomains,omitempty" protobuf:"bytes,3,rep,name=failureDomains"`
	// workload is the provider workload "banlieue operator" runs for this
	// Provider, or why it runs none. Written by the operator only.
	// +optional
	Workload *ProviderWorkload `json:"workload,omitempty" protobuf:"bytes,4,opt,name=workload"`
	// console is where the process serving this Provider streams its VMs'
	// serial consoles (virtualmachines/NAME/console); empty when none does.
	// Written by that process's leader.
	// +optional
	Console *ProviderConsole `json:"console,omitempty" protobuf:"bytes,5,opt,name=console"`
	// snapshots is what VirtualMachineSnapshots of VMs on this Provider
	// can be, as the process serving it answers for its backend; unset
	// when the backend takes no snapshots.
	// +optional
	Snapshots *ProviderSnapshots `json:"snapshots,omitempty" protobuf:"bytes,6,opt,name=snapshots"`
}

// ProviderSnapshots is what a Provider's backend snapshots can do.
type ProviderSnapshots struct {
	// maxPerVM is the bound in force on one VM's snapshots: the tighter
	// of spec.capabilities.maxSnapshotsPerVM and the backend's own; unset
	// when neither bounds them.
	// +optional
	MaxPerVM *int32 `json:"maxPerVM,omitempty" protobuf:"bytes,1,opt,name=maxPerVM"`
	// backendMaxPerVM is the backend's own bound (vSphere: 32); unset
	// when it has none.
	// +optional
	BackendMaxPerVM *int32 `json:"backendMaxPerVM,omitempty" protobuf:"bytes,2,opt,name=backendMaxPerVM"`
	// memory: a snapshot may keep a running VM's memory (includeMemory).
	Memory bool `json:"memory" protobuf:"varint,3,opt,name=memory"`
}

// ProviderConsole is the console endpoint of the process serving a
// Provider (its leader).
type ProviderConsole struct {
	// endpoint is the HTTPS URL the API server connects to.
	Endpoint string `json:"endpoint" protobuf:"bytes,1,opt,name=endpoint"`
	// certificateSHA256 is the hex SHA-256 of the endpoint's certificate
	// (DER): the API server accepts no other, so a stale endpoint of a
	// replica that lost its leadership is refused.
	CertificateSHA256 string `json:"certificateSHA256" protobuf:"bytes,2,opt,name=certificateSHA256"`
	// holder is the process that published it (its pod or host name).
	// +optional
	Holder string `json:"holder,omitempty" protobuf:"bytes,3,opt,name=holder"`
}

// VirtualMachineConsoleOptions are the query parameters of
// virtualmachines/NAME/console.
// +k8s:conversion-gen:explicit-from=net/url.Values
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
type VirtualMachineConsoleOptions struct {
	metav1.TypeMeta `json:",inline"`

	// takeover closes another session on the console and attaches.
	// +optional
	Takeover bool `json:"takeover,omitempty" protobuf:"varint,1,opt,name=takeover"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineWebConsole is what virtualmachines/NAME/webconsole takes
// (spec) and answers (status): a one-time web console URL, for backends
// with no serial console (vSphere's WebMKS), encrypted with the
// requester's key so that only the requester reads it. Nothing is
// stored; each POST asks the backend for a new ticket.
type VirtualMachineWebConsole struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the VirtualMachine's name and namespace.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec is the request.
	Spec VirtualMachineWebConsoleSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status is the answer.
	// +optional
	Status VirtualMachineWebConsoleStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// VirtualMachineWebConsoleSpec is a web console request.
type VirtualMachineWebConsoleSpec struct {
	// publicKey is the requester's RSA public key, PEM ("RSA PUBLIC KEY",
	// PKCS #1, as vm-operator's WebConsoleRequest takes it, or "PUBLIC
	// KEY", PKIX): the URL is encrypted with it.
	PublicKey string `json:"publicKey" protobuf:"bytes,1,opt,name=publicKey"`
}

// VirtualMachineWebConsoleStatus is a web console answer.
type VirtualMachineWebConsoleStatus struct {
	// url is the web console URL (vSphere: wss://HOST:PORT/ticket/TICKET),
	// encrypted with spec.publicKey: RSA-OAEP with SHA-512, no label,
	// base64 (standard encoding).
	URL string `json:"url" protobuf:"bytes,1,opt,name=url"`
	// expiresAt is when the URL stops being accepted; it is accepted once.
	ExpiresAt metav1.Time `json:"expiresAt" protobuf:"bytes,2,opt,name=expiresAt"`
}

// ProviderWorkload is the Deployment serving a Provider.
type ProviderWorkload struct {
	// namespace of the Deployment.
	// +optional
	Namespace string `json:"namespace,omitempty" protobuf:"bytes,1,opt,name=namespace"`
	// deploymentName is the Deployment's name.
	// +optional
	DeploymentName string `json:"deploymentName,omitempty" protobuf:"bytes,2,opt,name=deploymentName"`
	// readyReplicas of the Deployment.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas,omitempty" protobuf:"varint,3,opt,name=readyReplicas"`
	// reason, in CamelCase, when no workload runs or it is not ready:
	// ProviderClassNotFound, ProviderClassPaused, NamespaceNotServed,
	// Progressing; Available when ready.
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,4,opt,name=reason"`
	// message explains reason to a human.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,5,opt,name=message"`
}

// FailureDomain is one (datacenter, cluster) pair of a Provider.
type FailureDomain struct {
	// name is the resolved name (override or auto-computed).
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// datacenter in the backend (vSphere).
	// +optional
	Datacenter string `json:"datacenter,omitempty" protobuf:"bytes,2,opt,name=datacenter"`
	// cluster in the backend (vSphere).
	// +optional
	Cluster string `json:"cluster,omitempty" protobuf:"bytes,3,opt,name=cluster"`
	// host of the backend (a libvirt host, a Proxmox VE node).
	// +optional
	Host string `json:"host,omitempty" protobuf:"bytes,4,opt,name=host"`
	// labels a VM's placement.failureDomainSelector matches; always include "name".
	// +optional
	Labels map[string]string `json:"labels,omitempty" protobuf:"bytes,5,rep,name=labels"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// ProviderList is a list of Providers.
type ProviderList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []Provider `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// ---------------------------------------------------------------------------
// VirtualMachinePlacement (the read-only "placement" subresource)

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachinePlacement explains where a VirtualMachine can run: the
// scheduler's own placement logic run as a dry run, with a verdict for every
// candidate Provider and failure domain. Served read-only at
// .../virtualmachines/NAME/placement; it answers "why is my VM not
// scheduled?" in one call.
type VirtualMachinePlacement struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the VirtualMachine's metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// result is the dry-run decision.
	Result PlacementResult `json:"result" protobuf:"bytes,2,opt,name=result"`
}

// PlacementResult is a placement decision and its reasons.
type PlacementResult struct {
	// fits is true when some Provider and failure domain can run the VM.
	Fits bool `json:"fits" protobuf:"varint,1,opt,name=fits"`
	// reason is Scheduled, or why not: NoProviderMatched, TpmUnsupported,
	// ImageNotReady, ClassNotFound, ImageNotFound, InvalidOverrides,
	// ImageClassMismatch (a tpmEnabled class needs an image with
	// template.installMode deferred; a template's firmware family must be
	// the class's).
	Reason string `json:"reason" protobuf:"bytes,2,opt,name=reason"`
	// message explains the reason.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,3,opt,name=message"`
	// choice is where the scheduler would place the VM now.
	// +optional
	Choice *ScheduledPlacement `json:"choice,omitempty" protobuf:"bytes,4,opt,name=choice"`
	// current is where the VM is scheduled, if it is.
	// +optional
	Current *ScheduledPlacement `json:"current,omitempty" protobuf:"bytes,5,opt,name=current"`
	// providers explains every candidate Provider.
	// +optional
	// +listType=map
	// +listMapKey=provider
	Providers []ProviderPlacement `json:"providers,omitempty" protobuf:"bytes,6,rep,name=providers"`
}

// ProviderPlacement is the verdict on one Provider.
type ProviderPlacement struct {
	// provider is the Provider's name (namespace/name outside the VM's namespace).
	Provider string `json:"provider" protobuf:"bytes,1,opt,name=provider"`
	// fits is true when at least one of its failure domains can run the VM.
	Fits bool `json:"fits" protobuf:"varint,2,opt,name=fits"`
	// reason is why not, when it does not fit.
	// +optional
	Reason string `json:"reason,omitempty" protobuf:"bytes,3,opt,name=reason"`
	// message names the label, class, feature or image readiness that failed.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,4,opt,name=message"`
	// failureDomains explains each failure domain, when the Provider got that far.
	// +optional
	// +listType=map
	// +listMapKey=name
	FailureDomains []FailureDomainPlacement `json:"failureDomains,omitempty" protobuf:"bytes,5,rep,name=failureDomains"`
}

// FailureDomainPlacement is the verdict on one failure domain.
type FailureDomainPlacement struct {
	// name of the failure domain.
	Name string `json:"name" protobuf:"bytes,1,opt,name=name"`
	// fits is true when the failure domain matches the VM's failureDomainSelector.
	Fits bool `json:"fits" protobuf:"varint,2,opt,name=fits"`
	// load is the number of VMs already placed there.
	Load int32 `json:"load" protobuf:"varint,3,opt,name=load"`
	// message explains a mismatch.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,4,opt,name=message"`
}
