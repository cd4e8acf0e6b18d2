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
	"libvirt.org/go/libvirtxml"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// ImageImport is an image imported through banlieue against the same
// bytes copied straight to the same backend, in the same run.
type ImageImport struct {
	Backend string `json:"backend"`
	MiB     int    `json:"mib"`
	// Skipped says why the row was not measured.
	Skipped string `json:"skipped,omitempty"`
	// ImportMiBps and RawMiBps are the means of the rounds: VMImage
	// created to Ready, and an HTTP GET of the same URL streamed into a
	// volume by the benchmark itself (virsh vol-upload's path).
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

// images measures image import on a real libvirtd: rounds of a raw copy
// and an import, alternated (raw, import, import, raw, ...), of a raw
// image of cfg.ImageMiB with a marker every MiB (nothing along the way can
// skip holes); writes images.md and images.json.
func (h *harness) images(ctx context.Context) error {
	row := ImageImport{Backend: "libvirt", MiB: h.cfg.ImageMiB, Rounds: 2}
	if m := libvirtd.Missing(); m != "" {
		row.Skipped = "libvirtd cannot run here: needs " + m
		return writeImages(h.cfg.Out, row, time.Now())
	}
	started := time.Now()
	file, sum, err := markedImage(h.env.Dir(), h.cfg.ImageMiB)
	if err != nil {
		return err
	}
	url, stop, err := serveFile(file)
	if err != nil {
		return err
	}
	defer stop()
	root, err := filepath.Abs(filepath.Join(h.cfg.Bin, ".."))
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(h.env.Logs(), "libvirtd.log"))
	if err != nil {
		return err
	}
	defer log.Close()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := libvirtd.Start(startCtx, filepath.Join(h.env.Dir(), "libvirtd"), filepath.Join(root, "bin", ".libvirt-cache"), log)
	if err != nil {
		return err
	}
	defer d.Stop()
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := h.libvirtObjects(ctx, bc, d); err != nil {
		return err
	}
	proc, err := h.env.StartProvider("libvirt", "provider-libvirt", time.Minute, "--domain-type=qemu")
	if err != nil {
		return err
	}
	// Timed from a Ready Provider: its first connection is not the import's.
	if err := waitProviderReady(ctx, bc, "bench-libvirt"); err != nil {
		return err
	}
	var importSecs, rawSecs float64
	for round := range row.Rounds * 2 {
		// raw, import, import, raw: neither side always goes first.
		if round%4 == 0 || round%4 == 3 {
			s, err := rawUpload(d, url, int64(h.cfg.ImageMiB)<<20, round)
			if err != nil {
				return fmt.Errorf("raw upload: %w", err)
			}
			rawSecs += s
			row.RawSeconds = append(row.RawSeconds, s)
			logf("  raw upload %d MiB: %.1fs", h.cfg.ImageMiB, s)
			continue
		}
		s, growth, err := importOnce(ctx, bc, proc.PID(), url, sum, round)
		if err != nil {
			return err
		}
		importSecs += s
		row.ImportSeconds = append(row.ImportSeconds, s)
		row.RSSGrowthMiB = max(row.RSSGrowthMiB, growth)
		logf("  import %d MiB: %.1fs, provider RSS +%.0f MiB", h.cfg.ImageMiB, s, growth)
	}
	row.ImportMiBps = float64(h.cfg.ImageMiB*row.Rounds) / importSecs
	row.RawMiBps = float64(h.cfg.ImageMiB*row.Rounds) / rawSecs
	return writeImages(h.cfg.Out, row, started)
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

// serveFile serves file from loopback, as a mirror would.
func serveFile(file string) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeFile(w, r, file)
	})}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String() + "/" + filepath.Base(file), func() { _ = srv.Close() }, nil
}

// rawUpload is the same bytes without banlieue: an HTTP GET of url
// streamed into a new raw volume through libvirt's stream API (what virsh
// vol-upload does with a file), the volume removed afterwards.
func rawUpload(d *libvirtd.Daemon, url string, size int64, round int) (float64, error) {
	l, err := d.Connect()
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.Disconnect() }()
	pool, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		return 0, err
	}
	doc, err := (&libvirtxml.StorageVolume{Name: fmt.Sprintf("bench-raw-%d.raw", round),
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(size)},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}}}).Marshal()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	vol, err := l.StorageVolCreateXML(pool, doc, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.StorageVolDelete(vol, 0) }()
	if err := l.StorageVolUpload(vol, resp.Body, 0, 0, 0); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}

// importOnce creates a VMImage of url and times it to Ready on the
// benchmark's libvirt Provider, sampling the provider's resident memory;
// the image is deleted afterwards (its volume with it).
func importOnce(ctx context.Context, bc *clientset.Clientset, pid int, url, sum string, round int) (float64, float64, error) {
	api := bc.BanlieueV1alpha1().VMImages()
	before, err := rss(pid)
	if err != nil {
		return 0, 0, err
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-import-%d", round)}, Spec: v1alpha1.VMImageSpec{
		Import: &v1alpha1.ImageImport{URL: url, Checksum: sum, Format: v1alpha1.ImageFormatRaw, ProviderClasses: []string{"libvirt"}}}}
	start := time.Now()
	if _, err := api.Create(ctx, img, metav1.CreateOptions{}); err != nil {
		return 0, 0, err
	}
	// Deleted before the next round, and waited for: its volume is
	// removed then, not during the next round's upload.
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

// writeImages writes images.md and images.json into dir.
func writeImages(dir string, row ImageImport, started time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(row, "", "  ")
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
	if row.Skipped != "" {
		fmt.Fprintf(&b, "Not measured: %s.\n", row.Skipped)
	} else {
		fmt.Fprintf(&b, "A raw image of %d MiB (a marker every MiB), served from loopback, %d rounds each, alternated: "+
			"a VMImage import (created to Ready: fetch, checksum, upload through libvirt's stream API) against the same "+
			"bytes fetched and uploaded into a volume by the benchmark itself (virsh vol-upload's path).\n\n", row.MiB, row.Rounds)
		b.WriteString("| backend | import MiB/s | raw copy MiB/s | import / raw | target | met | provider RSS growth |\n|---|---:|---:|---:|---|---|---:|\n")
		ratio := row.ImportMiBps / row.RawMiBps
		met := "yes"
		if ratio < 0.8 {
			met = "**no**"
		}
		fmt.Fprintf(&b, "| %s | %.1f | %.1f | %.2f | ≥ 0.8 | %s | %.0f MiB |\n", row.Backend, row.ImportMiBps, row.RawMiBps, ratio, met, row.RSSGrowthMiB)
		fmt.Fprintf(&b, "\nEach round's seconds, in run order: raw %s, import %s (a spread between rounds is the machine's, which both sides share).\n",
			seconds(row.RawSeconds), seconds(row.ImportSeconds))
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
