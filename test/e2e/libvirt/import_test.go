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
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// imageServer serves the repo's test guest, as a mirror would, from
// loopback: GET /guest.qcow2 with its length (http.ServeFile). It
// returns the server's root as the provider's pods reach it.
func imageServer(t *testing.T) (url, checksum string) {
	t.Helper()
	return servedToPods(t, map[string]string{"/guest.qcow2": guest}), imagetest.Checksum(t, guest)
}

// TestImageImportByURL: a VMImage that is only a URL and a checksum
// becomes a base volume on the Provider's host (uploaded by the provider
// through libvirt's stream API), kubectl wait sees it Ready, a VM of it
// is placed where it is ready and boots from it on the real QEMU. A
// wrong checksum, a missing file and bytes of another format each fail
// the failure domain with their reason and leave no volume on the host.
func TestImageImportByURL(t *testing.T) {
	ctx := context.Background()
	base, sum := imageServer(t)
	p := libvirtProvider("import-libvirt", map[string]string{"role": "import"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Another test's Provider of the same host would report on this
	// test's images too.
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	p = waitProviderReady(t, p.Name)
	key := ns + "/" + p.Name

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "imported-guest"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: sum, Format: v1alpha1.ImageFormatQCOW2}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
		"vmimage/imported-guest", "--timeout=2m").CombinedOutput()
	if err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(img), img)
		t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
		t.Fatal(err)
	}
	name := images.ArtifactName(img.UID, img.Status.Revision)
	fd := importedIn(t, img, key)
	if fd.Phase != v1alpha1.ImagePhaseReady || fd.Ref != libvirtd.Pool+"/"+name || fd.Revision != img.Status.Revision || fd.BytesDone == 0 {
		t.Errorf("failure domain status %+v; want Ready with ref %s/%s at revision %s", fd, libvirtd.Pool, name, img.Status.Revision)
	}
	if got := importedVolumes(t, lv(t), name); len(got) != 2 {
		t.Errorf("volumes of %s on the host: %v; want the image and its .ready marker", name, got)
	}
	out, err = exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "get", "vmimage", "imported-guest").CombinedOutput()
	// Every Provider of this host reports it (other tests' too): all of
	// the failure domains reporting are imported.
	if err != nil || !strings.Contains(string(out), "PROGRESS") || !regexp.MustCompile(`True\s+(\d+)/(\d+)`).MatchString(string(out)) ||
		!sameCounts(regexp.MustCompile(`True\s+(\d+)/(\d+)`).FindStringSubmatch(string(out))) {
		t.Errorf("kubectl get vmimage: %v\n%s", err, out)
	}

	// A VM of the imported image boots from it.
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "import-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "imported-vm", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: img.Name},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "import"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/imported-vm", "--timeout=3m").CombinedOutput(); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	lm := &infrav1.LibvirtMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), lm); err != nil {
		t.Fatal(err)
	}
	if lm.Spec.Image != libvirtd.Pool+"/"+name {
		t.Errorf("LibvirtMachine spec.image %q, want the imported volume %s/%s", lm.Spec.Image, libvirtd.Pool, name)
	}
	waitSerial(t, providers.BackendName(ns, vm.Name), "BANLIEUE-READY")
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// Bad input: each fails the failure domain by name and builds nothing.
	for _, tc := range []struct {
		name, url, checksum string
		format              v1alpha1.ImageFormat
		reason              string
	}{
		{"bad-checksum", base + "/guest.qcow2", "sha256:" + strings.Repeat("ab", 32), v1alpha1.ImageFormatQCOW2, v1alpha1.ImageReasonChecksumMismatch},
		{"missing", base + "/nothing.qcow2", sum, v1alpha1.ImageFormatQCOW2, v1alpha1.ImageReasonFetchFailed},
		{"not-raw", base + "/guest.qcow2", sum, v1alpha1.ImageFormatRaw, v1alpha1.ImageReasonFormatMismatch},
		{"too-large", hugeISO(t), sum, v1alpha1.ImageFormatISO, v1alpha1.ImageReasonInsufficientStorage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bad := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "import-" + tc.name}, Spec: v1alpha1.VMImageSpec{
				Import: &v1alpha1.ImageImport{URL: tc.url, Checksum: tc.checksum, Format: tc.format}}}
			if tc.format == v1alpha1.ImageFormatISO {
				bad.Spec.Template = &v1alpha1.ImageTemplate{InstallMode: v1alpha1.InstallModeDeferred}
			}
			if err := c.Create(ctx, bad); err != nil {
				t.Fatal(err)
			}
			var fd v1alpha1.ImageFailureDomainStatus
			eventually(t, time.Minute, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
					return err
				}
				if fd = importedIn(t, bad, key); fd.Phase != v1alpha1.ImagePhaseFailed {
					return fmt.Errorf("failure domain %+v, want Failed", fd)
				}
				return nil
			})
			if tc.reason == v1alpha1.ImageReasonFetchFailed && !strings.Contains(fd.Message, "404") {
				t.Errorf("message %q does not give the HTTP status", fd.Message)
			}
			if fd.Reason != tc.reason {
				t.Errorf("reason %s (%s), want %s", fd.Reason, fd.Message, tc.reason)
			}
			if left := importedVolumes(t, lv(t), images.ArtifactName(bad.UID, bad.Status.Revision)); len(left) > 0 {
				t.Errorf("a failed import left %v on the host", left)
			}
			_ = c.Delete(ctx, bad)
		})
	}
}

// importedIn is the status of img's import in the one failure domain of
// Provider key (an empty status until it reports).
func importedIn(t *testing.T, img *v1alpha1.VMImage, key string) v1alpha1.ImageFailureDomainStatus {
	t.Helper()
	for _, p := range img.Status.PerProvider {
		if p.Provider == key && len(p.FailureDomains) == 1 {
			return p.FailureDomains[0]
		}
	}
	return v1alpha1.ImageFailureDomainStatus{}
}

// importedVolumes are the volumes of the test pool whose name starts with
// name (the image and its marker).
func importedVolumes(t *testing.T, l *golibvirt.Libvirt, name string) []string {
	t.Helper()
	vols, err := libvirtd.PoolVolumes(l, func(v string) bool { return strings.HasPrefix(v, name) })
	if err != nil {
		t.Fatal(err)
	}
	return vols
}

// hugeISO serves an installer that says it has 8 PiB: its first 64 KiB
// are an ISO's (so the format is right), then the answer stalls until the
// client goes. No storage has room for it. It returns the URL as the
// provider's pods reach it.
func hugeISO(t *testing.T) string {
	t.Helper()
	head, err := cloudinit.ISO("HUGE", map[string][]byte{"readme": []byte("huge\n")})
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(8<<50, 10))
		_, _ = w.Write(head)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	return podURL(t, "http://"+l.Addr().String()+"/huge.iso")
}

// sameCounts tells whether a "READY/ALL" match has READY equal to ALL.
func sameCounts(m []string) bool { return len(m) == 3 && m[1] == m[2] }
