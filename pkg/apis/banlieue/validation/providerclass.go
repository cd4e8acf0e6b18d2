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

package validation

import (
	"fmt"
	"net/url"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// classRules is how one provider class's Provider differs from another's:
// its endpoint, whether it needs credentials, which storage and network
// target fields it understands and what names a failure domain. Fields a
// class does not use are refused by name, never accepted and ignored.
type classRules struct {
	endpoint func(u *url.URL) string // why the endpoint is refused, or ""
	// noCredentials tells whether an endpoint needs no credentialsRef.
	noCredentials func(u *url.URL) bool
	storage       []string // StorageTarget fields
	network       []string // NetworkTarget fields
	location      []string // FailureDomainNameOverride fields naming the domain
	// hosts tells whether a Provider may list hosts, one endpoint each.
	hosts bool
	// vlans tells whether a network target may tag a VLAN.
	vlans bool
	// source is the kind of VMImage source the class reads; ref checks
	// its ref (why it is refused, or "").
	source banlieue.ImageSourceKind
	ref    func(string) string
	// unsupported are features its machines cannot have, and why: a
	// Provider advertising one would place classes it cannot honour.
	unsupported map[string]string
}

// vsphereRules also apply to classes banlieue does not know, as before
// classes differed: an https endpoint, username/password credentials.
var vsphereRules = classRules{
	endpoint: func(u *url.URL) string {
		if u.Scheme != "https" {
			return "must be an https URL, e.g. https://vcenter.example.com/sdk"
		}
		return ""
	},
	storage:  []string{"datastore"},
	network:  []string{"portGroup"},
	location: []string{"datacenter", "cluster"},
	source:   banlieue.ImageSourceTemplate,
}

var providerClasses = map[string]classRules{
	"vsphere": vsphereRules,
	"libvirt": {
		endpoint: func(u *url.URL) string {
			switch {
			case u.Scheme == "qemu+tls" && u.Path == "/system" && u.Hostname() != "":
				return ""
			case u.Scheme == "qemu+unix" && u.Path == "/system" && u.Host == "":
				return ""
			}
			return "must be qemu+tls://HOST/system, or qemu+unix:///system?socket=PATH on the provider's own host"
		},
		noCredentials: func(u *url.URL) bool { return u.Scheme == "qemu+unix" },
		storage:       []string{"pool"},
		hosts:         true,
		network:       []string{"network", "bridge"},
		location:      []string{"host"},
		source:        banlieue.ImageSourceVolume,
		unsupported: map[string]string{
			"hotAddCPU":    "libvirt machines are defined with their class's CPUs as the maximum: none can be hot-added",
			"hotAddMemory": "libvirt machines are defined without memory hotplug slots: no memory can be hot-added",
		},
		ref: func(ref string) string {
			if pool, vol, ok := strings.Cut(ref, "/"); !ok || pool == "" || vol == "" || strings.Contains(vol, "/") {
				return "must be POOL/VOLUME, a base image volume in a libvirt storage pool"
			}
			return ""
		},
	}, "proxmox": {
		endpoint: func(u *url.URL) string {
			if u.Scheme != "https" || strings.TrimSuffix(u.Path, "/") != "/api2/json" {
				return "must be the API's https URL, https://HOST:8006/api2/json"
			}
			return ""
		},
		storage:  []string{"storage"},
		network:  []string{"bridge"},
		location: []string{"host"},
		source:   banlieue.ImageSourceTemplate,
		vlans:    true,
		unsupported: map[string]string{
			"hotAddCPU":    "Proxmox VE machines are created without CPU hotplug",
			"hotAddMemory": "Proxmox VE machines are created without memory hotplug (it needs NUMA)",
		},
		ref: func(ref string) string {
			if ref == "" || strings.ContainsAny(ref, "/ ") {
				return "must be a template's name or VMID"
			}
			return ""
		},
	},
}

func rulesFor(class string) classRules {
	if r, ok := providerClasses[class]; ok {
		return r
	}
	return vsphereRules
}

// MaxHosts bounds a Provider's hosts.
const MaxHosts = 64

// validateConnection checks the endpoint, or the hosts, and the
// credentials against the class.
func validateConnection(class string, c *banlieue.ProviderConnection, p *field.Path) field.ErrorList {
	rules := rulesFor(class)
	var allErrs field.ErrorList
	var urls []*url.URL
	hp := p.Child("hosts")
	switch {
	case len(c.Hosts) > 0 && !rules.hosts:
		return field.ErrorList{field.Forbidden(hp, fmt.Sprintf("provider class %q is reached through one endpoint", class))}
	case len(c.Hosts) > 0 && c.Endpoint != "":
		return field.ErrorList{field.Invalid(p.Child("endpoint"), c.Endpoint, "endpoint and hosts are mutually exclusive")}
	case len(c.Hosts) > 0:
		allErrs = append(allErrs, tooMany(len(c.Hosts), MaxHosts, hp)...)
		names := sets.New[string]()
		for i, h := range c.Hosts {
			ip := hp.Index(i)
			allErrs = append(allErrs, validateFreeText(h.Name, true, ip.Child("name"))...)
			if names.Has(h.Name) {
				allErrs = append(allErrs, field.Duplicate(ip.Child("name"), h.Name))
			}
			names.Insert(h.Name)
			u, errs := validateEndpoint(rules, h.Endpoint, ip.Child("endpoint"))
			allErrs = append(allErrs, errs...)
			urls = append(urls, u)
		}
	default:
		u, errs := validateEndpoint(rules, c.Endpoint, p.Child("endpoint"))
		allErrs = append(allErrs, errs...)
		urls = append(urls, u)
	}
	if len(allErrs) > 0 {
		return allErrs
	}
	cp := p.Child("credentialsRef", "name")
	need := false
	for _, u := range urls {
		need = need || rules.noCredentials == nil || !rules.noCredentials(u)
	}
	if !need {
		// A local socket has no TLS: nothing to verify, no one to log in as.
		why := fmt.Sprintf("%s endpoints use no TLS and take no credentials (the socket's permissions decide)", urls[0].Scheme)
		if c.CredentialsRef.Name != "" {
			allErrs = append(allErrs, field.Forbidden(cp, why))
		}
		if c.CABundle != nil {
			allErrs = append(allErrs, field.Forbidden(p.Child("caBundle"), why))
		}
		if c.InsecureSkipTLSVerify {
			allErrs = append(allErrs, field.Forbidden(p.Child("insecureSkipTLSVerify"), why))
		}
		return allErrs
	}
	return validateRefName(c.CredentialsRef.Name, cp)
}

// validateEndpoint checks one endpoint URL against the class.
func validateEndpoint(rules classRules, endpoint string, p *field.Path) (*url.URL, field.ErrorList) {
	if endpoint == "" {
		return nil, field.ErrorList{field.Required(p, "")}
	}
	u, err := url.Parse(endpoint)
	var why string
	switch {
	case err != nil:
		why = fmt.Sprintf("must be a URL: %v", err)
	case u.User != nil:
		why = "must not carry credentials; use credentialsRef"
	default:
		why = rules.endpoint(u)
	}
	if why == "" && u.Scheme == "https" && u.Hostname() == "" {
		why = "must name a host"
	}
	if why != "" {
		return nil, field.ErrorList{field.Invalid(p, endpoint, why)}
	}
	return u, nil
}

// validateTarget checks that exactly one of the fields the class uses is
// set, and none it does not.
func validateTarget(class, what string, set map[string]string, p *field.Path) field.ErrorList {
	allowed := rulesFor(class).network
	if what == "storage" {
		allowed = rulesFor(class).storage
	}
	var allErrs field.ErrorList
	given := 0
	for _, name := range sets.List(sets.KeySet(set)) {
		v := set[name]
		if v == "" {
			continue
		}
		if !sets.New(allowed...).Has(name) {
			allErrs = append(allErrs, field.Forbidden(p.Child(name), fmt.Sprintf("provider class %q has %s targets %s", class, what, strings.Join(allowed, " or "))))
			continue
		}
		given++
		allErrs = append(allErrs, validateFreeText(v, true, p.Child(name))...)
	}
	if given == 0 && len(allErrs) == 0 && len(allowed) == 1 {
		allErrs = append(allErrs, field.Required(p.Child(allowed[0]), ""))
	} else if given == 0 && len(allErrs) == 0 {
		allErrs = append(allErrs, field.Required(p, fmt.Sprintf("one of %s (provider class %q)", strings.Join(allowed, ", "), class)))
	}
	if given > 1 {
		allErrs = append(allErrs, field.Invalid(p, set, "exactly one target field may be set"))
	}
	return allErrs
}

// validateOverrideLocation checks that an override names a failure domain
// the way its class does: (datacenter, cluster) on vSphere, host on libvirt.
func validateOverrideLocation(class string, o *banlieue.FailureDomainNameOverride, p *field.Path) field.ErrorList {
	want := sets.New(rulesFor(class).location...)
	var allErrs field.ErrorList
	for name, v := range map[string]string{"datacenter": o.Datacenter, "cluster": o.Cluster, "host": o.Host} {
		switch {
		case want.Has(name):
			allErrs = append(allErrs, validateFreeText(v, true, p.Child(name))...)
		case v != "":
			allErrs = append(allErrs, field.Forbidden(p.Child(name), fmt.Sprintf("provider class %q names failure domains by %s", class, strings.Join(rulesFor(class).location, " and "))))
		}
	}
	return allErrs
}

// validateSource checks an image source against its class: the kind the
// class reads (classes banlieue does not know take any kind) and its ref.
func validateSource(s banlieue.ImageSource, p *field.Path) field.ErrorList {
	rules, known := providerClasses[s.ProviderClass]
	if !known || !sourceKinds.Has(s.Kind) {
		return nil // an unknown kind is refused once, by the enum
	}
	var allErrs field.ErrorList
	if s.Kind != rules.source {
		allErrs = append(allErrs, field.NotSupported(p.Child("kind"), s.Kind, []string{string(rules.source)}))
	}
	if rules.ref != nil && s.Ref != "" {
		if why := rules.ref(s.Ref); why != "" {
			allErrs = append(allErrs, field.Invalid(p.Child("ref"), s.Ref, why))
		}
	}
	return allErrs
}

// validateClassFeatures refuses the features the class's machines cannot have.
func validateClassFeatures(class string, features []string, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for i, f := range features {
		if why, ok := rulesFor(class).unsupported[f]; ok {
			allErrs = append(allErrs, field.Invalid(p.Index(i), f, fmt.Sprintf("provider class %q does not support %s: %s", class, f, why)))
		}
	}
	return allErrs
}

// validateVLAN checks a network target's VLAN tag: only where the class
// tags VLANs, 1-4094.
func validateVLAN(class string, vlan int32, p *field.Path) field.ErrorList {
	switch {
	case vlan == 0:
		return nil
	case !rulesFor(class).vlans:
		return field.ErrorList{field.Forbidden(p, fmt.Sprintf("provider class %q tags no VLANs", class))}
	case vlan < 1 || vlan > 4094:
		return field.ErrorList{field.Invalid(p, vlan, "must be between 1 and 4094")}
	}
	return nil
}
