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
	"k8s.io/apimachinery/pkg/types"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineSnapshot is a point-in-time copy of a VirtualMachine's
// disks (and, when asked, of its running memory), taken by the backend the
// VM runs on. Deleting it removes the backend snapshot; deleting the VM
// deletes its snapshots.
type VirtualMachineSnapshot struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec says which VM to snapshot. Immutable.
	Spec VirtualMachineSnapshotSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status is written by banlieue's snapshot controller.
	// +optional
	Status VirtualMachineSnapshotStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// VirtualMachineSnapshotSpec is what to snapshot.
type VirtualMachineSnapshotSpec struct {
	// vmName names the VirtualMachine, in this namespace, to snapshot. It
	// must exist and be built (status.infrastructureRef set).
	VMName string `json:"vmName" protobuf:"bytes,1,opt,name=vmName"`
	// includeMemory keeps the running VM's memory and device state, so a
	// restore resumes it where it was. Without it a restore leaves the VM
	// on the snapshot's disks and boots it again as its
	// desiredPowerState says. Refused on a Provider whose backend cannot
	// keep memory; a powered-off VM has none to keep.
	// +optional
	IncludeMemory bool `json:"includeMemory,omitempty" protobuf:"varint,2,opt,name=includeMemory"`
}

// The Ready condition of a VirtualMachineSnapshot and its reasons.
const (
	// SnapshotReady: the backend holds the snapshot and a restore may
	// use it.
	SnapshotReady = "Ready"

	// SnapshotReasonPending: waiting for the VM's machine to be built.
	SnapshotReasonPending = "Pending"
	// SnapshotReasonCreating: the backend is taking it.
	SnapshotReasonCreating = "Creating"
	// SnapshotReasonReady: taken.
	SnapshotReasonReady = "Ready"
	// SnapshotReasonFailed: the backend refused or failed; the message
	// says why. Delete the object and take another.
	SnapshotReasonFailed = "Failed"
	// SnapshotReasonStale: the VM was recreated since (a migration): the
	// machine the snapshot was taken of is gone, and its backend
	// snapshot with it.
	SnapshotReasonStale = "Stale"
	// SnapshotReasonLimitReached: the VM has as many snapshots as its
	// Provider allows; nothing was asked of the backend.
	SnapshotReasonLimitReached = "LimitReached"
	// SnapshotReasonUnsupported: the VM's backend takes no snapshots, or
	// not with memory.
	SnapshotReasonUnsupported = "Unsupported"
	// SnapshotReasonDeleting: the backend snapshot is being removed.
	SnapshotReasonDeleting = "Deleting"
)

// SnapshotFinalizer holds a VirtualMachineSnapshot until its backend
// snapshot is removed.
const SnapshotFinalizer = "banlieue.io/snapshot"

// VirtualMachineSnapshotStatus is the snapshot as the backend holds it.
type VirtualMachineSnapshotStatus struct {
	// readyToUse is true once the backend holds the snapshot and the VM
	// still runs on the machine it was taken of.
	// +optional
	ReadyToUse bool `json:"readyToUse,omitempty" protobuf:"varint,1,opt,name=readyToUse"`
	// creationTime is when the backend took it.
	// +optional
	CreationTime *metav1.Time `json:"creationTime,omitempty" protobuf:"bytes,2,opt,name=creationTime"`
	// machine is the VM's infrastructure object the snapshot was taken
	// of, and sourceUID its UID: a VM recreated since (migrated) runs on
	// another, and the snapshot is Stale.
	// +optional
	Machine *InfrastructureReference `json:"machine,omitempty" protobuf:"bytes,3,opt,name=machine"`
	// +optional
	SourceUID types.UID `json:"sourceUID,omitempty" protobuf:"bytes,4,opt,name=sourceUID,casttype=k8s.io/apimachinery/pkg/types.UID"`
	// provider is the Provider ("namespace/name") whose backend holds it.
	// +optional
	Provider string `json:"provider,omitempty" protobuf:"bytes,5,opt,name=provider"`
	// backendName is the snapshot's name in the backend, made from this
	// object's UID: a provider that resumes after a crash finds it by
	// this name instead of taking a second one.
	// +optional
	BackendName string `json:"backendName,omitempty" protobuf:"bytes,6,opt,name=backendName"`
	// backendRef is the backend's own reference to it (a vSphere snapshot
	// MoRef; the name on libvirt and Proxmox VE).
	// +optional
	BackendRef string `json:"backendRef,omitempty" protobuf:"bytes,7,opt,name=backendRef"`
	// memory is true when the snapshot holds the VM's running memory.
	// +optional
	Memory bool `json:"memory,omitempty" protobuf:"varint,8,opt,name=memory"`
	// conditions: Ready, with the reasons Pending, Creating, Ready,
	// Failed, Stale, LimitReached, Unsupported and Deleting.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,9,rep,name=conditions"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineSnapshotList is a list of VirtualMachineSnapshots.
type VirtualMachineSnapshotList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []VirtualMachineSnapshot `json:"items" protobuf:"bytes,2,rep,name=items"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineRestore returns a VirtualMachine to one of its snapshots:
// an action, acted on once and kept as its record.
type VirtualMachineRestore struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`

	// spec names the VM and the snapshot. Immutable.
	Spec VirtualMachineRestoreSpec `json:"spec" protobuf:"bytes,2,opt,name=spec"`
	// status is written by banlieue's snapshot controller.
	// +optional
	Status VirtualMachineRestoreStatus `json:"status,omitempty" protobuf:"bytes,3,opt,name=status"`
}

// VirtualMachineRestoreSpec is what to restore.
type VirtualMachineRestoreSpec struct {
	// vmName names the VirtualMachine, in this namespace, to restore.
	VMName string `json:"vmName" protobuf:"bytes,1,opt,name=vmName"`
	// snapshotName names a VirtualMachineSnapshot of that VM, in this
	// namespace, that is readyToUse.
	SnapshotName string `json:"snapshotName" protobuf:"bytes,2,opt,name=snapshotName"`
}

// RestorePhase is how far a restore went.
// +enum
type RestorePhase string

const (
	// RestorePending: waiting for the provider (or for an earlier restore
	// of the same VM to finish).
	RestorePending RestorePhase = "Pending"
	// RestorePoweringOff: the backend reverts only a stopped VM; the
	// provider is powering it off first.
	RestorePoweringOff RestorePhase = "PoweringOff"
	// RestoreRestoring: the backend is reverting the VM.
	RestoreRestoring RestorePhase = "Restoring"
	// RestoreDone: the VM is back at the snapshot.
	RestoreDone RestorePhase = "Done"
	// RestoreFailed: the backend refused or failed, or the snapshot went
	// (deleted, Stale); the message says why.
	RestoreFailed RestorePhase = "Failed"
	// RestoreUnknown: the provider stopped while the backend was asked
	// and found no task to follow; it does not ask again.
	RestoreUnknown RestorePhase = "Unknown"
)

// RestoreComplete is the VirtualMachineRestore's condition: True once
// Done, False with the phase as reason otherwise.
const RestoreComplete = "Complete"

// VirtualMachineRestoreStatus is the restore as it went.
type VirtualMachineRestoreStatus struct {
	// phase is Pending, PoweringOff, Restoring, Done, Failed or Unknown.
	// +optional
	Phase RestorePhase `json:"phase,omitempty" protobuf:"bytes,1,opt,name=phase,casttype=RestorePhase"`
	// message says what happens or why it failed.
	// +optional
	Message string `json:"message,omitempty" protobuf:"bytes,2,opt,name=message"`
	// startTime is when the provider took it up; restoreTime when it was
	// done.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty" protobuf:"bytes,3,opt,name=startTime"`
	// +optional
	RestoreTime *metav1.Time `json:"restoreTime,omitempty" protobuf:"bytes,4,opt,name=restoreTime"`
	// conditions: Complete.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty" protobuf:"bytes,5,rep,name=conditions"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object

// VirtualMachineRestoreList is a list of VirtualMachineRestores.
type VirtualMachineRestoreList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty" protobuf:"bytes,1,opt,name=metadata"`
	Items           []VirtualMachineRestore `json:"items" protobuf:"bytes,2,rep,name=items"`
}
