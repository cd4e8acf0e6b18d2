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
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/resource"
	apimachineryvalidation "k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/util/sets"
	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// MaxProviderReplicas bounds a ProviderClass's replicas: replicas take turns,
// more only wait.
const MaxProviderReplicas = 5

var deploymentStrategies = sets.New(banlieue.ProviderDeploymentPerProvider, banlieue.ProviderDeploymentShared)

// workloadResources are the resources a provider container may name.
var workloadResources = []string{"cpu", "memory"}

// providerBackends are the backends "banlieue provider" runs.
var providerBackends = map[string]bool{"libvirt": true, "proxmox": true, "vsphere": true}

// Backends are the backends banlieue runs providers for.
func Backends() []string {
	return slices.Sorted(maps.Keys(providerBackends))
}

// ValidateProviderClass validates a new ProviderClass.
func ValidateProviderClass(c *banlieue.ProviderClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMeta(&c.ObjectMeta, false, apimachineryvalidation.NameIsDNSLabel, field.NewPath("metadata"))
	return append(allErrs, validateProviderClassSpec(c.Name, &c.Spec, field.NewPath("spec"))...)
}

// ValidateProviderClassUpdate validates an update: the backend is immutable.
func ValidateProviderClassUpdate(c, old *banlieue.ProviderClass) field.ErrorList {
	allErrs := apimachineryvalidation.ValidateObjectMetaUpdate(&c.ObjectMeta, &old.ObjectMeta, field.NewPath("metadata"))
	allErrs = append(allErrs, validateProviderClassSpec(c.Name, &c.Spec, field.NewPath("spec"))...)
	return append(allErrs, apimachineryvalidation.ValidateImmutableField(c.Spec.Backend, old.Spec.Backend, field.NewPath("spec", "backend"))...)
}

func validateProviderClassSpec(name string, spec *banlieue.ProviderClassSpec, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	bp := p.Child("backend")
	switch known := providerBackends[spec.Backend]; {
	case spec.Backend == "":
		allErrs = append(allErrs, field.Required(bp, fmt.Sprintf("one of %q", Backends())))
	case !known:
		allErrs = append(allErrs, field.NotSupported(bp, spec.Backend, Backends()))
	case spec.Backend != name:
		// Providers, VMImage sources and the core name a backend by its
		// class's name; a second class of one backend would be a name
		// nothing else understands.
		allErrs = append(allErrs, field.Invalid(bp, spec.Backend, fmt.Sprintf("must equal the class's name %q: a class is named after its backend", name)))
	}
	if spec.Image == "" {
		allErrs = append(allErrs, field.Required(p.Child("image"), "a banlieue release image"))
	} else {
		allErrs = append(allErrs, validateFreeText(spec.Image, true, p.Child("image"))...)
	}
	for _, msg := range utilvalidation.IsDNS1123Label(spec.Namespace) {
		allErrs = append(allErrs, field.Invalid(p.Child("namespace"), spec.Namespace, msg))
	}
	allErrs = append(allErrs, validateEnum(spec.DeploymentStrategy, deploymentStrategies, true, p.Child("deploymentStrategy"))...)
	if r := spec.Replicas; r == nil || *r < 0 || *r > MaxProviderReplicas {
		allErrs = append(allErrs, field.Invalid(p.Child("replicas"), ptrValue(r), fmt.Sprintf("must be between 0 and %d", MaxProviderReplicas)))
	}
	if l := spec.LogLevel; l == nil || *l < 0 || *l > 10 {
		allErrs = append(allErrs, field.Invalid(p.Child("logLevel"), ptrValue(l), "must be between 0 and 10"))
	}
	if r := spec.Resources; r != nil {
		allErrs = append(allErrs, validateResources(r, p.Child("resources"))...)
	}
	return allErrs
}

// validateResources refuses resources other than cpu and memory by name,
// and a request above its limit.
func validateResources(r *banlieue.ProviderResources, p *field.Path) field.ErrorList {
	var allErrs field.ErrorList
	for what, list := range map[string]map[string]resource.Quantity{"requests": r.Requests, "limits": r.Limits} {
		for _, k := range slices.Sorted(maps.Keys(list)) {
			if !slices.Contains(workloadResources, k) {
				allErrs = append(allErrs, field.NotSupported(p.Child(what).Key(k), k, workloadResources))
			}
		}
	}
	for _, k := range workloadResources {
		req, hasReq := r.Requests[k]
		limit, hasLimit := r.Limits[k]
		if hasReq && hasLimit && req.Cmp(limit) > 0 {
			allErrs = append(allErrs, field.Invalid(p.Child("requests").Key(k), req.String(), "must not exceed the limit "+limit.String()))
		}
	}
	return allErrs
}

func ptrValue(p *int32) any {
	if p == nil {
		return "null"
	}
	return *p
}

// validateWorkload checks what the operator records of a Provider's workload.
func validateWorkload(w *banlieue.ProviderWorkload, p *field.Path) field.ErrorList {
	if w == nil {
		return nil
	}
	var allErrs field.ErrorList
	if w.ReadyReplicas < 0 {
		allErrs = append(allErrs, field.Invalid(p.Child("readyReplicas"), w.ReadyReplicas, "must not be negative"))
	}
	if w.Reason != "" {
		for _, msg := range utilvalidation.IsQualifiedName(w.Reason) {
			allErrs = append(allErrs, field.Invalid(p.Child("reason"), w.Reason, msg))
		}
	}
	return append(allErrs, validateFreeText(w.Message, false, p.Child("message"))...)
}
