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
	"path"
	"slices"
	"sort"
	"strings"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	imgs "github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"k8s.io/apimachinery/pkg/types"
)

// Reasons of a machine refused before any backend call: whoever may write
// an infrastructure machine (a tenant, a Cluster API template) must not
// steer the Provider's shared credentials beyond what the Provider
// publishes. The target and image reasons are named after the backend's
// word for them (DatastoreNotPublished, PoolNotPublished, ...).
const (
	ReasonProviderNotAllowed        = "ProviderNotAllowed"
	ReasonFailureDomainNotPublished = "FailureDomainNotPublished"
	ReasonDatastoreNotPublished     = "DatastoreNotPublished"
	ReasonPortGroupNotPublished     = "PortGroupNotPublished"
	ReasonTemplateNotPublished      = "TemplateNotPublished"
	ReasonCloudConfigNotPublished   = "CloudConfigNotPublished"
	// ReasonFeatureNotPublished: the machine uses a feature (a vTPM, CPU
	// or memory hot add) the Provider's capabilities.features lack.
	ReasonFeatureNotPublished = "FeatureNotPublished"
)

// refusal is a machine spec its Provider does not allow: the field, the
// reason and what the Provider publishes instead.
type refusal struct {
	field, reason, message string
}

func (r *refusal) Error() string { return r.field + ": " + r.message }

// admit checks the machine m, as the backend would build it (spec, with
// the fields each part came from), against the Provider p, before
// anything reaches the backend: p must be in the machine's namespace or
// shared, the install's shared-Provider namespace (the scheduler's rule);
// its location one of p's failure
// domains, and nothing the backend refuses by itself (fields.Invalid: a
// vSphere resource pool or folder that could lead outside it); every
// feature it uses (a vTPM, fields.Features) one of p's; every storage and
// network target one of p's capabilities' (or empty: the image's own; a
// VLAN only with its bridge); the image a source, for class, of one of
// images. nil means allowed.
func admit(m infrav1.Machine, spec providers.MachineSpec, fields providers.Fields, p *v1alpha1.Provider, shared, class string, images []v1alpha1.VMImage) *refusal {
	name := p.Namespace + "/" + p.Name
	if !placement.MayServe(p.Namespace, m.GetNamespace(), shared) {
		return &refusal{"metadata.annotations[" + infrav1.ProviderAnnotation + "]", ReasonProviderNotAllowed,
			fmt.Sprintf("Provider %s may serve machines of its own namespace (%s); not of namespace %s",
				name, sharedNote(shared), m.GetNamespace())}
	}
	if r := admitFailureDomain(m, spec, fields, p); r != nil {
		return r
	}
	if len(fields.Invalid) > 0 {
		e := fields.Invalid[0]
		return &refusal{e.Field, e.Reason, fmt.Sprintf("%s (Provider %s)", e.Message, name)}
	}
	if r := admitFeatures(spec, fields, p); r != nil {
		return r
	}
	var storage, networks, bridges []string
	for _, s := range p.Spec.Capabilities.StorageClasses {
		storage = append(storage, s.Target.Name())
	}
	for _, n := range p.Spec.Capabilities.NetworkClasses {
		if n.Target.Bridge != "" {
			bridges = append(bridges, onBridge(n.Target.Bridge, n.Target.VLAN))
		} else {
			networks = append(networks, n.Target.Name())
		}
	}
	for i, d := range spec.Disks {
		if d.Target != "" && !slices.Contains(storage, d.Target) {
			return &refusal{fields.Disk(i), fields.Storage + "NotPublished",
				fmt.Sprintf("%q is not a storage target of Provider %s (%s)", d.Target, name, published(storage))}
		}
	}
	for i, n := range spec.NICs {
		// A bridge is published with its VLAN tag: a machine may not tag
		// its traffic with a VLAN the Provider does not offer, nor tag the
		// image's own bridge with any (the backend would use whatever
		// bridge the image has, with that tag).
		bridge := onBridge(n.Bridge, n.VLAN)
		switch {
		case n.Bridge == "" && n.VLAN != 0:
			return &refusal{fields.NIC(i), fields.Network + "NotPublished",
				fmt.Sprintf("vlan %d names no bridge: a VLAN is published only on a bridge of Provider %s (%s)", n.VLAN, name, published(bridges))}
		case n.Network != "" && !slices.Contains(networks, n.Network) || n.Bridge != "" && !slices.Contains(bridges, bridge):
			return &refusal{fields.NIC(i), fields.Network + "NotPublished",
				fmt.Sprintf("%q is not a network target of Provider %s (%s)", n.Network+bridge, name, published(append(networks, bridges...)))}
		}
	}
	var refs []string
	var configs [][]string // the cloudConfigs of the images of spec.Image
	for _, img := range images {
		for _, ref := range imageRefs(img, class, p, spec.Image) {
			refs = append(refs, ref)
			if ref == spec.Image {
				configs = append(configs, cloudConfigNames(img))
			}
		}
	}
	if !slices.Contains(refs, spec.Image) {
		return &refusal{fields.Image, fields.ImageWord + "NotPublished",
			fmt.Sprintf("%q is not the %s source of any VMImage (%s)", spec.Image, class, published(refs))}
	}
	return admitCloudConfigs(m, spec.Image, configs)
}

// admitFeatures refuses a machine using a feature p does not advertise:
// a vTPM or efi-secure firmware (placement's rules for the classes it
// schedules) or whatever the backend says its spec uses (fields.Features).
func admitFeatures(spec providers.MachineSpec, fields providers.Fields, p *v1alpha1.Provider) *refusal {
	uses := map[string]string{}
	for f, field := range fields.Features {
		uses[f] = field
	}
	if spec.TPM {
		uses[placement.VTPMFeature] = "spec.tpmEnabled"
	}
	if f := placement.FirmwareFeature(spec.Firmware); f != "" {
		uses[f] = "spec.firmware"
	}
	var missing []string
	for f := range uses {
		if !slices.Contains(p.Spec.Capabilities.Features, f) {
			missing = append(missing, f)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	sort.Strings(missing) // one refusal, the same each time
	f := missing[0]
	return &refusal{uses[f], ReasonFeatureNotPublished,
		fmt.Sprintf("needs the feature %q, which Provider %s/%s does not advertise (%s)", f, p.Namespace, p.Name, published(p.Spec.Capabilities.Features))}
}

// sharedNote says which namespace's Providers serve every namespace.
func sharedNote(shared string) string {
	if shared == "" {
		return "this install shares no Provider namespace"
	}
	return "only those of " + shared + " serve any namespace"
}

// onBridge names a bridge with its VLAN tag, as admission compares them.
func onBridge(bridge string, vlan int32) string {
	if vlan == 0 {
		return bridge
	}
	return fmt.Sprintf("%s vlan %d", bridge, vlan)
}

// admitCloudConfigs lets a machine name Secrets of the Provider's
// namespace as cloud configs only when a VMImage of its image names them
// (in that order): anything else would hand that namespace's Secrets (the
// Provider's credentials) to whoever writes machines.
func admitCloudConfigs(m infrav1.Machine, image string, configs [][]string) *refusal {
	want := m.CommonSpec().CloudConfigs
	if len(want) == 0 {
		return nil
	}
	var offered []string
	for _, c := range configs {
		if slices.Equal(c, want) {
			return nil
		}
		offered = append(offered, "["+strings.Join(c, ", ")+"]")
	}
	return &refusal{"spec.cloudConfigs", ReasonCloudConfigNotPublished,
		fmt.Sprintf("[%s] are not the cloudConfigs of a VMImage of %q (%s)", strings.Join(want, ", "), image, published(offered))}
}

func cloudConfigNames(img v1alpha1.VMImage) []string {
	var out []string
	for _, c := range img.Spec.CloudConfigs {
		out = append(out, c.SecretRef.Name)
	}
	return out
}

// admitFailureDomain checks that the machine's location is one of p's
// failure domains, and the one its spec.failureDomain names if it does.
func admitFailureDomain(m infrav1.Machine, spec providers.MachineSpec, fields providers.Fields, p *v1alpha1.Provider) *refusal {
	want := m.CommonSpec().FailureDomain
	var names []string
	for _, fd := range p.Status.FailureDomains {
		here := fd.Datacenter == spec.Location.Datacenter && fd.Cluster == spec.Location.Cluster && fd.Host == spec.Location.Host
		if here && (want == "" || want == fd.Name) {
			return nil
		}
		names = append(names, fd.Name+"="+failuredomain.LocationOf(fd).String())
	}
	field, what := fields.Location, spec.Location.String()
	switch {
	case field == "":
		field, what = "spec.failureDomain", want
	case want != "":
		field, what = "spec.failureDomain, "+field, want+"="+what
	}
	return &refusal{field, ReasonFailureDomainNotPublished,
		fmt.Sprintf("%s is not a failure domain of Provider %s/%s (%s)", what, p.Namespace, p.Name, published(names))}
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

// imageRefs are the refs img publishes for class on p: its source's, or
// what the provider built of its import there (failure domains' refs).
// A machine's ref to another revision of the same import, where the
// current one is kept (wanted), is published too: a VM built from an
// earlier revision keeps it while the new one imports.
func imageRefs(img v1alpha1.VMImage, class string, p *v1alpha1.Provider, wanted string) []string {
	var refs []string
	for _, s := range img.Spec.Sources {
		if s.ProviderClass == class {
			refs = append(refs, s.Ref)
		}
	}
	if !imgs.Serves(&img, class) {
		return refs
	}
	for _, st := range img.Status.PerProvider {
		if st.Provider != placement.ImageStatusKey(p) {
			continue
		}
		for _, fd := range st.FailureDomains {
			if fd.Ref != "" && !slices.Contains(refs, fd.Ref) {
				refs = append(refs, fd.Ref)
			}
			if otherRevision(fd.Ref, wanted, img.UID) && !slices.Contains(refs, wanted) {
				refs = append(refs, wanted)
			}
		}
	}
	return refs
}

// otherRevision tells whether ref and wanted name revisions of the import
// of the image with uid, kept in the same place (a libvirt pool).
func otherRevision(ref, wanted string, uid types.UID) bool {
	prefix := imgs.ArtifactName(uid, "")
	refDir, refName := path.Split(ref)
	wantDir, wantName := path.Split(wanted)
	return ref != "" && refDir == wantDir && strings.HasPrefix(refName, prefix) && strings.HasPrefix(wantName, prefix)
}
