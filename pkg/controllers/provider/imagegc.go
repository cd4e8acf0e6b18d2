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
	"context"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/finalizers"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
)

// Removal of what was built of an import (issue 33): the revisions no
// machine uses any more, and every revision when the VMImage is deleted.
//
// Which revisions a Provider's failure domains may still hold is kept in
// status.perProvider[].failureDomains[].previousRevisions: the provider
// adds the revision a failure domain leaves when it moves to a new one,
// and removes it once DeleteImportedImage succeeded everywhere. Recording
// it in the status, rather than asking every backend to list what it
// holds, needs nothing of a backend but DeleteImportedImage, survives a
// provider restart, and shows the user what is kept.

// artifactsFinalizerSuffix names, after a Provider's own domain, the
// finalizer that holds a VMImage until what was built of it there is gone.
const artifactsFinalizerSuffix = "providers.banlieue.io/vmimage-artifacts"

// imageDeletePoll is how often a deleted VMImage waiting for its users is
// looked at again (a machine's deletion also requeues it).
const imageDeletePoll = 15 * time.Second

// ArtifactsFinalizer is the finalizer with which the process serving p
// holds a VMImage it imports until what it built of it on p is removed
// (or retained): NAME.NAMESPACE.providers.banlieue.io/vmimage-artifacts.
// One per Provider, so that the processes sharing a VMImage (one per
// class, or per Provider) each release their own, and the image goes once
// all did.
func ArtifactsFinalizer(p *v1alpha1.Provider) string {
	return p.Name + "." + p.Namespace + "." + artifactsFinalizerSuffix
}

// providerOfFinalizer is the Provider (namespace, name) an
// ArtifactsFinalizer names.
func providerOfFinalizer(f string) (namespace, name string, ok bool) {
	domain, found := strings.CutSuffix(f, "."+artifactsFinalizerSuffix)
	if !found {
		return "", "", false
	}
	// Provider names and namespaces are DNS labels: no dots.
	name, namespace, found = strings.Cut(domain, ".")
	if !found || strings.Contains(namespace, ".") || len(validation.IsDNS1123Label(name)) > 0 {
		return "", "", false
	}
	return namespace, name, true
}

// imageUse is, per revision of an import, the machines naming it and
// where their VMs are.
type imageUse map[string][]imageUser

// imageUser is a machine (namespace/name) naming a revision, and the
// place its VM is in: the location of its import scope (see scopes), ""
// when unknown (no place recorded and its failure domain not found),
// which holds the revision in every place.
type imageUser struct {
	machine, place string
}

// machines are the users of every revision, sorted and each once.
func (u imageUse) machines() []string {
	var out []string
	for _, users := range u {
		for _, m := range users {
			out = append(out, m.machine)
		}
	}
	sort.Strings(out)
	return slices.Compact(out)
}

// in is, per revision, the machines whose VMs are in place, or in a place
// not known: what a revision kept in place is held by.
func (u imageUse) in(place string) map[string][]string {
	out := map[string][]string{}
	for rev, users := range u {
		for _, m := range users {
			if m.place == "" || m.place == place {
				out[rev] = append(out[rev], m.machine)
			}
		}
	}
	return out
}

// revisionsInUse are the revisions of the import of img that machines of
// this process's kind name (their spec's image ref ends with an artifact
// name), with the machines naming each and where they are.
func (r *ImageReconciler) revisionsInUse(ctx context.Context, img *v1alpha1.VMImage) (imageUse, error) {
	kind := r.Providers.Kind
	if kind.NewList == nil || kind.Spec == nil {
		return nil, nil
	}
	list := kind.NewList()
	if err := r.Client.List(ctx, list); err != nil {
		return nil, err
	}
	var provs v1alpha1.ProviderList
	if err := r.Client.List(ctx, &provs, client.InNamespace(r.Namespace)); err != nil {
		return nil, err
	}
	uid := images.UIDPrefix(img.UID)
	out := imageUse{}
	for _, m := range kind.Items(list) {
		spec, _ := kind.Spec(m, v1alpha1.FailureDomain{})
		if prefix, rev, ok := images.ParseArtifactName(path.Base(spec.Image)); ok && prefix == uid {
			out[rev] = append(out[rev], imageUser{machine: m.GetNamespace() + "/" + m.GetName(), place: r.placeOf(m, provs.Items)})
		}
	}
	return out, nil
}

// placeOf is the location of the import scope m's VM is in: the place its
// status recorded, else its failure domain's on its Provider (the one its
// annotation names, or the only one publishing that failure domain). ""
// when not known.
func (r *ImageReconciler) placeOf(m infrav1.Machine, list []v1alpha1.Provider) string {
	if rec := m.CommonStatus().Location; rec != nil && (rec.Datacenter != "" || rec.Cluster != "" || rec.Host != "") {
		return r.importScope(failuredomain.Location{Datacenter: rec.Datacenter, Cluster: rec.Cluster, Host: rec.Host}).String()
	}
	fd, named := builtFailureDomain(m), m.GetAnnotations()[infrav1.ProviderAnnotation]
	var places []string
	for _, p := range list {
		if named != "" && named != p.Namespace+"/"+p.Name {
			continue
		}
		for _, f := range p.Status.FailureDomains {
			if f.Name == fd {
				places = append(places, r.importScope(failuredomain.LocationOf(f)).String())
			}
		}
	}
	if len(places) != 1 {
		return ""
	}
	return places[0]
}

// unusedRevisions splits the revisions a place may still hold besides
// current (previous: those its failure domains recorded, and the one they
// reported before current) into those to remove (no machine uses them)
// and those to keep.
func unusedRevisions(previous []string, current string, inUse map[string][]string) (remove, keep []string) {
	all := slices.Clone(previous)
	sort.Strings(all)
	for _, rev := range slices.Compact(all) {
		switch {
		case rev == "" || rev == current:
		case len(inUse[rev]) > 0:
			keep = append(keep, rev)
		default:
			remove = append(remove, rev)
		}
	}
	return remove, keep
}

// removeUnused deletes, in each place p keeps images, the revisions of
// img its failure domains held before the current one that no machine
// uses any more, and records in st those that remain.
func (r *ImageReconciler) removeUnused(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider, importer providers.ImageImporter,
	target providers.ImageTarget, st *v1alpha1.ImageProviderStatus, inUse imageUse) {
	before := map[string]v1alpha1.ImageFailureDomainStatus{}
	for _, ps := range img.Status.PerProvider {
		if ps.Provider == placement.ImageStatusKey(p) {
			for _, fd := range ps.FailureDomains {
				before[fd.Name] = fd
			}
		}
	}
	for _, sc := range r.scopes(p) {
		var previous []string
		for _, name := range sc.failureDomains {
			fd := before[name]
			previous = append(previous, fd.PreviousRevisions...)
			if fd.Revision != "" && fd.Revision != img.Status.Revision {
				previous = append(previous, fd.Revision)
			}
		}
		remove, keep := unusedRevisions(previous, img.Status.Revision, inUse.in(sc.location.String()))
		for _, rev := range remove {
			t := target
			t.Name = images.ArtifactName(img.UID, rev)
			if err := importer.DeleteImportedImage(ctx, sc.location, t); err != nil {
				log.FromContext(ctx).Info("Cannot remove an unused revision of an image; kept for later", "provider", placement.ImageStatusKey(p),
					"location", sc.location.String(), "artifact", t.Name, "err", err)
				keep = append(keep, rev)
				continue
			}
			log.FromContext(ctx).Info("Removed an unused revision of an image", "provider", placement.ImageStatusKey(p),
				"location", sc.location.String(), "artifact", t.Name)
		}
		sort.Strings(keep)
		for i := range st.FailureDomains {
			if slices.Contains(sc.failureDomains, st.FailureDomains[i].Name) && len(keep) > 0 {
				st.FailureDomains[i].PreviousRevisions = keep
			}
		}
	}
}

// reconcileImageDelete releases a deleted VMImage, Provider by Provider
// this process serves: once no machine uses what was built of it, every
// revision is removed from every place (spec.import.retainOnDelete keeps
// them) and the Provider's finalizer goes. Until then the Deleting
// condition names the machines.
func (r *ImageReconciler) reconcileImageDelete(ctx context.Context, img *v1alpha1.VMImage, list []v1alpha1.Provider) (ctrl.Result, error) {
	byKey := map[string]*v1alpha1.Provider{}
	for i := range list {
		byKey[placement.ImageStatusKey(&list[i])] = &list[i]
	}
	var waiting []string
	for _, f := range slices.Clone(img.Finalizers) {
		ns, name, ok := providerOfFinalizer(f)
		if !ok || ns != r.Namespace {
			continue
		}
		p := byKey[ns+"/"+name]
		if p == nil {
			// The Provider is gone, and with it the way to its backend.
			// Only a process that sees its whole namespace can tell.
			if r.Providers.Only == "" {
				if err := finalizers.Remove(ctx, r.Client, img, f); err != nil {
					return ctrl.Result{}, err
				}
			}
			continue
		}
		if !r.Providers.Serves(p) {
			continue
		}
		done, why, err := r.releaseImage(ctx, img, p)
		if err != nil {
			return ctrl.Result{}, err
		}
		if !done {
			waiting = append(waiting, why)
			continue
		}
		if err := finalizers.Remove(ctx, r.Client, img, f); err != nil {
			return ctrl.Result{}, err
		}
	}
	if len(waiting) == 0 {
		return ctrl.Result{}, nil
	}
	before := img.Status.DeepCopy()
	meta.SetStatusCondition(&img.Status.Conditions, metav1.Condition{Type: v1alpha1.ImageDeleting, Status: metav1.ConditionTrue,
		Reason: v1alpha1.ImageReasonInUse, ObservedGeneration: img.Generation, Message: "deleted; " + strings.Join(waiting, "; ")})
	if !apiequality.Semantic.DeepEqual(before, &img.Status) {
		if err := r.Client.Status().Update(ctx, img); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{RequeueAfter: imageDeletePoll}, nil
}

// releaseImage removes what was built of img on p, unless machines of p
// still use it (why names them) or its backend cannot be reached.
func (r *ImageReconciler) releaseImage(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider) (done bool, why string, err error) {
	key := placement.ImageStatusKey(p)
	if img.Spec.Import != nil && img.Spec.Import.RetainOnDelete {
		return true, "", nil
	}
	inUse, err := r.revisionsInUse(ctx, img)
	if err != nil {
		return false, "", err
	}
	if shown := inUse.machines(); len(shown) > 0 {
		n := len(shown)
		if n > 10 {
			shown = append(shown[:10:10], fmt.Sprintf("and %d more", n-10))
		}
		return false, fmt.Sprintf("Provider %s waits for %d machine(s) using what was built of it to be deleted: %s", key, n, strings.Join(shown, ", ")), nil
	}
	if r.jobs.running(key + "|") {
		return false, fmt.Sprintf("Provider %s is still importing it", key), nil
	}
	if !builtAnything(img, key) {
		// A Provider that never reached its backend (or built nothing
		// there) holds nothing: its deletion does not wait for it to be
		// Ready, which it may never be.
		return true, "", nil
	}
	storage := providers.ImageStorage(p)
	if storage == "" || !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
		return false, fmt.Sprintf("Provider %s is not Ready: what was built of it there is removed once it is", key), nil
	}
	backend, err := r.Providers.backend(ctx, p)
	if err != nil {
		log.FromContext(ctx).Info("Cannot remove an image: the Provider's backend is unreachable", "provider", key, "err", err)
		return false, fmt.Sprintf("cannot reach Provider %s's backend", key), nil
	}
	importer, ok := providers.Importer(backend)
	if !ok {
		return true, "", nil
	}
	revisions := []string{img.Status.Revision}
	for _, ps := range img.Status.PerProvider {
		if ps.Provider != key {
			continue
		}
		for _, fd := range ps.FailureDomains {
			revisions = append(revisions, fd.Revision)
			revisions = append(revisions, fd.PreviousRevisions...)
		}
	}
	sort.Strings(revisions)
	revisions = slices.DeleteFunc(slices.Compact(revisions), func(s string) bool { return s == "" })
	for _, sc := range r.scopes(p) {
		for _, rev := range revisions {
			t := providers.ImageTarget{Name: images.ArtifactName(img.UID, rev), Storage: storage, Size: -1}
			if img.Spec.Import != nil {
				t.Format = img.Spec.Import.Format
			}
			if err := importer.DeleteImportedImage(ctx, sc.location, t); err != nil {
				return false, "", fmt.Errorf("removing %s from %s of Provider %s: %w", t.Name, sc.location.String(), key, err)
			}
			log.FromContext(ctx).Info("Removed a deleted image", "provider", key, "location", sc.location.String(), "artifact", t.Name)
		}
	}
	return true, "", nil
}

// builtAnything tells whether img's status shows Provider key built, or
// may have built, anything: a failure domain with a ref, an import or
// install in flight, or revisions kept. A failed import leaves nothing
// behind, and a Pending one has not started.
func builtAnything(img *v1alpha1.VMImage, key string) bool {
	for _, ps := range img.Status.PerProvider {
		if ps.Provider != key {
			continue
		}
		for _, fd := range ps.FailureDomains {
			switch {
			case fd.Ref != "", len(fd.PreviousRevisions) > 0,
				fd.Phase == v1alpha1.ImagePhaseImporting, fd.Phase == v1alpha1.ImagePhaseInstalling, fd.Phase == v1alpha1.ImagePhaseReady:
				return true
			}
		}
	}
	return false
}

// holdImage adds p's finalizer to img before anything is imported for it.
func (r *ImageReconciler) holdImage(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider) error {
	f := ArtifactsFinalizer(p)
	if controllerutil.ContainsFinalizer(img, f) || !slices.Contains(r.Kind.ImportFormats, img.Spec.Import.Format) {
		// A format the class does not import builds nothing to remove.
		return nil
	}
	return finalizers.Add(ctx, r.Client, img, f)
}

// running tells whether a job whose key starts with prefix is unfinished.
func (js *importJobs) running(prefix string) bool {
	js.mu.Lock()
	defer js.mu.Unlock()
	for k, j := range js.jobs {
		if finished, _, _, _, _ := j.state(); strings.HasPrefix(k, prefix) && !finished {
			return true
		}
	}
	return false
}

// keepPrevious carries the revisions each failure domain recorded, when
// nothing could be removed.
func keepPrevious(st *v1alpha1.ImageProviderStatus, img *v1alpha1.VMImage, provider string) {
	for _, ps := range img.Status.PerProvider {
		if ps.Provider != provider {
			continue
		}
		for _, was := range ps.FailureDomains {
			for i := range st.FailureDomains {
				fd := &st.FailureDomains[i]
				if fd.Name != was.Name {
					continue
				}
				prev := slices.Clone(was.PreviousRevisions)
				if was.Revision != "" && was.Revision != fd.Revision {
					prev = append(prev, was.Revision)
				}
				sort.Strings(prev)
				if prev = slices.Compact(prev); len(prev) > 0 {
					fd.PreviousRevisions = prev
				}
			}
		}
	}
}
