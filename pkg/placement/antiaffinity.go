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
	"sort"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// antiAffinity applies terms to the failure domains fds of provider
// (namespace/name) that fit so far: a required term takes out every domain
// where a peer it selects runs (in that domain, or on that Provider), a
// preferred one counts those peers in Spread. It returns why the whole
// Provider is out, or "" when a domain still fits.
func antiAffinity(terms []v1alpha1.AntiAffinityTerm, peers []Peer, provider string, fds []FailureDomainFit) string {
	if len(terms) == 0 {
		return ""
	}
	for _, t := range terms {
		sel, err := metav1.LabelSelectorAsSelector(t.LabelSelector)
		if err != nil {
			return fmt.Sprintf("invalid anti-affinity labelSelector: %v", err)
		}
		preferred := t.Mode == v1alpha1.AntiAffinityPreferred
		for i := range fds {
			if !fds[i].Fits {
				continue
			}
			names := peersIn(peers, sel, t.TopologyKey, provider, fds[i].Name)
			if len(names) == 0 {
				continue
			}
			where := "in this failure domain"
			if t.TopologyKey == v1alpha1.AntiAffinityProvider {
				where = "on this Provider"
			}
			mode := "required"
			if preferred {
				mode = "preferred"
				fds[i].Spread += len(names)
			} else {
				fds[i].Fits = false
			}
			fds[i].Message = join(fds[i].Message, fmt.Sprintf("%s anti-affinity (%s %s): %s %s", mode, t.TopologyKey, sel, listed(names), where))
		}
	}
	for _, fd := range fds {
		if fd.Fits {
			return ""
		}
	}
	for _, fd := range fds {
		if strings.Contains(fd.Message, "required anti-affinity") {
			return "every failure domain left breaks a required anti-affinity term; " + fd.Name + ": " + fd.Message
		}
	}
	return "no failure domain left"
}

// peersIn names the peers sel selects that share topology with the
// failure domain fd of provider.
func peersIn(peers []Peer, sel labels.Selector, topology v1alpha1.AntiAffinityTopology, provider, fd string) []string {
	var out []string
	for _, p := range peers {
		if p.Provider != provider || topology != v1alpha1.AntiAffinityProvider && p.FailureDomain != fd {
			continue
		}
		if sel.Matches(labels.Set(p.Labels)) {
			out = append(out, p.Name)
		}
	}
	sort.Strings(out)
	return out
}

// listed names up to three VMs, and how many more.
func listed(names []string) string {
	s := "VM " + strings.Join(names[:min(3, len(names))], ", ")
	if len(names) > 3 {
		s += fmt.Sprintf(" and %d more", len(names)-3)
	}
	if len(names) > 1 {
		s = "VMs" + s[2:]
		return s + " run"
	}
	return s + " runs"
}

func join(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
