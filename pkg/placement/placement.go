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

// Package placement decides where a VirtualMachine runs: which Provider and
// which of its failure domains, and what its disks and interfaces map to
// there. It is pure (no I/O, no clock): the scheduler calls it to act and
// the API server's "placement" subresource calls it to explain, so both
// always agree.
//
// Every Provider is checked in stages; the first stage it fails is its
// reason. When no Provider fits, the reason of the Provider that got
// furthest is the VM's reason, so the user is told about the nearest miss:
//
//	selector → Ready → storage/network classes and features → vtpm → image → failure domains
package placement

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
)

// Reasons of the PlacementValid and Scheduled conditions.
const (
	ReasonClassNotFound    = "ClassNotFound"
	ReasonImageNotFound    = "ImageNotFound"
	ReasonInvalidOverrides = "InvalidOverrides"
	// ReasonImageClassMismatch: the image cannot serve the class
	// (resolve.CheckImage), e.g. a vTPM class with an immediate image.
	ReasonImageClassMismatch = "ImageClassMismatch"
	ReasonResolved           = "Resolved"
	ReasonScheduled          = "Scheduled"
	ReasonNoProviderMatched  = "NoProviderMatched"
	ReasonTpmUnsupported     = "TpmUnsupported"
	// ReasonBackendUnsupported: the Provider's backend cannot build
	// something the VM asks for (Input.Backend names the field).
	ReasonBackendUnsupported = "BackendUnsupported"
	ReasonImageNotReady      = "ImageNotReady"
	// ReasonAntiAffinityUnsatisfied: every place left breaks a required
	// anti-affinity term.
	ReasonAntiAffinityUnsatisfied = "AntiAffinityUnsatisfied"
)

// VTPMFeature is the Provider feature a tpmEnabled class needs.
const VTPMFeature = "vtpm"

// Stage is how far a Provider got through the checks.
type Stage int

const (
	StageSelector Stage = iota
	StageReady
	StageCapabilities
	StageTPM
	StageBackend
	StageImage
	StageFailureDomain
	StageAntiAffinity
	StageFits
)

func (s Stage) reason() string {
	switch s {
	case StageTPM:
		return ReasonTpmUnsupported
	case StageBackend:
		return ReasonBackendUnsupported
	case StageImage:
		return ReasonImageNotReady
	case StageAntiAffinity:
		return ReasonAntiAffinityUnsatisfied
	default:
		return ReasonNoProviderMatched
	}
}

// Input is everything a decision depends on.
type Input struct {
	VM *v1alpha1.VirtualMachine
	// Resolved is the VM's class merged with its overrides (pkg/resolve).
	Resolved *v1alpha1.ResolvedVirtualMachine
	// Image is the VM's VMImage (its status says where it is ready).
	Image *v1alpha1.VMImage
	// Providers are the candidates (the caller decides which namespaces).
	Providers []v1alpha1.Provider
	// Load counts the VMs already placed per failure domain, keyed by
	// Key(namespace/name of the provider, failureDomain); the least loaded
	// fitting domain wins.
	Load map[string]int
	// Peers are the other VMs of the VM's namespace already placed (or
	// being placed): what its anti-affinity terms are checked against.
	Peers []Peer
	// Backend asks the backend of a Provider's class what it cannot build
	// of Resolved (pkg/backends' registry: infrastructure.Registry.Admit);
	// nil asks nothing.
	Backend func(*v1alpha1.Provider) *field.Error
}

// Peer is a placed VM as anti-affinity sees it.
type Peer struct {
	Name   string
	Labels map[string]string
	// Provider is the Provider's namespace/name.
	Provider      string
	FailureDomain string
}

// Decision is the outcome for one VM.
type Decision struct {
	// Fits is true when a Provider and failure domain were chosen.
	Fits bool
	// Reason and Message explain the outcome (the Scheduled condition).
	Reason  string
	Message string
	// Scheduled is the choice, when Fits.
	Scheduled *v1alpha1.ScheduledPlacement
	// Providers explains every candidate, sorted by name.
	Providers []ProviderFit
}

// ProviderFit explains one Provider.
type ProviderFit struct {
	// Provider is ProviderName(provider, vm namespace).
	Provider string `json:"provider"`
	Fits     bool   `json:"fits"`
	// Stage the Provider reached; Reason and Message say why it stopped.
	Stage   Stage  `json:"-"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	// FailureDomains explains each failure domain, when the Provider got that far.
	FailureDomains []FailureDomainFit `json:"failureDomains,omitempty"`
}

// FailureDomainFit explains one failure domain.
type FailureDomainFit struct {
	Name    string `json:"name"`
	Fits    bool   `json:"fits"`
	Load    int    `json:"load"`
	Message string `json:"message,omitempty"`
	// Spread counts the VMs here that preferred anti-affinity terms select
	// (fewer wins before load).
	Spread int `json:"-"`
}

// DefaultSharedProviderNamespace is the namespace whose Providers every
// namespace's VMs may use, besides those of the VM's own namespace, unless
// the components are told another (--shared-provider-namespace): it is the
// shipped install namespace, and an install elsewhere shares its own.
const DefaultSharedProviderNamespace = "banlieue-system"

// CandidateNamespaces are the namespaces whose Providers may run a VM of
// vmNamespace: its own and shared, the install's shared-Provider namespace
// (none when empty).
func CandidateNamespaces(vmNamespace, shared string) []string {
	if shared == "" || vmNamespace == shared {
		return []string{vmNamespace}
	}
	return []string{vmNamespace, shared}
}

// MayServe tells whether a Provider of providerNamespace may run a VM or
// machine of namespace: the rule CandidateNamespaces lists for.
func MayServe(providerNamespace, namespace, shared string) bool {
	return providerNamespace == namespace || shared != "" && providerNamespace == shared
}

// Key identifies a failure domain across Providers (for Load); provider is
// the Provider's namespace/name.
func Key(provider, failureDomain string) string { return provider + "|" + failureDomain }

// QualifiedProvider turns a VM's status.scheduled.provider (a name in the
// VM's namespace, or namespace/name) into namespace/name.
func QualifiedProvider(vmNamespace, scheduled string) string {
	if strings.Contains(scheduled, "/") {
		return scheduled
	}
	return vmNamespace + "/" + scheduled
}

// ProviderName is how a VM refers to a Provider: its name in the VM's own
// namespace, namespace/name elsewhere.
func ProviderName(p *v1alpha1.Provider, vmNamespace string) string {
	if p.Namespace == vmNamespace {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

// ImageStatusKey is how VMImage.status.perProvider names a Provider.
func ImageStatusKey(p *v1alpha1.Provider) string { return p.Namespace + "/" + p.Name }

// Decide places in.VM. It never fails: an impossible placement is a
// Decision with Fits false and a reason.
func Decide(in Input) Decision {
	var fits []ProviderFit
	providers := append([]v1alpha1.Provider(nil), in.Providers...)
	sort.Slice(providers, func(i, j int) bool {
		return ProviderName(&providers[i], in.VM.Namespace) < ProviderName(&providers[j], in.VM.Namespace)
	})
	type option struct {
		provider *v1alpha1.Provider
		name     string
		fd       string
		load     int
		spread   int
	}
	var options []option
	for i := range providers {
		p := &providers[i]
		fit := checkProvider(in, p)
		for _, fd := range fit.FailureDomains {
			if fd.Fits {
				options = append(options, option{provider: p, name: fit.Provider, fd: fd.Name, load: fd.Load, spread: fd.Spread})
			}
		}
		fits = append(fits, fit)
	}
	d := Decision{Providers: fits}
	if len(options) == 0 {
		d.Reason, d.Message = summarise(fits)
		return d
	}
	// Fewest preferred anti-affinity peers first, then least loaded; ties by
	// provider then failure-domain name, so the same inputs always give the
	// same answer.
	sort.SliceStable(options, func(i, j int) bool {
		if options[i].spread != options[j].spread {
			return options[i].spread < options[j].spread
		}
		if options[i].load != options[j].load {
			return options[i].load < options[j].load
		}
		if options[i].name != options[j].name {
			return options[i].name < options[j].name
		}
		return options[i].fd < options[j].fd
	})
	best := options[0]
	d.Fits = true
	d.Reason = ReasonScheduled
	d.Message = fmt.Sprintf("placed on Provider %s, failure domain %s", best.name, best.fd)
	d.Scheduled = &v1alpha1.ScheduledPlacement{
		Provider:      best.name,
		FailureDomain: best.fd,
		Storage:       storage(in.Resolved, best.provider),
		Network:       network(in.Resolved, best.provider),
	}
	return d
}

func checkProvider(in Input, p *v1alpha1.Provider) ProviderFit {
	fit := ProviderFit{Provider: ProviderName(p, in.VM.Namespace)}
	stop := func(stage Stage, format string, args ...interface{}) ProviderFit {
		fit.Stage, fit.Reason, fit.Message = stage, stage.reason(), fmt.Sprintf(format, args...)
		return fit
	}
	var placement v1alpha1.Placement
	if in.VM.Spec.Placement != nil {
		placement = *in.VM.Spec.Placement
	}

	sel, err := selector(placement.ProviderSelector)
	if err != nil {
		return stop(StageSelector, "invalid providerSelector: %v", err)
	}
	if !sel.Matches(labels.Set(p.Labels)) {
		return stop(StageSelector, "labels %v do not match providerSelector %s", p.Labels, sel)
	}
	if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
		// The reason only: the Provider's message is for whoever manages
		// it (a login error names the backend account); this one reaches
		// every tenant's VM and /placement.
		msg := "Provider is not Ready"
		if c := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady); c != nil {
			msg = fmt.Sprintf("Provider is not Ready (%s)", c.Reason)
		}
		return stop(StageReady, "%s", msg)
	}

	r := in.Resolved.Spec
	storageClasses := sets.New[string]()
	for _, s := range p.Spec.Capabilities.StorageClasses {
		storageClasses.Insert(s.Name)
	}
	networkClasses := sets.New[string]()
	for _, n := range p.Spec.Capabilities.NetworkClasses {
		networkClasses.Insert(n.Name)
	}
	features := sets.New(p.Spec.Capabilities.Features...)
	var missing []string
	for _, d := range r.Disks {
		if d.StorageClass != "" && !storageClasses.Has(d.StorageClass) {
			missing = append(missing, fmt.Sprintf("storage class %q (disk %s)", d.StorageClass, d.Name))
		}
	}
	for _, n := range r.Interfaces {
		if n.NetworkClass != "" && !networkClasses.Has(n.NetworkClass) {
			missing = append(missing, fmt.Sprintf("network class %q (interface %s)", n.NetworkClass, n.Name))
		}
	}
	for _, f := range r.Features {
		if f != VTPMFeature && !features.Has(f) {
			missing = append(missing, fmt.Sprintf("feature %q", f))
		}
	}
	if f := FirmwareFeature(string(r.Firmware)); f != "" && !features.Has(f) && !slices.Contains(r.Features, f) {
		missing = append(missing, fmt.Sprintf("feature %q (firmware %s)", f, r.Firmware))
	}
	if len(missing) > 0 {
		return stop(StageCapabilities, "does not advertise %s", strings.Join(missing, ", "))
	}
	if (r.TPMEnabled || sets.New(r.Features...).Has(VTPMFeature)) && !features.Has(VTPMFeature) {
		return stop(StageTPM, "the class needs a virtual TPM and the Provider does not advertise the %q feature", VTPMFeature)
	}

	if in.Backend != nil {
		if err := in.Backend(p); err != nil {
			return stop(StageBackend, "its %s backend cannot build %s: %s", p.Spec.ProviderClassRef.Name, err.Field, err.ErrorBody())
		}
	}

	if !hasSource(in.Image, p.Spec.ProviderClassRef.Name) {
		return stop(StageImage, "VMImage %s has no source for provider class %q", in.Image.Name, p.Spec.ProviderClassRef.Name)
	}
	imageFDs, why := imageReady(in.Image, p)
	if imageFDs == nil {
		return stop(StageImage, "VMImage %s is not ready on this Provider: %s", in.Image.Name, why)
	}

	fdSel, err := selector(placement.FailureDomainSelector)
	if err != nil {
		return stop(StageFailureDomain, "invalid failureDomainSelector: %v", err)
	}
	if len(p.Status.FailureDomains) == 0 {
		return stop(StageFailureDomain, "the Provider reports no failure domains")
	}
	matched := false
	for _, fd := range p.Status.FailureDomains {
		f := FailureDomainFit{Name: fd.Name, Load: in.Load[Key(ImageStatusKey(p), fd.Name)]}
		switch msg, imageHere := imageFDs(fd.Name); {
		case !fdSel.Matches(fdLabels(fd)):
			f.Message = fmt.Sprintf("labels %v do not match failureDomainSelector %s", fdLabels(fd), fdSel)
		case !imageHere:
			f.Message = fmt.Sprintf("VMImage %s is not ready here: %s", in.Image.Name, msg)
		default:
			f.Fits, matched = true, true
		}
		fit.FailureDomains = append(fit.FailureDomains, f)
	}
	if !matched {
		fit.Stage, fit.Reason = StageFailureDomain, ReasonNoProviderMatched
		fit.Message = fmt.Sprintf("none of its %d failure domains matches failureDomainSelector %s and has VMImage %s ready", len(p.Status.FailureDomains), fdSel, in.Image.Name)
		return fit
	}
	if msg := antiAffinity(placement.AntiAffinity, in.Peers, ImageStatusKey(p), fit.FailureDomains); msg != "" {
		return stop(StageAntiAffinity, "%s", msg)
	}
	fit.Stage, fit.Fits = StageFits, true
	return fit
}

// fdLabels are a failure domain's labels; "name" is always its name.
func fdLabels(fd v1alpha1.FailureDomain) labels.Set {
	l := labels.Set{}
	for k, v := range fd.Labels {
		l[k] = v
	}
	l["name"] = fd.Name
	return l
}

func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func hasSource(img *v1alpha1.VMImage, providerClass string) bool {
	for _, s := range img.Spec.Sources {
		if s.ProviderClass == providerClass {
			return true
		}
	}
	return images.Serves(img, providerClass)
}

// imageReady says in which of p's failure domains img is ready: nil (and
// why) when in none. An image from a source is ready in all of them or
// none; an import is ready failure domain by failure domain, at the
// image's current revision.
func imageReady(img *v1alpha1.VMImage, p *v1alpha1.Provider) (func(fd string) (string, bool), string) {
	for _, s := range img.Status.PerProvider {
		if s.Provider != ImageStatusKey(p) {
			continue
		}
		if !images.Serves(img, p.Spec.ProviderClassRef.Name) || len(s.FailureDomains) == 0 {
			if s.Ready {
				return func(string) (string, bool) { return "", true }, ""
			}
			return nil, strings.TrimSpace(s.Reason + " " + s.Message)
		}
		fds := map[string]v1alpha1.ImageFailureDomainStatus{}
		any := false
		for _, fd := range s.FailureDomains {
			fds[fd.Name] = fd
			any = any || readyAt(fd, img.Status.Revision)
		}
		if !any {
			return nil, "ready in none of its failure domains yet (" + strings.TrimSpace(s.Reason+" "+s.Message) + ")"
		}
		return func(name string) (string, bool) {
			fd, ok := fds[name]
			if !ok {
				return "not imported here yet", false
			}
			if readyAt(fd, img.Status.Revision) {
				return "", true
			}
			return strings.TrimSpace(fmt.Sprintf("%s %s %s", fd.Phase, fd.Reason, fd.Message)), false
		}, ""
	}
	return nil, "the Provider has not checked it yet"
}

func readyAt(fd v1alpha1.ImageFailureDomainStatus, revision string) bool {
	return fd.Phase == v1alpha1.ImagePhaseReady && fd.Revision == revision
}

// summarise picks the reason of the Provider that got furthest.
func summarise(fits []ProviderFit) (string, string) {
	if len(fits) == 0 {
		return ReasonNoProviderMatched, "there are no Providers to choose from"
	}
	best := fits[0]
	for _, f := range fits[1:] {
		if f.Stage > best.Stage {
			best = f
		}
	}
	var parts []string
	for _, f := range fits {
		parts = append(parts, fmt.Sprintf("%s: %s", f.Provider, f.Message))
	}
	return best.Reason, fmt.Sprintf("no Provider fits (%d checked): %s", len(fits), strings.Join(parts, "; "))
}

func storage(r *v1alpha1.ResolvedVirtualMachine, p *v1alpha1.Provider) []v1alpha1.StorageResolution {
	targets := map[string]string{}
	for _, s := range p.Spec.Capabilities.StorageClasses {
		targets[s.Name] = s.Target.Name()
	}
	var out []v1alpha1.StorageResolution
	for _, d := range r.Spec.Disks {
		out = append(out, v1alpha1.StorageResolution{Name: d.Name, StorageClass: d.StorageClass, Target: targets[d.StorageClass]})
	}
	return out
}

func network(r *v1alpha1.ResolvedVirtualMachine, p *v1alpha1.Provider) []v1alpha1.NetworkResolution {
	targets := map[string]string{}
	for _, n := range p.Spec.Capabilities.NetworkClasses {
		targets[n.Name] = n.Target.Name()
	}
	var out []v1alpha1.NetworkResolution
	for _, n := range r.Spec.Interfaces {
		out = append(out, v1alpha1.NetworkResolution{Name: n.Name, NetworkClass: n.NetworkClass, Target: targets[n.NetworkClass]})
	}
	return out
}
