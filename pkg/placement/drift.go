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

package placement

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// Drift says why a placed VM's placement no longer holds, or "" when it
// does: its Provider (current, nil when gone) no longer exists, no longer
// matches the VM's providerSelector, or no longer publishes the failure
// domain, or the domain no longer matches the failureDomainSelector, or a
// required anti-affinity term selects one of peers (the other placed VMs
// of its namespace) where it runs. Only what lasts counts: a Provider not
// Ready, or an image not ready on it, is an outage to wait out, not a
// reason to recreate the VM elsewhere; a preferred term is a preference,
// never a reason to move.
func Drift(vm *v1alpha1.VirtualMachine, current *v1alpha1.Provider, peers []Peer) string {
	s := vm.Status.Scheduled
	if s == nil {
		return ""
	}
	if current == nil {
		return fmt.Sprintf("Provider %s no longer exists", s.Provider)
	}
	var placement v1alpha1.Placement
	if vm.Spec.Placement != nil {
		placement = *vm.Spec.Placement
	}
	if sel, err := selector(placement.ProviderSelector); err == nil && !sel.Matches(labels.Set(current.Labels)) {
		return fmt.Sprintf("Provider %s (labels %v) no longer matches providerSelector %s", s.Provider, current.Labels, sel)
	}
	if why := antiAffinityDrift(placement.AntiAffinity, peers, ImageStatusKey(current), s.FailureDomain); why != "" {
		return why
	}
	if !meta.IsStatusConditionTrue(current.Status.Conditions, v1alpha1.ProviderReady) {
		return "" // its failure domains are not current: wait
	}
	for _, fd := range current.Status.FailureDomains {
		if fd.Name != s.FailureDomain {
			continue
		}
		if sel, err := selector(placement.FailureDomainSelector); err == nil && !sel.Matches(fdLabels(fd)) {
			return fmt.Sprintf("failure domain %s (labels %v) no longer matches failureDomainSelector %s", fd.Name, fdLabels(fd), sel)
		}
		return ""
	}
	return fmt.Sprintf("Provider %s no longer publishes failure domain %s", s.Provider, s.FailureDomain)
}

// antiAffinityDrift says which required term of terms a peer breaks in
// failure domain fd of provider (namespace/name), "" when none does.
func antiAffinityDrift(terms []v1alpha1.AntiAffinityTerm, peers []Peer, provider, fd string) string {
	for _, t := range terms {
		if t.Mode == v1alpha1.AntiAffinityPreferred {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			continue // validation refuses it; Decide says so
		}
		if names := peersIn(peers, sel, t.TopologyKey, provider, fd); len(names) > 0 {
			where := "in failure domain " + fd
			if t.TopologyKey == v1alpha1.AntiAffinityProvider {
				where = "on Provider " + provider
			}
			return fmt.Sprintf("required anti-affinity (%s %s): %s %s", t.TopologyKey, sel, listed(names), where)
		}
	}
	return ""
}

// Without is providers with the failure domain fd of provider (namespace/
// name) left out: where a VM asked to move may go.
func Without(providers []v1alpha1.Provider, provider, fd string) []v1alpha1.Provider {
	out := make([]v1alpha1.Provider, 0, len(providers))
	for _, p := range providers {
		if ImageStatusKey(&p) == provider {
			p = *p.DeepCopy()
			var keep []v1alpha1.FailureDomain
			for _, f := range p.Status.FailureDomains {
				if f.Name != fd {
					keep = append(keep, f)
				}
			}
			p.Status.FailureDomains = keep
		}
		out = append(out, p)
	}
	return out
}
