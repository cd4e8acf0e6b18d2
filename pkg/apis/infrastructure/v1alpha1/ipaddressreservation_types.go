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
	"fmt"
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
)

// IPAddressReservationKind is the kind that holds one address of an IPPool.
const IPAddressReservationKind = "IPAddressReservation"

// ReservationClaim is the IPAddressClaim an address is reserved for.
type ReservationClaim struct {
	// namespace of the claim.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the claim.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// uid of the claim: a claim deleted and created again under its name
	// is another claim, and does not inherit the address.
	UID types.UID `json:"uid"`
}

// IPAddressReservationSpec is the address reserved and for which claim.
// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="a reservation is never moved: delete it and reserve again"
type IPAddressReservationSpec struct {
	// pool is the IPPool the address belongs to.
	// +kubebuilder:validation:MaxLength=253
	Pool string `json:"pool"`
	// address reserved, as the IPAddress gets it.
	// +kubebuilder:validation:MaxLength=39
	Address string `json:"address"`
	// claim is the IPAddressClaim the address is reserved for.
	Claim ReservationClaim `json:"claim"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=ipaddressreservations,scope=Cluster,categories=banlieue-infra
// +kubebuilder:printcolumn:name="Pool",type=string,JSONPath=`.spec.pool`
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="Claim-Namespace",type=string,JSONPath=`.spec.claim.namespace`
// +kubebuilder:printcolumn:name="Claim",type=string,JSONPath=`.spec.claim.name`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// IPAddressReservation holds one address of an IPPool for one
// IPAddressClaim. Its name is made of the pool and the address
// (ReservationName), so the API server itself refuses a second reservation
// of an address, whatever the controller replica or the state of its cache:
// the ippool controller creates it before the IPAddress, and deletes it once
// the claim and its IPAddress are gone. Written by the controller only.
type IPAddressReservation struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the reservation.
	Spec IPAddressReservationSpec `json:"spec"`
}

// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true

// IPAddressReservationList is a list of IPAddressReservations.
type IPAddressReservationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPAddressReservation `json:"items"`
}

// MaxPoolNameLength bounds an IPPool's name so that its reservations'
// names (the pool's, a dot and at most 39 characters of address) are valid
// object names.
const MaxPoolNameLength = validation.DNS1123SubdomainMaxLength - 1 - 39

// ReservationName is the name of the reservation of address in pool:
// "POOL.ADDRESS", the address's dots (IPv4) or colons (IPv6) turned into
// dashes. IPv6 addresses are written in full ("2001-0db8-0000-...-0001"):
// the compressed form would begin or end with a dash ("::1"), which a name
// may not, and an IPv4-mapped address would read like another IPv6 one.
// Distinct (pool, address) pairs get distinct names: an address never
// holds a dot, so the last dot ends the pool's name, and an IPv4 address has
// 4 decimal groups where an IPv6 one has 8 of 4 hex digits.
func ReservationName(pool, address string) (string, error) {
	a, err := netip.ParseAddr(address)
	if err != nil {
		return "", fmt.Errorf("reserving %q: not an IP address", address)
	}
	if a.Zone() != "" {
		return "", fmt.Errorf("reserving %s: an address with a zone is not a pool's", address)
	}
	var s string
	if a.Is4() {
		s = strings.ReplaceAll(a.String(), ".", "-")
	} else {
		s = strings.ReplaceAll(a.StringExpanded(), ":", "-")
	}
	name := pool + "." + s
	if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
		return "", fmt.Errorf("reserving %s of IPPool %s: %s", address, pool, strings.Join(errs, "; "))
	}
	return name, nil
}
