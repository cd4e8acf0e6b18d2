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

package providers

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
)

// ImageImporter is a backend that builds a VMImage's import
// (spec.import) itself, in each of its locations.
type ImageImporter interface {
	// ImportedImage tells whether what ImportImage builds of target is
	// complete at location, and its ref (what a machine's spec.image
	// names).
	ImportedImage(ctx context.Context, location failuredomain.Location, target ImageTarget) (ref string, found bool, err error)
	// ImportImage builds target at location from body, first removing
	// whatever an interrupted import of it left. On an error (body's
	// included: a checksum mismatch ends its last read) nothing of target
	// is left.
	ImportImage(ctx context.Context, location failuredomain.Location, target ImageTarget, body io.Reader) (ref string, err error)
	// DeleteImportedImage removes what was built of target at location;
	// none is not an error.
	DeleteImportedImage(ctx context.Context, location failuredomain.Location, target ImageTarget) error
}

// ErrFormatMismatch: an image's bytes are not in the format its import
// names (FormatMismatch), found before anything is built (images.Sniff).
var ErrFormatMismatch = images.ErrFormatMismatch

// ImageTarget is what a backend builds of one revision of an import.
type ImageTarget struct {
	// Name is what the backend names it (images.ArtifactName).
	Name string
	// Format of the bytes: one of the kind's ImportFormats.
	Format v1alpha1.ImageFormat
	// Size of the bytes, -1 when unknown.
	Size int64
	// Storage is where in the location it is kept: the Provider's image
	// storage (ImageStorage).
	Storage string
	// Firmware of a template built of an installer (format iso):
	// spec.template.firmware (bios, efi, efi-secure), the backend's
	// default when empty. Both install modes carry it: a deferred
	// template is what each clone boots its installer with, and the
	// scheduler refuses a class of another firmware family by the image's
	// (ImageClassMismatch), so the template must be what it says.
	Firmware string
	// Install, for an installer (format iso) of installMode immediate, is
	// how a build VM installs it into what is built; nil imports the
	// bytes as they are (a deferred installer: each clone installs from
	// it, with Firmware).
	Install *ImageInstall
}

// ImageInstall is the build of an installer into a template: a build VM
// with a blank disk, the target's Firmware, the installer and a NoCloud
// seed carrying the image's cloudConfigs, powered on; the guest installs
// and powers itself off, and its disk, the media detached, becomes what
// is built.
type ImageInstall struct {
	// UserData is the seed's user data: the image's cloudConfigs.
	UserData []byte
	// DiskSizeGiB is the blank disk's size; clones grow it to their class's.
	DiskSizeGiB int64
	// Timeout bounds the install: a guest still running then fails it
	// (ErrInstallTimedOut) and the build VM is removed.
	Timeout time.Duration
	// Installing is called once the build VM runs.
	Installing func()
}

// ErrInsufficientStorage: the image is larger than the free space of
// the storage it goes to (InsufficientStorage), found before anything is
// built.
var ErrInsufficientStorage = errors.New("insufficient storage")

// ErrInstallTimedOut: an installer's guest did not power itself off in
// time (InstallTimedOut).
var ErrInstallTimedOut = errors.New("the installer did not power the build VM off in time")

// ImageStorage is where a Provider keeps imported images: the target of
// its first storage class (a libvirt pool, a vSphere datastore, a
// Proxmox VE storage); empty when it publishes none.
func ImageStorage(p *v1alpha1.Provider) string {
	for _, sc := range p.Spec.Capabilities.StorageClasses {
		if n := sc.Target.Name(); n != "" {
			return n
		}
	}
	return ""
}
