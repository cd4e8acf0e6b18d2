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

package provider

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/placement"
)

// Reasons of a VSphereMachine refused before any backend call: whoever may
// write a VSphereMachine (a tenant, a Cluster API template) must not steer
// the Provider's shared credentials beyond what the Provider publishes.
const (
	ReasonProviderNotAllowed        = "ProviderNotAllowed"
	ReasonFailureDomainNotPublished = "FailureDomainNotPublished"
	ReasonDatastoreNotPublished     = "DatastoreNotPublished"
	ReasonPortGroupNotPublished     = "PortGroupNotPublished"
	ReasonTemplateNotPublished      = "TemplateNotPublished"
)

// refusal is a machine spec its Provider does not allow: the field, the
// reason and what the Provider publishes instead.
type refusal struct {
	field, reason, message string
}

func (r *refusal) Error() string { return r.field + ": " + r.message }

// admit checks vsm against the Provider p that would build it, before
// anything reaches the backend: p must be in the machine's namespace or
// the shared one (the scheduler's rule); datacenter and cluster must be one
// of p's failure domains; every datastore and port group a target of p's
// capabilities (or empty: the template's own); the template a source, for
// class, of one of images. nil means allowed.
func admit(vsm *infrav1.VSphereMachine, p *v1alpha1.Provider, class string, images []v1alpha1.VMImage) *refusal {
	name := p.Namespace + "/" + p.Name
	if p.Namespace != vsm.Namespace && p.Namespace != placement.SharedProviderNamespace {
		return &refusal{"metadata.annotations[" + infrav1.ProviderAnnotation + "]", ReasonProviderNotAllowed,
			fmt.Sprintf("Provider %s may serve machines of its own namespace or, from %s, of any; not of namespace %s",
				name, placement.SharedProviderNamespace, vsm.Namespace)}
	}
	if r := admitFailureDomain(vsm, p); r != nil {
		return r
	}
	var datastores, portGroups []string
	for _, s := range p.Spec.Capabilities.StorageClasses {
		datastores = append(datastores, s.Target.Datastore)
	}
	for _, n := range p.Spec.Capabilities.NetworkClasses {
		portGroups = append(portGroups, n.Target.PortGroup)
	}
	for i, d := range vsm.Spec.Disks {
		if d.Datastore != "" && !slices.Contains(datastores, d.Datastore) {
			return &refusal{fmt.Sprintf("spec.disks[%d].datastore", i), ReasonDatastoreNotPublished,
				fmt.Sprintf("%q is not a storage target of Provider %s (%s)", d.Datastore, name, published(datastores))}
		}
	}
	for i, n := range vsm.Spec.Network {
		if n.PortGroup != "" && !slices.Contains(portGroups, n.PortGroup) {
			return &refusal{fmt.Sprintf("spec.network[%d].portGroup", i), ReasonPortGroupNotPublished,
				fmt.Sprintf("%q is not a network target of Provider %s (%s)", n.PortGroup, name, published(portGroups))}
		}
	}
	var templates []string
	for _, img := range images {
		for _, s := range img.Spec.Sources {
			if s.ProviderClass == class {
				templates = append(templates, s.Ref)
			}
		}
	}
	if !slices.Contains(templates, vsm.Spec.Template) {
		return &refusal{"spec.template", ReasonTemplateNotPublished,
			fmt.Sprintf("%q is not the %s source of any VMImage (%s)", vsm.Spec.Template, class, published(templates))}
	}
	return nil
}

func admitFailureDomain(vsm *infrav1.VSphereMachine, p *v1alpha1.Provider) *refusal {
	var pairs []string
	for _, fd := range p.Status.FailureDomains {
		if fd.Datacenter == vsm.Spec.Datacenter && fd.Cluster == vsm.Spec.Cluster &&
			(vsm.Spec.FailureDomain == "" || vsm.Spec.FailureDomain == fd.Name) {
			return nil
		}
		pairs = append(pairs, fmt.Sprintf("%s=%s/%s", fd.Name, fd.Datacenter, fd.Cluster))
	}
	field, what := "spec.datacenter, spec.cluster", fmt.Sprintf("%s/%s", vsm.Spec.Datacenter, vsm.Spec.Cluster)
	if vsm.Spec.FailureDomain != "" {
		field, what = "spec.failureDomain, spec.datacenter, spec.cluster", fmt.Sprintf("%s=%s", vsm.Spec.FailureDomain, what)
	}
	return &refusal{field, ReasonFailureDomainNotPublished,
		fmt.Sprintf("%s is not a failure domain of Provider %s/%s (%s)", what, p.Namespace, p.Name, published(pairs))}
}

// published lists what a Provider publishes, for a message.
func published(items []string) string {
	items = slices.DeleteFunc(slices.Clone(items), func(s string) bool { return s == "" })
	if len(items) == 0 {
		return "it publishes none"
	}
	sort.Strings(items)
	return "published: " + strings.Join(slices.Compact(items), ", ")
}
