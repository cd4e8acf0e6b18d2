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

package images

import (
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// ArtifactPrefix starts the name of everything built of an imported image.
const ArtifactPrefix = "banlieue-img-"

// ArtifactName is the name every backend gives what it builds of revision
// of the image with uid (a volume, a template): derived, never random, so
// a provider restarted mid-import finds what it started instead of making
// a second one, and an image deleted and made again under the same name
// never reuses the first one's.
func ArtifactName(uid types.UID, revision string) string {
	u := strings.ReplaceAll(string(uid), "-", "")
	if len(u) > 12 {
		u = u[:12]
	}
	return ArtifactPrefix + u + "-" + revision
}

// Serves tells whether img's import is for providerClass: the class has no
// source of its own in spec.sources, and spec.import.providerClasses, when
// it lists any, names it.
func Serves(img *v1alpha1.VMImage, providerClass string) bool {
	if img.Spec.Import == nil {
		return false
	}
	for _, s := range img.Spec.Sources {
		if s.ProviderClass == providerClass {
			return false
		}
	}
	pc := img.Spec.Import.ProviderClasses
	return len(pc) == 0 || slices.Contains(pc, providerClass)
}

// Resolved is what a VM built now from img uses of its import: nil
// without one, or before the API server named its revision.
func Resolved(img *v1alpha1.VMImage) *v1alpha1.ResolvedImport {
	return ResolvedAt(img, img.Status.Revision)
}

// ResolvedAt is what a VM built from revision of img's import uses (a VM
// keeps the revision it was first built from): nil without an import or
// a revision. The format and classes are the import's as it is now.
func ResolvedAt(img *v1alpha1.VMImage, revision string) *v1alpha1.ResolvedImport {
	if img.Spec.Import == nil || revision == "" {
		return nil
	}
	return &v1alpha1.ResolvedImport{
		Name:            ArtifactName(img.UID, revision),
		Revision:        revision,
		Format:          img.Spec.Import.Format,
		ProviderClasses: img.Spec.Import.ProviderClasses,
	}
}

// ParseArtifactName splits a name ArtifactName made (a backend's ref
// ends with it: a libvirt POOL/VOLUME's volume) into the image UID's
// prefix and the revision; ok is false for any other name.
func ParseArtifactName(name string) (uidPrefix, revision string, ok bool) {
	rest, found := strings.CutPrefix(name, ArtifactPrefix)
	if !found {
		return "", "", false
	}
	uidPrefix, revision, found = strings.Cut(rest, "-")
	if !found || uidPrefix == "" || revision == "" || !alnum(uidPrefix) || !alnum(revision) {
		return "", "", false
	}
	return uidPrefix, revision, true
}

// UIDPrefix is the part of uid ArtifactName keeps.
func UIDPrefix(uid types.UID) string {
	uidPrefix, _, _ := ParseArtifactName(ArtifactName(uid, "0"))
	return uidPrefix
}

func alnum(s string) bool {
	for _, c := range s {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			return false
		}
	}
	return true
}
