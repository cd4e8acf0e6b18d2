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

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
)

// ImageImport is an image imported through banlieue against the same
// bytes copied straight to the same backend, in the same run: one row of
// images.md a backend.
type ImageImport struct {
	Backend string `json:"backend"`
	// Format is spec.import.format: one the backend takes as it is.
	Format string `json:"format"`
	// MiB is the disk's size; FileMiB the file both sides fetch (an OVA
	// is its descriptor and compressed disk).
	MiB     int     `json:"mib"`
	FileMiB float64 `json:"fileMiB"`
	// Import and RawCopy say what each side does with the bytes.
	Import  string `json:"import"`
	RawCopy string `json:"rawCopy"`
	// Skipped says why the row was not measured.
	Skipped string `json:"skipped,omitempty"`
	// ImportMiBps and RawMiBps are the file's MiB moved per second over
	// the rounds: VMImage created to Ready, and the raw copy.
	ImportMiBps float64 `json:"importMiBPerSecond"`
	RawMiBps    float64 `json:"rawMiBPerSecond"`
	// RSSGrowthMiB is the provider's largest resident memory growth
	// during an import.
	RSSGrowthMiB float64 `json:"providerRSSGrowthMiB"`
	Rounds       int     `json:"rounds"`
	// ImportSeconds and RawSeconds are each round's time, in run order.
	ImportSeconds []float64 `json:"importSeconds"`
	RawSeconds    []float64 `json:"rawSeconds"`
}

// servedImage is an image file served from loopback, as a mirror would.
type servedImage struct {
	url, checksum string
	size          int64
	format        v1alpha1.ImageFormat
}

// importOf is the spec.import of img for class's Providers.
func (img servedImage) importOf(class string) *v1alpha1.ImageImport {
	return &v1alpha1.ImageImport{URL: img.url, Checksum: img.checksum, Format: img.format, ProviderClasses: []string{class}}
}

// imageBackend measures one backend; a row with Skipped set when it
// cannot run here.
type imageBackend func(ctx context.Context, bc *clientset.Clientset, raw servedImage) (ImageImport, error)

// images measures image import on each backend in turn (libvirt on a
// real libvirtd, Proxmox VE on pvesim, vSphere on vcsim), each against
// the same bytes copied straight to it by the benchmark; writes
// images.md and images.json with a row each. raw is a raw image of
// cfg.ImageMiB with a marker every MiB (nothing along the way can skip
// holes), which the backends that take raw images import.
func (h *harness) images(ctx context.Context) error {
	started := time.Now()
	file, sum, err := markedImage(h.env.Dir(), h.cfg.ImageMiB)
	if err != nil {
		return err
	}
	raw, stop, err := serveImage(file, sum, v1alpha1.ImageFormatRaw)
	if err != nil {
		return err
	}
	defer stop()
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	var rows []ImageImport
	for _, b := range []struct {
		name    string
		measure imageBackend
	}{{"libvirt", h.libvirtImages}, {"proxmox", h.proxmoxImages}, {"vsphere", h.vsphereImages}} {
		logf("image import on %s", b.name)
		row, err := b.measure(ctx, bc, raw)
		if err != nil {
			return fmt.Errorf("image import on %s: %w", b.name, err)
		}
		if row.Skipped != "" {
			logf("  %s: not measured: %s", b.name, row.Skipped)
		}
		rows = append(rows, row)
	}
	return writeImages(h.cfg.Out, rows, started)
}

// measureImports runs row.Rounds of the raw copy and of the import of
// img, alternated (raw, import, import, raw, ...: neither side always
// goes first), and fills in row's figures. imp returns the seconds to
// Ready and the provider's RSS growth.
func measureImports(row *ImageImport, img servedImage, rawCopy func(round int) (float64, error), imp func(round int) (float64, float64, error)) error {
	mib := float64(img.size) / (1 << 20)
	row.FileMiB = mib
	var importSecs, rawSecs float64
	for round := range row.Rounds * 2 {
		if round%4 == 0 || round%4 == 3 {
			s, err := rawCopy(round)
			if err != nil {
				return fmt.Errorf("raw copy: %w", err)
			}
			rawSecs += s
			row.RawSeconds = append(row.RawSeconds, s)
			logf("  raw copy %.0f MiB: %.1fs", mib, s)
			continue
		}
		s, growth, err := imp(round)
		if err != nil {
			return fmt.Errorf("import: %w", err)
		}
		importSecs += s
		row.ImportSeconds = append(row.ImportSeconds, s)
		row.RSSGrowthMiB = max(row.RSSGrowthMiB, growth)
		logf("  import %.0f MiB: %.1fs, provider RSS +%.0f MiB", mib, s, growth)
	}
	row.ImportMiBps = mib * float64(row.Rounds) / importSecs
	row.RawMiBps = mib * float64(row.Rounds) / rawSecs
	return nil
}

// markedImage writes a raw image of mib MiB with a marker every MiB and
// returns it with its checksum.
func markedImage(dir string, mib int) (string, string, error) {
	file := filepath.Join(dir, "bench-image.raw")
	f, err := os.Create(file)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	block := make([]byte, 1<<20)
	for i := range mib {
		clear(block)
		copy(block, "banlieue bench image MiB "+strconv.Itoa(i))
		if _, err := io.MultiWriter(f, h).Write(block); err != nil {
			return "", "", err
		}
	}
	return file, "sha256:" + hex.EncodeToString(h.Sum(nil)), nil
}

// serveImage serves file (its checksum sum, of format) from loopback, as
// a mirror would: with its length (http.ServeFile).
func serveImage(file, sum string, format v1alpha1.ImageFormat) (servedImage, func(), error) {
	fi, err := os.Stat(file)
	if err != nil {
		return servedImage{}, nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return servedImage{}, nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, file)
	})}
	go func() { _ = srv.Serve(l) }()
	img := servedImage{url: "http://" + l.Addr().String() + "/" + filepath.Base(file), checksum: sum, size: fi.Size(), format: format}
	return img, func() { _ = srv.Close() }, nil
}

// importOnce creates a VMImage of imp and times it to Ready on the
// Providers of imp's class, sampling the resident memory of their
// provider (pid); the image is deleted afterwards (what it built with it).
func importOnce(ctx context.Context, bc *clientset.Clientset, pid int, imp *v1alpha1.ImageImport, round int) (float64, float64, error) {
	api := bc.BanlieueV1alpha1().VMImages()
	before, err := rss(pid)
	if err != nil {
		return 0, 0, err
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-import-%s-%d", imp.ProviderClasses[0], round)},
		Spec: v1alpha1.VMImageSpec{Import: imp}}
	start := time.Now()
	if _, err := api.Create(ctx, img, metav1.CreateOptions{}); err != nil {
		return 0, 0, err
	}
	// Deleted before the next round, and waited for: what it built is
	// removed then, not during the next round's copy.
	defer deleteAndWait(ctx, bc, img.Name)
	peak := before
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Minute)
	for {
		select {
		case <-ctx.Done():
			return 0, 0, ctx.Err()
		case <-deadline:
			return 0, 0, fmt.Errorf("image %s not Ready in 10 minutes", img.Name)
		case <-tick.C:
		}
		if r, err := rss(pid); err == nil && r > peak {
			peak = r
		}
		got, err := api.Get(ctx, img.Name, metav1.GetOptions{})
		if err != nil {
			return 0, 0, err
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ImageReady); c != nil && c.Status == metav1.ConditionTrue {
			return time.Since(start).Seconds(), float64(peak-before) / (1 << 20), nil
		}
		if c := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ImageReady); c != nil && c.Reason == v1alpha1.ImageReasonImportFailed {
			return 0, 0, fmt.Errorf("image %s: %s", img.Name, c.Message)
		}
	}
}

// writeImages writes images.md and images.json into dir: a row a backend.
func writeImages(dir string, rows []ImageImport, started time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(struct {
		Imports []ImageImport `json:"imports"`
	}{rows}, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "images.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# banlieue image import benchmark\n\nRun %s on %s: %d cores, %s, %s/%s. Took %s.\n\n", started.UTC().Format(time.RFC3339),
		host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Since(started).Round(time.Second))
	b.WriteString("Each backend in turn, in one run: an image file served from loopback, imported through a VMImage (created to Ready) " +
		"against the same file fetched and copied straight to the same backend by the benchmark, rounds alternated (raw copy, import, " +
		"import, raw copy). MiB/s are the file's MiB over each side's seconds; the provider's RSS growth is its largest during an import.\n\n")
	b.WriteString("| backend | format | file | import MiB/s | raw copy MiB/s | import / raw | target | met | provider RSS growth |\n" +
		"|---|---|---:|---:|---:|---:|---|---|---:|\n")
	for _, r := range rows {
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | | ≥ 0.8 | not measured: %s | |\n", r.Backend, r.Format, r.Skipped)
			continue
		}
		ratio := r.ImportMiBps / r.RawMiBps
		met := "yes"
		if ratio < 0.8 {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %s | %.0f MiB | %.1f | %.1f | %.2f | ≥ 0.8 | %s | %.0f MiB |\n",
			r.Backend, r.Format, r.FileMiB, r.ImportMiBps, r.RawMiBps, ratio, met, r.RSSGrowthMiB)
	}
	b.WriteString("\nWhat each side does, and each round's seconds in run order (a spread between rounds is the machine's, which both sides share):\n\n")
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		fmt.Fprintf(&b, "- **%s** (%d MiB disk, %d rounds each). Import: %s. Raw copy: %s. Seconds: raw %s; import %s.\n",
			r.Backend, r.MiB, r.Rounds, r.Import, r.RawCopy, seconds(r.RawSeconds), seconds(r.ImportSeconds))
	}
	logf("wrote %s", filepath.Join(dir, "images.md"))
	return os.WriteFile(filepath.Join(dir, "images.md"), []byte(b.String()), 0o644)
}

func waitProviderReady(ctx context.Context, bc *clientset.Clientset, name string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		p, err := bc.BanlieueV1alpha1().Providers(devenv.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
			return nil
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("Provider %s never became Ready", name)
}

// deleteAndWait deletes the VMImage name and waits until it is gone (its
// Providers' finalizers released after removing what they built).
func deleteAndWait(ctx context.Context, bc *clientset.Clientset, name string) {
	api := bc.BanlieueV1alpha1().VMImages()
	_ = api.Delete(ctx, name, metav1.DeleteOptions{})
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if _, err := api.Get(ctx, name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	logf("  VMImage %s still there after 2 minutes", name)
}

func seconds(s []float64) string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		out = append(out, fmt.Sprintf("%.1f", v))
	}
	return strings.Join(out, ", ")
}
