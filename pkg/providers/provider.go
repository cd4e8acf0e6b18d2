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

// Package providers is the one interface every backend (vSphere today,
// Proxmox and libvirt next) implements. Controllers talk to backends only
// through it; only a backend's own package imports its SDK.
package providers

import (
	"context"
	"errors"

	"github.com/firestoned/banlieue/pkg/failuredomain"
)

// Credentials log a provider in. They come from the Provider's Secret and
// are never logged or stored elsewhere.
type Credentials struct {
	Username string
	Password string
}

// Connection says how to reach a backend.
type Connection struct {
	// Endpoint is the backend's https URL.
	Endpoint string
	// CABundle (PEM) verifies the endpoint; InsecureSkipTLSVerify skips that.
	CABundle              []byte
	InsecureSkipTLSVerify bool
	Credentials           Credentials
	// CredentialsVersion changes whenever the credentials may have (the
	// Secret's resourceVersion); a cached session is dropped when it does.
	CredentialsVersion string
}

// Backend is one logged-in backend endpoint.
type Backend interface {
	// Inventory lists the (datacenter, compute cluster) pairs VMs can run in.
	Inventory(ctx context.Context) ([]failuredomain.Pair, error)
	// TemplateExists tells whether a VM template of that name exists in the
	// datacenter.
	TemplateExists(ctx context.Context, datacenter, template string) (bool, error)
	Machines
}

// ErrConnect wraps failures to reach or log in to a backend (bad
// endpoint, TLS, credentials): the Provider's ConnectFailed reason.
var ErrConnect = errors.New("connect failed")

// MachineSpec is what a backend needs to build and run one VM.
type MachineSpec struct {
	// Name of the VM in the backend; unique per datacenter, so that a
	// repeated create finds the VM instead of making a second one.
	Name       string
	Datacenter string
	Cluster    string
	Template   string
	CPUs       int32
	MemoryMiB  int64
	// Datastore for the clone (the first disk's); the template's when empty.
	Datastore string
	// NICs are the network adapters in order; a static one is applied by
	// guest customization at clone time.
	NICs []NIC
	// DiskSizesGiB are the disks in order, the first being the template's
	// boot disk: disks are grown to these sizes and missing ones added
	// (never shrunk or removed).
	DiskSizesGiB []int64
	// PowerState is PoweredOn, PoweredOff or Suspended.
	PowerState string
}

// NIC is one network adapter's addressing.
type NIC struct {
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
	BIOSUUID     string
	InstanceUUID string
	PowerState   string
	IPAddress    string
	CPUs         int32
	MemoryMiB    int64
	// DiskSizesGiB are the VM's disks, in device order.
	DiskSizesGiB []int64
}

// Machines is the VM lifecycle of a backend.
type Machines interface {
	// EnsureMachine creates the VM if it does not exist (idempotently, by
	// name) and drives it to spec.PowerState.
	EnsureMachine(ctx context.Context, spec MachineSpec) (MachineStatus, error)
	// DeleteMachine powers the VM off and destroys it; a missing VM is fine.
	DeleteMachine(ctx context.Context, datacenter, name string) error
}
