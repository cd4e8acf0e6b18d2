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

package libvirt

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// slowServer serves file at /image in 256 KiB writes, one per tick: an
// upload slow enough to kill the provider in the middle of. It returns
// the URL as the provider's pods reach it.
func slowServer(t *testing.T, file string, tick time.Duration) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(data)))
		ticker := time.NewTicker(tick)
		defer ticker.Stop()
		for rest := data; len(rest) > 0; {
			n := min(len(rest), 256<<10)
			if _, err := w.Write(rest[:n]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			rest = rest[n:]
			select {
			case <-ticker.C:
			case <-r.Context().Done():
				return
			}
		}
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return podURL(t, "http://"+l.Addr().String()+"/image")
}

// TestImportSurvivesProviderKill: the provider (the leading pod's
// container, crashWhen) is SIGKILLed while it uploads an image; started
// again by the kubelet, it re-imports: exactly the volume and
// its marker are on the host, with exactly the source's bytes.
func TestImportSurvivesProviderKill(t *testing.T) {
	ctx := context.Background()
	url := slowServer(t, guest, 50*time.Millisecond)
	p := libvirtProvider("crash-import", map[string]string{"role": "crash-import"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitProviderReady(t, p.Name)
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "crash-import"}, Spec: v1alpha1.VMImageSpec{
		Import: &v1alpha1.ImageImport{URL: url, Checksum: imagetest.Checksum(t, guest), Format: v1alpha1.ImageFormatQCOW2}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	eventually(t, 30*time.Second, func() error { return c.Get(ctx, client.ObjectKeyFromObject(img), img) })
	name := images.ArtifactName(img.UID, img.Status.Revision)
	l := lv(t)
	crashWhen(t, "upload", func() (bool, string) {
		vols := importedVolumes(t, l, name)
		return slices.Contains(vols, name) && !slices.Contains(vols, name+".ready"), fmt.Sprintf("volumes %v", vols)
	})
	waitImage(t, img, 3*time.Minute)
	if vols := importedVolumes(t, l, name); len(vols) != 2 {
		t.Errorf("volumes after the restart %v: want the image and its marker, once", vols)
	}
	if got, want := volumeSHA256(t, name), imagetest.Checksum(t, guest); got != want {
		t.Errorf("the volume's bytes are %s, the source's %s", got, want)
	}
}

// volumeSHA256 downloads the pool's volume name and sums it, as
// spec.import.checksum writes a sum.
func volumeSHA256(t *testing.T, name string) string {
	t.Helper()
	l := lv(t)
	pool, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		t.Fatal(err)
	}
	vol, err := l.StorageVolLookupByName(pool, name)
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if err := l.StorageVolDownload(vol, h, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil))
}

// TestImportMemoryIsBounded: importing a 1 GiB image grows the provider's
// resident memory (its leading pod's container's main process, read from
// the host's /proc) by at most 64 MiB: the bytes stream, they are never
// held.
func TestImportMemoryIsBounded(t *testing.T) {
	ctx := context.Background()
	const size = 1 << 30
	file := filepath.Join(t.TempDir(), "big.raw")
	f, err := os.Create(file)
	if err != nil {
		t.Fatal(err)
	}
	// Not all zeros, so nothing along the way can skip holes: a marker
	// every MiB.
	for off := int64(0); off < size; off += 1 << 20 {
		if _, err := f.WriteAt([]byte("banlieue"+strconv.FormatInt(off, 10)), off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	base := servedToPods(t, map[string]string{"/big.raw": file})
	p := libvirtProvider("memory-import", map[string]string{"role": "memory-import"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitProviderReady(t, p.Name)
	// The leading replica's container does the import: its main process
	// is the provider.
	leader, err := env.ProviderLeader(ctx, "libvirt")
	if err != nil {
		t.Fatal(err)
	}
	proc, err := devenv.ContainerProcess(leader, 0)
	if err != nil {
		t.Fatal(err)
	}
	pid := proc.PID
	before, err := rssOf(pid)
	if err != nil {
		t.Fatal(err)
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "memory-import"}, Spec: v1alpha1.VMImageSpec{
		Import: &v1alpha1.ImageImport{URL: base + "/big.raw", Checksum: imagetest.Checksum(t, file), Format: v1alpha1.ImageFormatRaw}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	peak := before
	eventually(t, 5*time.Minute, func() error {
		if r, err := rssOf(pid); err == nil && r > peak {
			peak = r
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		if fd := importedIn(t, img, ns+"/"+p.Name); fd.Phase != v1alpha1.ImagePhaseReady {
			return fmt.Errorf("failure domain %+v", fd)
		}
		return nil
	})
	growth := peak - before
	t.Logf("provider RSS %d MiB before, peak %d MiB during a 1 GiB import (growth %d MiB)", before>>20, peak>>20, growth>>20)
	if growth > 64<<20 {
		t.Errorf("the provider grew by %d MiB importing 1 GiB, want at most 64 MiB", growth>>20)
	}
}

// rssOf is a process's resident set size in bytes (VmRSS).
func rssOf(pid int) (int64, error) {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}
