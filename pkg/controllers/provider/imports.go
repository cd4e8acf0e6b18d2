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
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/fetch"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/redact"
)

// Defaults of the import machinery.
const (
	// DefaultImportsPerProvider bounds the imports a Provider runs at once.
	DefaultImportsPerProvider = 2
	// importTimeout bounds one import, fetch and upload.
	importTimeout = 2 * time.Hour
	// importPoll is how often an image with imports in flight is
	// reconciled, to publish their progress.
	importPoll = 2 * time.Second
	// DefaultInstallTimeout is spec.import.installTimeoutSeconds' default.
	DefaultInstallTimeout = 30 * time.Minute
	// InstallDiskGiB is a build VM's blank disk: thin, and grown by each
	// clone to its class's size.
	InstallDiskGiB = 8
	// firstRetry and lastRetry bound the backoff between failed attempts.
	firstRetry, lastRetry = 10 * time.Second, 5 * time.Minute
)

// importJobs are the imports this process runs, by Provider, location
// scope and artifact: each in its own goroutine, never under a reconcile
// or a lock. In memory only: a process restarted finds no job and no
// complete artifact, and imports again, the backend first removing what
// the interrupted import left.
type importJobs struct {
	mu    sync.Mutex
	jobs  map[string]*importJob
	slots map[string]chan struct{}
}

// importJob is one import, running or finished.
type importJob struct {
	done, total atomic.Int64
	started     atomic.Bool
	installing  atomic.Bool

	mu       sync.Mutex
	finished bool
	ref      string
	reason   string
	err      error
	attempts int
	retryAt  time.Time
}

func (j *importJob) state() (finished bool, ref, reason string, err error, retryAt time.Time) {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.finished, j.ref, j.reason, j.err, j.retryAt
}

// importStatus reports img's import on Provider p, failure domain by
// failure domain, starting the imports that are due.
func (r *ImageReconciler) importStatus(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider) (v1alpha1.ImageProviderStatus, bool) {
	format := img.Spec.Import.Format
	if !slices.Contains(r.Kind.ImportFormats, format) {
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonFormatUnsupported,
			Message: fmt.Sprintf("provider class %s does not import %s images (it imports %v): spec.import.format", r.Class, format, r.Kind.ImportFormats)}, false
	}
	if img.Status.Revision == "" {
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonPending, Message: "the API server has not named the import's revision yet"}, false
	}
	if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonConnectFailed, Message: "the Provider is not Ready"}, false
	}
	storage := providers.ImageStorage(p)
	if storage == "" {
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonImportFailed,
			Message: "the Provider publishes no storage class: its first one's target holds imported images"}, false
	}
	backend, err := r.Providers.backend(ctx, p)
	if err != nil {
		log.FromContext(ctx).Info("Cannot import an image: the Provider's backend is unreachable", "provider", placement.ImageStatusKey(p), "err", err)
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonConnectFailed,
			Message: "cannot reach the Provider's backend; the Provider's Ready condition has the details"}, false
	}
	importer, ok := providers.Importer(backend)
	if !ok {
		return v1alpha1.ImageProviderStatus{Reason: v1alpha1.ImageReasonFormatUnsupported,
			Message: fmt.Sprintf("provider class %s imports no images", r.Class)}, false
	}
	target := providers.ImageTarget{Name: images.ArtifactName(img.UID, img.Status.Revision), Format: format, Storage: storage, Size: -1}
	if t := img.Spec.Template; t != nil && format == v1alpha1.ImageFormatISO {
		// Deferred too: the template each clone installs in boots with it.
		target.Firmware = string(t.Firmware)
	}
	st := v1alpha1.ImageProviderStatus{Ready: true}
	busy := false
	for _, scope := range r.scopes(p) {
		fd := r.importIn(ctx, img, p, importer, scope.location, target)
		busy = busy || fd.Phase == v1alpha1.ImagePhaseImporting || fd.Phase == v1alpha1.ImagePhasePending
		for _, name := range scope.failureDomains {
			fd.Name = name
			keepCounts(&fd, img, placement.ImageStatusKey(p))
			st.FailureDomains = append(st.FailureDomains, fd)
			st.Ready = st.Ready && fd.Phase == v1alpha1.ImagePhaseReady
		}
	}
	sort.Slice(st.FailureDomains, func(i, j int) bool { return st.FailureDomains[i].Name < st.FailureDomains[j].Name })
	if inUse, err := r.revisionsInUse(ctx, img); err != nil {
		log.FromContext(ctx).Info("Cannot tell which revisions of an image machines use; none removed", "err", err)
		keepPrevious(&st, img, placement.ImageStatusKey(p))
	} else {
		r.removeUnused(ctx, img, p, importer, target, &st, inUse)
	}
	switch {
	case len(st.FailureDomains) == 0:
		st.Ready, st.Reason, st.Message = false, v1alpha1.ImageReasonPending, "the Provider publishes no failure domains"
	case !st.Ready:
		st.Reason, st.Message = summarize(st.FailureDomains)
	default:
		st.Message = fmt.Sprintf("imported as %s in %d failure domain(s)", target.Name, len(st.FailureDomains))
	}
	return st, busy
}

// keepCounts keeps the byte counts a Ready failure domain was reported
// with, which a process restarted since does not know.
func keepCounts(fd *v1alpha1.ImageFailureDomainStatus, img *v1alpha1.VMImage, provider string) {
	if fd.Phase != v1alpha1.ImagePhaseReady || fd.BytesDone > 0 {
		return
	}
	for _, p := range img.Status.PerProvider {
		for _, was := range p.FailureDomains {
			if p.Provider == provider && was.Name == fd.Name && was.Revision == fd.Revision && was.Phase == fd.Phase {
				fd.BytesDone, fd.BytesTotal = was.BytesDone, was.BytesTotal
			}
		}
	}
}

// scope is a place imported images are kept once for the failure domains
// that find their images there (a libvirt host, a vSphere datacenter, a
// Proxmox VE node: the kind's ImportScope, else its Scope).
type scope struct {
	location       failuredomain.Location
	failureDomains []string
}

func (r *ImageReconciler) scopes(p *v1alpha1.Provider) []scope {
	by := map[string]*scope{}
	for _, fd := range p.Status.FailureDomains {
		l := r.importScope(failuredomain.LocationOf(fd))
		s, ok := by[l.String()]
		if !ok {
			s = &scope{location: l}
			by[l.String()] = s
		}
		s.failureDomains = append(s.failureDomains, fd.Name)
	}
	out := make([]scope, 0, len(by))
	for _, s := range by {
		out = append(out, *s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].location.String() < out[j].location.String() })
	return out
}

// importScope is the place l finds imported images in: the kind's
// ImportScope, else its Scope.
func (r *ImageReconciler) importScope(l failuredomain.Location) failuredomain.Location {
	if r.Kind.ImportScope != nil {
		return r.Kind.ImportScope(l)
	}
	return r.Kind.Scope(l)
}

func summarize(fds []v1alpha1.ImageFailureDomainStatus) (string, string) {
	for _, fd := range fds {
		if fd.Phase == v1alpha1.ImagePhaseFailed {
			return fd.Reason, fmt.Sprintf("failure domain %s: %s", fd.Name, fd.Message)
		}
	}
	n := 0
	for _, fd := range fds {
		if fd.Phase == v1alpha1.ImagePhaseReady {
			n++
		}
	}
	return v1alpha1.ImageReasonImporting, fmt.Sprintf("ready in %d of %d failure domains", n, len(fds))
}

// importIn is the import of target in one scope: Ready when the backend
// has it complete, else the job's progress or failure, starting a job
// when none runs and no failure is waiting out its backoff.
func (r *ImageReconciler) importIn(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider, importer providers.ImageImporter,
	loc failuredomain.Location, target providers.ImageTarget) v1alpha1.ImageFailureDomainStatus {
	out := v1alpha1.ImageFailureDomainStatus{Revision: img.Status.Revision}
	// Keyed by where the bytes go, not by Provider: two Providers of one
	// host (or cluster) share what is built there, and two imports of it
	// at once would remove each other's leftovers. A second Provider
	// reports the running job, then finds the artifact built.
	key := loc.String() + "|" + target.Storage + "|" + target.Name
	job := r.jobs.get(key)
	if job != nil {
		finished, _, reason, err, retryAt := job.state()
		if !finished {
			out.Phase, out.BytesDone, out.BytesTotal = v1alpha1.ImagePhaseImporting, job.done.Load(), max(job.total.Load(), 0)
			switch {
			case !job.started.Load():
				out.Phase, out.Message = v1alpha1.ImagePhasePending, "waiting for one of the Provider's import slots"
			case job.installing.Load():
				out.Phase, out.Message = v1alpha1.ImagePhaseInstalling, "a build VM runs the installer; it powers itself off when done"
			}
			return out
		}
		if err != nil && time.Now().Before(retryAt) {
			out.Phase, out.Reason = v1alpha1.ImagePhaseFailed, reason
			out.Message = fmt.Sprintf("%s (retried at %s)", redact.Message(err.Error()), retryAt.UTC().Format(time.RFC3339))
			return out
		}
	}
	ref, found, err := importer.ImportedImage(ctx, loc, target)
	if err != nil {
		out.Phase, out.Reason, out.Message = v1alpha1.ImagePhasePending, v1alpha1.ImageReasonLookupFailed, redact.Message(err.Error())
		return out
	}
	if found {
		out.Phase, out.Ref = v1alpha1.ImagePhaseReady, ref
		if job != nil {
			out.BytesDone, out.BytesTotal = job.done.Load(), max(job.total.Load(), 0)
		}
		return out
	}
	src, err := r.source(ctx, img, p)
	if err != nil {
		out.Phase, out.Reason, out.Message = v1alpha1.ImagePhaseFailed, v1alpha1.ImageReasonFetchFailed, err.Error()
		return out
	}
	if target.Install, err = r.install(ctx, img, p); err != nil {
		out.Phase, out.Reason, out.Message = v1alpha1.ImagePhaseFailed, v1alpha1.ImageReasonImportFailed, err.Error()
		return out
	}
	attempts := 0
	if job != nil {
		job.mu.Lock()
		attempts = job.attempts
		job.mu.Unlock()
	}
	r.jobs.start(key, placement.ImageStatusKey(p), r.importsPerProvider(), attempts, func(j *importJob) (string, error) {
		if target.Install != nil {
			target.Install.Installing = func() { j.installing.Store(true) }
		}
		// The image is reconciled the moment its job ends, not at the
		// next progress poll: Ready (or Failed) without delay.
		defer r.finished(img)
		return r.runImport(j, importer, loc, target, src)
	})
	out.Phase = v1alpha1.ImagePhasePending
	return out
}

// finished queues img for a reconcile, without ever blocking a job.
func (r *ImageReconciler) finished(img *v1alpha1.VMImage) {
	select {
	case r.jobDone <- event.GenericEvent{Object: &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: img.Name}}}:
	default:
		// The queue is full of wake-ups already; the progress poll
		// reconciles the image soon enough.
	}
}

// source is what to fetch, with the mirror's credentials read by name
// from the Provider's namespace.
func (r *ImageReconciler) source(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider) (fetch.Source, error) {
	im := img.Spec.Import
	src := fetch.Source{URL: im.URL, Checksum: im.Checksum}
	if im.SecretRef == nil {
		return src, nil
	}
	s := &corev1.Secret{}
	if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: im.SecretRef.Name}, s); err != nil {
		return src, fmt.Errorf("reading the mirror's Secret %s/%s (spec.import.secretRef): %w", p.Namespace, im.SecretRef.Name, err)
	}
	src.Username, src.Password, src.Token = string(s.Data["username"]), string(s.Data["password"]), string(s.Data["token"])
	src.CA = s.Data["ca.crt"]
	return src, nil
}

// install is how an installer image (format iso) of installMode
// immediate is installed by a build VM (the template's firmware is the
// target's): the image's cloudConfigs (read by name from the Provider's namespace) as
// the seed's user data; nil for any other image.
func (r *ImageReconciler) install(ctx context.Context, img *v1alpha1.VMImage, p *v1alpha1.Provider) (*providers.ImageInstall, error) {
	t := img.Spec.Template
	if img.Spec.Import.Format != v1alpha1.ImageFormatISO || t == nil || t.InstallMode == v1alpha1.InstallModeDeferred {
		return nil, nil
	}
	var docs [][]byte
	for _, cc := range img.Spec.CloudConfigs {
		s := &corev1.Secret{}
		if err := r.Reader.Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: cc.SecretRef.Name}, s); err != nil {
			return nil, fmt.Errorf("reading cloud config Secret %s/%s (spec.cloudConfigs): %w", p.Namespace, cc.SecretRef.Name, err)
		}
		docs = append(docs, s.Data["cloud-config"])
	}
	userData := []byte("#cloud-config\n")
	if len(docs) > 0 {
		var err error
		if userData, err = cloudinit.Multipart(docs...); err != nil {
			return nil, fmt.Errorf("spec.cloudConfigs: %w", err)
		}
	}
	timeout := DefaultInstallTimeout
	if s := img.Spec.Import.InstallTimeoutSeconds; s != nil {
		timeout = time.Duration(*s) * time.Second
	}
	return &providers.ImageInstall{UserData: userData, DiskSizeGiB: InstallDiskGiB, Timeout: timeout}, nil
}

// runImport fetches src into target at loc.
// Each attempt is timed (ImageImportDuration) and its bytes counted as
// they are read (ImageImportBytes).
func (r *ImageReconciler) runImport(j *importJob, importer providers.ImageImporter, loc failuredomain.Location, target providers.ImageTarget, src fetch.Source) (ref string, err error) {
	defer func(start time.Time) { observeImport(r.Class, start, err) }(time.Now())
	ctx, cancel := context.WithTimeout(context.Background(), importTimeout)
	defer cancel()
	body, err := fetch.Open(ctx, src, r.Guard)
	if err != nil {
		return "", err
	}
	defer body.Close()
	j.total.Store(body.Size)
	target.Size = body.Size
	counted := &counting{r: body, n: &j.done, bytes: ImageImportBytes.WithLabelValues(r.Class)}
	return importer.ImportImage(ctx, loc, target, counted)
}

func (r *ImageReconciler) importsPerProvider() int {
	if r.ImportsPerProvider > 0 {
		return r.ImportsPerProvider
	}
	return DefaultImportsPerProvider
}

// reasonOf is the failure domain's reason for an import's error.
func reasonOf(err error) string {
	var ce *fetch.ChecksumError
	var fe *fetch.FetchError
	switch {
	case errors.As(err, &ce):
		return v1alpha1.ImageReasonChecksumMismatch
	case errors.As(err, &fe), errors.Is(err, fetch.ErrDenied):
		return v1alpha1.ImageReasonFetchFailed
	case errors.Is(err, providers.ErrFormatMismatch):
		return v1alpha1.ImageReasonFormatMismatch
	case errors.Is(err, providers.ErrInsufficientStorage):
		return v1alpha1.ImageReasonInsufficientStorage
	case errors.Is(err, providers.ErrInstallTimedOut):
		return v1alpha1.ImageReasonInstallTimedOut
	}
	return v1alpha1.ImageReasonImportFailed
}

func (js *importJobs) get(key string) *importJob {
	js.mu.Lock()
	defer js.mu.Unlock()
	return js.jobs[key]
}

// start runs run as the job of key, in its own goroutine, once one of the
// owner's slots is free.
func (js *importJobs) start(key, owner string, slots, attempts int, run func(*importJob) (string, error)) {
	js.mu.Lock()
	if js.jobs == nil {
		js.jobs, js.slots = map[string]*importJob{}, map[string]chan struct{}{}
	}
	if j, ok := js.jobs[key]; ok {
		if finished, _, _, _, _ := j.state(); !finished {
			js.mu.Unlock()
			return
		}
	}
	j := &importJob{attempts: attempts + 1}
	j.total.Store(-1)
	js.jobs[key] = j
	slot, ok := js.slots[owner]
	if !ok {
		slot = make(chan struct{}, slots)
		js.slots[owner] = slot
	}
	js.mu.Unlock()
	go func() {
		slot <- struct{}{}
		defer func() { <-slot }()
		j.started.Store(true)
		ref, err := run(j)
		j.mu.Lock()
		defer j.mu.Unlock()
		j.finished, j.ref, j.err = true, ref, err
		if err != nil {
			j.reason = reasonOf(err)
			j.retryAt = time.Now().Add(backoff(j.attempts))
		}
	}()
}

// backoff is the wait before attempt n+1 after n failed ones.
func backoff(n int) time.Duration {
	d := firstRetry
	for i := 1; i < n && d < lastRetry; i++ {
		d *= 2
	}
	return min(d, lastRetry)
}

// counting counts the bytes read through it, in n and bytes.
type counting struct {
	r     interface{ Read([]byte) (int, error) }
	n     *atomic.Int64
	bytes prometheus.Counter
}

func (c *counting) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	c.bytes.Add(float64(n))
	return n, err
}
