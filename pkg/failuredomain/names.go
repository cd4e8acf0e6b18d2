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
// Package failuredomain names a Provider's failure domains: one per
// (datacenter, compute cluster) or host, "<provider>-<datacenter>-<cluster>"
// or "<provider>-<host>",
// lower-cased into a DNS-1123 label and shortened with a hash when too
// long, unless the Provider overrides the name. The vSphere provider
// publishes these names, VSphereClusters and placement select by them.
package failuredomain

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// MaxLength is the length of a DNS-1123 label.
const MaxLength = 63

// hashLength is how many hex digits of the hash a shortened name keeps.
const hashLength = 8

// Location is one place a backend runs VMs: a (datacenter, compute
// cluster) pair on vSphere, a host on libvirt.
type Location struct {
	Datacenter string
	Cluster    string
	Host       string
}

// parts are the location's set coordinates, in order.
func (l Location) parts() []string {
	var out []string
	for _, s := range []string{l.Datacenter, l.Cluster, l.Host} {
		if s != "" {
			out = append(out, s)
		}
	}
	return out
}

// String is the location as a user reads it: (datacenter, cluster) or host.
func (l Location) String() string {
	parts := l.parts()
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, ", ") + ")"
}

// AutoName is the computed name of a pair for provider: lower-cased, every
// run of characters outside [a-z0-9] turned into one '-', trimmed, and, when
// longer than 63, cut and suffixed with 8 hex digits of a hash of the full
// (unmangled) identity, so distinct pairs stay distinct.
func AutoName(provider string, p Location) string {
	name := sanitize(provider + "-" + strings.Join(p.parts(), "-"))
	if len(name) <= MaxLength && name != "" {
		return name
	}
	sum := sha256.Sum256([]byte(provider + "\x00" + strings.Join(p.parts(), "\x00")))
	suffix := hex.EncodeToString(sum[:])[:hashLength]
	keep := MaxLength - hashLength - 1
	if len(name) > keep {
		name = strings.TrimRight(name[:keep], "-")
	}
	if name == "" {
		return "fd-" + suffix
	}
	return name + "-" + suffix
}

func sanitize(s string) string {
	var b strings.Builder
	dash := false
	for _, r := range strings.ToLower(s) {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' {
			b.WriteRune(r)
			dash = false
		} else if !dash {
			b.WriteByte('-')
			dash = true
		}
	}
	return strings.Trim(b.String(), "-")
}

// CollisionError reports two pairs resolving to the same name; the whole
// Provider is then not Ready.
type CollisionError struct {
	Name      string
	Locations []Location
}

func (e *CollisionError) Error() string {
	var parts []string
	for _, p := range e.Locations {
		parts = append(parts, p.String())
	}
	return fmt.Sprintf("failure domains %s all resolve to the name %q", strings.Join(parts, " and "), e.Name)
}

// Resolve names every pair of provider: overrides first, the computed name
// otherwise. The result is sorted by name; "name" is in every domain's
// labels, beside those of its override. Two pairs with one name is a *CollisionError.
func Resolve(provider string, pairs []Location, overrides []v1alpha1.FailureDomainNameOverride) ([]v1alpha1.FailureDomain, error) {
	byPair := map[Location]string{}
	extra := map[Location]map[string]string{}
	for _, o := range overrides {
		byPair[Location{o.Datacenter, o.Cluster, o.Host}] = o.Name
		extra[Location{o.Datacenter, o.Cluster, o.Host}] = o.Labels
	}
	owners := map[string][]Location{}
	var out []v1alpha1.FailureDomain
	for _, p := range pairs {
		name, ok := byPair[p]
		if !ok {
			name = AutoName(provider, p)
		}
		owners[name] = append(owners[name], p)
		labels := map[string]string{}
		for k, v := range extra[p] {
			labels[k] = v
		}
		for key, value := range p.Labels() {
			labels[key] = value
		}
		labels["name"] = name
		out = append(out, v1alpha1.FailureDomain{
			Name: name, Datacenter: p.Datacenter, Cluster: p.Cluster, Host: p.Host, Labels: labels,
		})
	}
	names := make([]string, 0, len(owners))
	for n := range owners {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if len(owners[n]) > 1 {
			return nil, &CollisionError{Name: n, Locations: owners[n]}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Label keys a failure domain's location is published under, beside
// "name", so that a placement.failureDomainSelector can pick a backend's
// datacenter, cluster or host (a libvirt host, a Proxmox node) by the name
// the backend reports.
const (
	LabelDatacenter = "datacenter"
	LabelCluster    = "cluster"
	LabelHost       = "host"
)

// Labels are the location's parts as labels: those that are valid label
// values (a vCenter name may hold spaces; such a part is matched by the
// failure domain's name instead).
func (l Location) Labels() map[string]string {
	out := map[string]string{}
	for key, value := range map[string]string{LabelDatacenter: l.Datacenter, LabelCluster: l.Cluster, LabelHost: l.Host} {
		if value != "" && len(validation.IsValidLabelValue(value)) == 0 {
			out[key] = value
		}
	}
	return out
}

// UnusedOverrides are the indices of the overrides whose location is none
// of the failure domains published: a typo, or a cluster since renamed,
// that would otherwise silently rename nothing.
func UnusedOverrides(published []v1alpha1.FailureDomain, overrides []v1alpha1.FailureDomainNameOverride) []int {
	here := map[Location]bool{}
	for _, fd := range published {
		here[LocationOf(fd)] = true
	}
	var out []int
	for i, o := range overrides {
		if !here[Location{o.Datacenter, o.Cluster, o.Host}] {
			out = append(out, i)
		}
	}
	return out
}

// LocationOf is the place a published failure domain stands for.
func LocationOf(fd v1alpha1.FailureDomain) Location {
	return Location{Datacenter: fd.Datacenter, Cluster: fd.Cluster, Host: fd.Host}
}
