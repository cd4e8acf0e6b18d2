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
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// Bounds of an image import.
const (
	MaxImageURLLength        = 2048
	MinInstallTimeoutSeconds = 60
	MaxInstallTimeoutSeconds = 24 * 3600
)

var (
	imageFormats = sets.New(banlieue.ImageFormatQCOW2, banlieue.ImageFormatRaw, banlieue.ImageFormatOVA, banlieue.ImageFormatISO)
	// checksumDigits is how many hex digits each algorithm's digest has.
	checksumDigits = map[string]int{"sha256": 64, "sha512": 128}
	hexDigits      = regexp.MustCompile(`^[0-9a-f]*$`)
)

// validateImageImport checks spec.import against the rest of spec: an
// installer needs a template block, a disk image cannot be deferred (its
// clones would have nothing to install from), and a class is served
// either by its source or by the import, never both.
func validateImageImport(spec *banlieue.VMImageSpec, p *field.Path) field.ErrorList {
	im := spec.Import
	var allErrs field.ErrorList
	allErrs = append(allErrs, validateImageURL(im.URL, p.Child("url"))...)
	allErrs = append(allErrs, validateChecksum(im.Checksum, p.Child("checksum"))...)
	allErrs = append(allErrs, validateEnum(im.Format, imageFormats, true, p.Child("format"))...)
	if im.SecretRef != nil {
		allErrs = append(allErrs, validateRefName(im.SecretRef.Name, p.Child("secretRef", "name"))...)
	}
	if t := im.InstallTimeoutSeconds; t != nil && (*t < MinInstallTimeoutSeconds || *t > MaxInstallTimeoutSeconds) {
		allErrs = append(allErrs, field.Invalid(p.Child("installTimeoutSeconds"), *t,
			fmt.Sprintf("must be between %d and %d", MinInstallTimeoutSeconds, MaxInstallTimeoutSeconds)))
	}
	switch {
	case im.Format == banlieue.ImageFormatISO && spec.Template == nil:
		allErrs = append(allErrs, field.Required(field.NewPath("spec", "template"),
			"an iso is an installer: the template block says how it is installed (installMode immediate or deferred, firmware)"))
	case im.Format != banlieue.ImageFormatISO && spec.Template != nil && spec.Template.InstallMode == banlieue.InstallModeDeferred:
		allErrs = append(allErrs, field.Invalid(field.NewPath("spec", "template", "installMode"), spec.Template.InstallMode,
			fmt.Sprintf("a %s image is installed already: deferred needs an installer (spec.import.format iso)", im.Format)))
	}
	if im.Format != banlieue.ImageFormatISO && im.InstallTimeoutSeconds != nil {
		allErrs = append(allErrs, field.Forbidden(p.Child("installTimeoutSeconds"), "only an installer (format iso) is installed"))
	}
	sourced := sets.New[string]()
	for _, s := range spec.Sources {
		sourced.Insert(s.ProviderClass)
	}
	cp := p.Child("providerClasses")
	allErrs = append(allErrs, tooMany(len(im.ProviderClasses), MaxSources, cp)...)
	seen := sets.New[string]()
	for i, c := range im.ProviderClasses {
		allErrs = append(allErrs, validateUniqueLabel(c, seen, cp.Index(i))...)
		if sourced.Has(c) {
			allErrs = append(allErrs, field.Invalid(cp.Index(i), c, "spec.sources has an entry for this class: a class uses its source or the import, not both"))
		}
	}
	return allErrs
}

// validateImageURL accepts an absolute http(s) URL without user
// information: a password in a URL would be readable by every user of
// the cluster (VMImages are), so credentials come from secretRef.
func validateImageURL(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, "the http or https URL the image is fetched from")}
	}
	if len(s) > MaxImageURLLength {
		return field.ErrorList{field.TooLong(p, "", MaxImageURLLength)}
	}
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("not a URL: %v", err))}
	case u.Scheme != "http" && u.Scheme != "https":
		return field.ErrorList{field.NotSupported(p, u.Scheme+"://…", []string{"http://…", "https://…"})}
	case u.Host == "":
		return field.ErrorList{field.Invalid(p, s, "the URL names no host")}
	case u.User != nil:
		return field.ErrorList{field.Invalid(p, "<redacted>", "the URL carries credentials, which every reader of the VMImage would see: put them in the Secret spec.import.secretRef names")}
	}
	return nil
}

// validateChecksum accepts "ALGORITHM:HEX" of an algorithm the providers
// compute, with the digest's exact length (lower case, as sha256sum prints).
func validateChecksum(s string, p *field.Path) field.ErrorList {
	if s == "" {
		return field.ErrorList{field.Required(p, `"sha256:" or "sha512:" and the image's digest in hex: the providers check every byte they fetch against it`)}
	}
	alg, digest, ok := strings.Cut(s, ":")
	want, known := checksumDigits[alg]
	switch {
	case !ok || !known:
		return field.ErrorList{field.Invalid(p, s, `must start with "sha256:" or "sha512:"`)}
	case !hexDigits.MatchString(digest):
		return field.ErrorList{field.Invalid(p, s, "the digest must be lower-case hex")}
	case len(digest) != want:
		return field.ErrorList{field.Invalid(p, s, fmt.Sprintf("a %s digest has %d hex digits, this one has %d", alg, want, len(digest)))}
	}
	return nil
}

var imagePhases = sets.New(banlieue.ImagePhasePending, banlieue.ImagePhaseImporting, banlieue.ImagePhaseInstalling,
	banlieue.ImagePhaseReady, banlieue.ImagePhaseFailed)

func validateImageFailureDomains(fds []banlieue.ImageFailureDomainStatus, p *field.Path) field.ErrorList {
	allErrs := tooMany(len(fds), MaxFailureDomains, p)
	seen := sets.New[string]()
	for i, fd := range fds {
		ip := p.Index(i)
		switch {
		case fd.Name == "":
			allErrs = append(allErrs, field.Required(ip.Child("name"), ""))
		case seen.Has(fd.Name):
			allErrs = append(allErrs, field.Duplicate(ip.Child("name"), fd.Name))
		}
		seen.Insert(fd.Name)
		allErrs = append(allErrs, validateEnum(fd.Phase, imagePhases, true, ip.Child("phase"))...)
		if fd.Phase == banlieue.ImagePhaseFailed && fd.Reason == "" {
			allErrs = append(allErrs, field.Required(ip.Child("reason"), "a failed import needs a reason"))
		}
		if fd.BytesDone < 0 || fd.BytesTotal < 0 {
			allErrs = append(allErrs, field.Invalid(ip.Child("bytesDone"), fd.BytesDone, "byte counts cannot be negative"))
		}
	}
	return allErrs
}
