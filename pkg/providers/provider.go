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

// Package providers is the one interface every backend (vSphere, libvirt;
// Proxmox next) implements. Controllers talk to backends only
// through it; only a backend's own package imports its SDK.
package providers

import (
	"context"
	"errors"
	"strings"
	"time"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// Credentials log a provider in. They come from the Provider's Secret and
// are never logged or stored elsewhere. Which fields a class uses is its
// own: username and password (vSphere), a TLS client certificate (libvirt).
type Credentials struct {
	Username string
	Password string
	// ClientCertificate and ClientKey (PEM) authenticate over TLS.
	ClientCertificate []byte
	ClientKey         []byte
	// ConsoleUsername and ConsolePassword are an account the serial
	// console logs in with where the API credentials cannot open it
	// (Proxmox VE's termproxy refuses API tokens); empty when none is set.
	ConsoleUsername string
	ConsolePassword string
}

// Connection says how to reach a backend.
type Connection struct {
	// Endpoint is the backend's URL (https://…/sdk, qemu+tls://HOST/system).
	Endpoint string
	// CABundle (PEM) verifies the endpoint; InsecureSkipTLSVerify skips that.
	CABundle              []byte
	InsecureSkipTLSVerify bool
	Credentials           Credentials
	// Hosts, instead of Endpoint, are the hosts of a backend reached host
	// by host (libvirt), each a location named after it.
	Hosts []Host
	// CredentialsVersion changes whenever the credentials may have (the
	// Secret's resourceVersion); a cached session is dropped when it does.
	CredentialsVersion string
}

// Host is one host of a Connection.
type Host struct {
	Name, Endpoint string
}

// Backend is one logged-in backend endpoint.
type Backend interface {
	// Inventory lists the locations VMs can run in: (datacenter, compute
	// cluster) pairs on vSphere, hosts on libvirt. The Provider publishes
	// one failure domain per location.
	Inventory(ctx context.Context) ([]failuredomain.Location, error)
	// ImageExists tells whether the image source ref (a template name, a
	// POOL/VOLUME) exists where location can use it.
	ImageExists(ctx context.Context, location failuredomain.Location, ref string) (bool, error)
	Machines
}

// ErrConnect wraps failures to reach or log in to a backend (bad
// endpoint, TLS, credentials): the Provider's ConnectFailed reason.
var ErrConnect = errors.New("connect failed")

// ErrUserDataNeeded is EnsureMachine's answer to a spec with
// UserDataOmitted when the VM has to be built (it went missing): the
// caller reads the user data and calls again.
var ErrUserDataNeeded = errors.New("the VM must be built and its user data was not read")

// MachineSpec is what a backend needs to build and run one VM, in terms
// every backend shares.
type MachineSpec struct {
	// Name of the VM in the backend (BackendName): unique across namespaces.
	Name string
	// HostName is the guest's host name: the machine's spec.hostName, or
	// HostName of the object's name when it has none.
	HostName string
	// InstanceUUID is the VM's identity, derived from the Kubernetes
	// object's UID: a create repeated after a crash finds the VM by it
	// instead of making a second one, and a VM of an earlier object that
	// had the same name is never mistaken for this one.
	InstanceUUID string
	// Location is the failure domain's place in the backend.
	Location failuredomain.Location
	// Options are settings only one backend knows, from its machine's spec
	// (vSphere: resourcePool, folder); empty means the backend's default.
	Options map[string]string
	// Image is the image source's ref: a template, a POOL/VOLUME.
	Image string
	// ImageIsInstaller: the image is an installer medium the guest installs
	// from at first boot (installMode deferred) where the backend tells the
	// two apart (libvirt); a vSphere template carries its own installer.
	ImageIsInstaller bool
	CPUs             int32
	MemoryMiB        int64
	// Disks in order, the first being the image's boot disk: disks are
	// grown to these sizes and missing ones added (never shrunk or removed).
	Disks []Disk
	// NICs are the network adapters in order.
	NICs []NIC
	// Firmware is bios, efi or efi-secure; the image's when empty.
	Firmware string
	// TPM adds a virtual TPM at creation.
	TPM bool
	// GuestOS is the operating system of the image, told to the backend
	// its own way (vSphere guestId, Proxmox VE ostype, libosinfo metadata
	// on libvirt); nil keeps the template's.
	GuestOS *infrav1.GuestOS
	// Architecture is the CPU architecture of the image; the backend's own
	// when empty.
	Architecture infrav1.Architecture
	// UserData is the first-boot payload, handed to the guest at creation
	// the way UserDataFormat says; nil for none.
	UserData []byte
	// UserDataFormat is UserDataCloudConfig (also when empty) or
	// UserDataIgnition.
	UserDataFormat string
	// UserDataOmitted: the VM was built already, so the caller did not
	// read its user data (UserData is nil, not empty). A backend that finds
	// it must build the VM after all returns ErrUserDataNeeded instead of
	// building it without; one that keeps first-boot data for an existing
	// VM leaves it as it is.
	UserDataOmitted bool
	// PowerState is PoweredOn, PoweredOff or Suspended (memory saved to
	// disk, the VM not running), reached as package power decides.
	PowerState infrav1.PowerState
	// PowerOffMode is how PoweredOff is reached; TrySoft when empty.
	PowerOffMode infrav1.PowerOffMode
	// PowerOffGrace is how long TrySoft waits for the guest; the
	// backend's default when zero.
	PowerOffGrace time.Duration
	// SoftPowerOffTime is when the guest was asked to shut down for the
	// power-off in progress (the machine's status.softPowerOffTime); zero
	// for none.
	SoftPowerOffTime time.Time
	// RecordSoftPowerOff persists the time of a guest shutdown request
	// before it is sent, so a restarted provider counts the grace period
	// from the first request; nil records nothing.
	RecordSoftPowerOff func(ctx context.Context, at time.Time) error
	// TaskRef is a task an earlier, interrupted call started (what a
	// TaskRecorder was given): it is waited for before anything else.
	TaskRef string
}

// The formats of user data (Cluster API's bootstrap "format" values).
const (
	UserDataCloudConfig = "cloud-config"
	UserDataIgnition    = "ignition"
)

// Ignition tells whether the user data is an Ignition config.
func (s MachineSpec) Ignition() bool { return s.UserDataFormat == UserDataIgnition }

// Disk is one virtual disk.
type Disk struct {
	Name    string
	SizeGiB int64
	// Provisioning is thin, thick or eagerZeroed; the backend's default when empty.
	Provisioning string
	// Target is the storage (datastore, pool) from the Provider's
	// capabilities; the image's when empty.
	Target string
}

// BootTarget returns the storage target of the first disk: where a
// clone of the image goes.
func (s MachineSpec) BootTarget() string {
	if len(s.Disks) == 0 {
		return ""
	}
	return s.Disks[0].Target
}

// DiskSizesGiB are the disks' sizes in order.
func (s MachineSpec) DiskSizesGiB() []int64 {
	out := make([]int64, 0, len(s.Disks))
	for _, d := range s.Disks {
		out = append(out, d.SizeGiB)
	}
	return out
}

// TaskRecorder persists the reference of a backend task before the caller
// waits for it, so that a process killed while waiting resumes the task
// instead of starting another. The record stays until the next task
// replaces it or the caller clears it once the call returns.
type TaskRecorder func(ctx context.Context, taskRef string) error

// NIC is one network adapter.
type NIC struct {
	// Name is the interface's name in the guest (eth0), set by cloud-init.
	Name string
	// Network is the backend network (a vSphere port group, a libvirt
	// network) to connect to; the image's when empty.
	Network string
	// Bridge, instead of Network, is a host bridge (libvirt, Proxmox VE).
	Bridge string
	// VLAN tags the interface's traffic on Bridge (Proxmox VE); 0 for none.
	VLAN int32
	// MAC is a fixed hardware address; the backend's choice when empty.
	MAC string
	// Static, when set, is the address; DHCP otherwise.
	Static *StaticIP
}

// StaticIP is a fixed IPv4 configuration.
type StaticIP struct {
	Address     string
	Prefix      int32
	Gateway     string
	Nameservers []string
}

// MachineStatus is what a backend observed of one VM.
type MachineStatus struct {
	// Created is true when this call created the VM.
	Created      bool
	BIOSUUID     string
	InstanceUUID string
	PowerState   infrav1.PowerState
	IPAddress    string
	// ProviderID is the Cluster API providerID once the VM exists
	// (vsphere://BIOS-UUID, libvirt://DOMAIN-UUID).
	ProviderID string
	CPUs       int32
	MemoryMiB  int64
	// DiskSizesGiB are the VM's disks, in device order.
	DiskSizesGiB []int64
	// Networks are the networks of the VM's NICs, in device order.
	Networks []string
	// MACAddresses of the VM's NICs, in device order.
	MACAddresses []string
	// Firmware is bios, efi or efi-secure; TPM tells whether a vTPM is attached.
	Firmware string
	TPM      bool
	// Restarting: the VM is being restarted to apply its spec (CPUs or
	// memory the backend applies at start); look again soon.
	Restarting bool
	// Handle is the backend's own name of the VM where it has one besides
	// its UUID (Proxmox VE: NODE/VMID).
	Handle string
}

// GuestAddressReader is implemented by backends that read a running VM's
// guest address for less than EnsureMachine spends converging it. While a
// converged, powered-on VM waits for its guest to report an address, the
// machine reconciler asks only this.
type GuestAddressReader interface {
	// GuestAddress is the address the guest reports ("" for none yet);
	// steady is false when the VM is missing or not in spec.PowerState,
	// and EnsureMachine must act instead.
	GuestAddress(ctx context.Context, spec MachineSpec) (address string, steady bool, err error)
}

// Machines is the VM lifecycle of a backend.
type Machines interface {
	// EnsureMachine creates the VM if it does not exist (idempotently, by
	// instance UUID), applies the spec's hardware and networks and drives it
	// to spec.PowerState. record is called with each task that must not be
	// repeated before it is waited for.
	EnsureMachine(ctx context.Context, spec MachineSpec, record TaskRecorder) (MachineStatus, error)
	// DeleteMachine powers the VM off and destroys it; a missing VM is fine.
	DeleteMachine(ctx context.Context, spec MachineSpec, record TaskRecorder) error
}

// DegradedError is Inventory's answer when some of a backend's hosts
// could not be reached: the locations returned with it are complete, and
// the Provider stays Ready, naming the unreachable hosts.
type DegradedError struct {
	// Unreachable says, host by host, what failed (no credentials).
	Unreachable []string
}

func (e *DegradedError) Error() string {
	return "unreachable: " + strings.Join(e.Unreachable, "; ")
}
