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

package vmimage

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

// Revision names spec's import: everything that changes what is built
// (the bytes, their format, how an installer is installed and with what).
// Empty without an import. Ten hex digits: backends' names stay short
// (the templates and volumes backends build) and two revisions of one
// image do not collide in practice.
func Revision(spec *banlieue.VMImageSpec) string {
	im := spec.Import
	if im == nil {
		return ""
	}
	parts := []string{im.URL, im.Checksum, string(im.Format)}
	if t := spec.Template; t != nil {
		parts = append(parts, string(t.Firmware), string(t.InstallMode))
	}
	if im.Format == banlieue.ImageFormatISO {
		for _, c := range spec.CloudConfigs {
			parts = append(parts, c.SecretRef.Name)
		}
	}
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:])[:10]
}

// readyCondition is the image's Ready condition, from what the Providers
// reported: True when every Provider that reports and is reachable has
// the image ready (in all its failure domains, for an import of the
// current revision), and at least one does; a Provider that is not Ready
// (ConnectFailed) is named, not waited for.
func readyCondition(img *banlieue.VMImage) metav1.Condition {
	c := metav1.Condition{Type: banlieue.ImageReady, ObservedGeneration: img.Generation}
	if len(img.Status.PerProvider) == 0 {
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, banlieue.ImageReasonPending, "no Provider has reported on the image yet"
		return c
	}
	var failed, notReady, busy, unreachable []string
	for _, p := range img.Status.PerProvider {
		if p.Ready && atRevision(p, img.Status.Revision) {
			continue
		}
		if !p.Ready && p.Reason == banlieue.ImageReasonConnectFailed {
			// A Provider that is not Ready places no VM: its image
			// cannot be the one a VM waits for.
			unreachable = append(unreachable, p.Provider)
			continue
		}
		if len(p.FailureDomains) == 0 {
			notReady = append(notReady, fmt.Sprintf("%s: %s", p.Provider, p.Reason))
		}
		for _, fd := range p.FailureDomains {
			where := p.Provider + "/" + fd.Name
			switch {
			case fd.Phase == banlieue.ImagePhaseFailed:
				failed = append(failed, fmt.Sprintf("%s: %s", where, fd.Reason))
			case fd.Phase != banlieue.ImagePhaseReady || fd.Revision != img.Status.Revision:
				busy = append(busy, fmt.Sprintf("%s: %s%s", where, fd.Phase, progress(fd)))
			}
		}
	}
	switch {
	case len(failed) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, banlieue.ImageReasonImportFailed, "failed in "+strings.Join(failed, "; ")
	case len(notReady) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, banlieue.ImageReasonNotReady, "not ready on "+strings.Join(notReady, "; ")
	case len(busy) > 0:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, banlieue.ImageReasonImporting, strings.Join(busy, "; ")
	case len(unreachable) == len(img.Status.PerProvider):
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, banlieue.ImageReasonNotReady, "no Provider reporting is Ready: "+strings.Join(unreachable, ", ")
	default:
		c.Status, c.Reason = metav1.ConditionTrue, banlieue.ImageReasonReady
		c.Message = fmt.Sprintf("ready on %d Provider(s)", len(img.Status.PerProvider)-len(unreachable))
		if len(unreachable) > 0 {
			c.Message += "; not counted, as they are not Ready: " + strings.Join(unreachable, ", ")
		}
	}
	return c
}

// atRevision tells whether every failure domain p reports is at revision
// (a Provider reporting its import ready at the previous one, as it does
// until it sees the change, is not ready at this one).
func atRevision(p banlieue.ImageProviderStatus, revision string) bool {
	for _, fd := range p.FailureDomains {
		if fd.Revision != revision {
			return false
		}
	}
	return true
}

func progress(fd banlieue.ImageFailureDomainStatus) string {
	if fd.BytesTotal <= 0 {
		return ""
	}
	return fmt.Sprintf(" %d%%", fd.BytesDone*100/fd.BytesTotal)
}

// setReady recomputes the Ready condition, keeping its transition time
// when its status does not change.
func setReady(img *banlieue.VMImage) {
	meta.SetStatusCondition(&img.Status.Conditions, readyCondition(img))
}

// keepReady is written's conditions with the Ready condition as it was
// (old's): a status write sets every other type (Deleting), never Ready.
func keepReady(written, old []metav1.Condition) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range written {
		if c.Type != banlieue.ImageReady {
			out = append(out, c)
		}
	}
	if c := meta.FindStatusCondition(old, banlieue.ImageReady); c != nil {
		out = append(out, *c)
	}
	return out
}
