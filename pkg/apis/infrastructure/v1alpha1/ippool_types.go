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

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// IPPoolKind is the kind an IPAddressClaim's poolRef names for banlieue's
// own in-cluster pools.
const IPPoolKind = "IPPool"

// IPPoolSpec is the addresses a pool hands out and their network.
// +kubebuilder:validation:XValidation:rule="size(self.addresses) > 0",message="a pool needs addresses"
type IPPoolSpec struct {
	// addresses the pool hands out: CIDRs ("192.0.2.0/28": its usable
	// addresses, without the network and broadcast ones for IPv4), ranges
	// ("192.0.2.10-192.0.2.20") or single addresses.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=96
	Addresses []string `json:"addresses"`
	// prefix is the network prefix length every address gets.
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=128
	Prefix int32 `json:"prefix"`
	// gateway of the network; never handed out.
	// +optional
	// +kubebuilder:validation:MaxLength=39
	Gateway string `json:"gateway,omitempty"`
	// excludedAddresses are never handed out: addresses, ranges or CIDRs.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=96
	ExcludedAddresses []string `json:"excludedAddresses,omitempty"`
	// allowedNamespaces are the namespaces whose IPAddressClaims the pool
	// serves; a claim from any other gets Ready=False, reason
	// NamespaceNotAllowed. Unset or empty: every namespace may claim (the
	// pool is cluster-scoped and was open to all before this field).
	// Narrowing the list refuses new claims only: an address already handed
	// out stays with its claim.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=63
	AllowedNamespaces []string `json:"allowedNamespaces,omitempty"`
}

// IPPoolStatus counts the pool's addresses.
type IPPoolStatus struct {
	// total addresses the pool can hand out.
	// +optional
	Total int `json:"total,omitempty"`
	// used addresses (an IPAddressReservation exists for each).
	// +optional
	Used int `json:"used,omitempty"`
	// free addresses.
	// +optional
	Free int `json:"free,omitempty"`
	// conditions: Ready (the spec parses), Exhausted (a claim found no
	// free address).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=ippools,scope=Cluster,categories=banlieue-infra
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 213",message="an IPPool's name has at most 213 characters (its IPAddressReservations are named POOL.ADDRESS)"
// +kubebuilder:printcolumn:name="Prefix",type=integer,JSONPath=`.spec.prefix`
// +kubebuilder:printcolumn:name="Gateway",type=string,JSONPath=`.spec.gateway`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Free",type=integer,JSONPath=`.status.free`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// IPPool is banlieue's in-cluster pool for Cluster API's IPAM contract: an
// IPAddressClaim (ipam.cluster.x-k8s.io) whose poolRef names it gets an
// IPAddress from it, and gives it back when deleted. Cluster-scoped: VMs
// of the namespaces spec.allowedNamespaces lists (all when unset) draw from
// it. Each address handed out is held by an IPAddressReservation named
// after the pool and the address, so no address is handed out twice.
type IPPool struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the pool.
	Spec IPPoolSpec `json:"spec"`
	// status counts its addresses.
	// +optional
	Status IPPoolStatus `json:"status,omitempty"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// IPPoolList is a list of IPPools.
type IPPoolList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPPool `json:"items"`
}
