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
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
)

// TestInstallerImages: the product guide's pipeline on the real libvirtd
// and QEMU, from the repo's installer ISO (hack/build-installer-iso.sh: it
// installs the test guest onto a blank disk with the seed's cloud-config
// applied, then powers off).
//   - immediate: a build VM installs it once, with the image's
//     cloudConfigs; its disk becomes the base volume; the build VM and
//     the installer are gone; a VM cloned from it boots installed and shows
//     the cloudConfigs' marker.
//   - deferred: the ISO itself is the image; a VM boots it from its blank
//     disk, installs itself with its own seed, powers off, is powered on
//     again by the provider and boots installed.
//   - an installer that never powers off fails with InstallTimedOut and
//     leaves no build VM and no volume.
func TestInstallerImages(t *testing.T) {
	ctx := context.Background()
	iso := filepath.Join(root, "bin", "guest", "installer.iso")
	if out, err := exec.Command(filepath.Join(root, "hack", "build-installer-iso.sh"), iso).CombinedOutput(); err != nil {
		t.Fatalf("hack/build-installer-iso.sh (make libvirt installs its tools): %v\n%s", err, out)
	}
	// An ISO that boots nothing: the build VM never powers itself off.
	dead, err := cloudinit.ISO("NOTHING", map[string][]byte{"readme": []byte("no installer here\n")})
	if err != nil {
		t.Fatal(err)
	}
	deadISO := imagetest.WriteFile(t, "dead.iso", dead)
	base := servedToPods(t, map[string]string{"/installer.iso": iso, "/dead.iso": deadISO})
	p := libvirtProvider("install-libvirt", map[string]string{"role": "install"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Another test's Provider of the same host would report on this
	// test's images too.
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitProviderReady(t, p.Name)
	key := ns + "/" + p.Name

	token := "installed-" + rand.String(8)
	cc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "install-marker", Namespace: ns}, StringData: map[string]string{
		"cloud-config": fmt.Sprintf("#cloud-config\nwrite_files:\n- path: /etc/banlieue/marker\n  content: %s\n", token)}}
	if err := c.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	// The administrator publishing the image names its cloud config in
	// the static provider's credentials Role (the operator does it itself).
	if err := env.GrantCredentials(ctx, "libvirt", "secrets", cc.Name); err != nil {
		t.Fatal(err)
	}
	installer := func(name string, mode v1alpha1.InstallMode, url string, timeout *int32) *v1alpha1.VMImage {
		img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VMImageSpec{
			Import: &v1alpha1.ImageImport{URL: base + url, Checksum: imagetest.Checksum(t, map[string]string{"/installer.iso": iso, "/dead.iso": deadISO}[url]),
				Format: v1alpha1.ImageFormatISO, InstallTimeoutSeconds: timeout, ProviderClasses: []string{"libvirt"}},
			Template:     &v1alpha1.ImageTemplate{InstallMode: mode, Firmware: v1alpha1.FirmwareBIOS},
			CloudConfigs: []v1alpha1.CloudConfigSource{{SecretRef: v1alpha1.LocalObjectReference{Name: cc.Name}}}}}
		if err := c.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
		return img
	}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "install-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vmOf := func(name, image string) string {
		vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "install"}}}}}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
		return providers.BackendName(ns, name)
	}

	t.Run("immediate", func(t *testing.T) {
		img := installer("installer-immediate", v1alpha1.InstallModeImmediate, "/installer.iso", nil)
		waitImage(t, img, 5*time.Minute)
		name := images.ArtifactName(img.UID, img.Status.Revision)
		if !sawEvent(t, img.Name, string(v1alpha1.ImagePhaseInstalling)) {
			t.Error("no Installing Event on the VMImage")
		}
		if got := importedVolumes(t, lv(t), name); len(got) != 2 {
			t.Errorf("volumes of %s: %v; want the installed disk and its marker (no installer, no build VM disk)", name, got)
		}
		if _, err := lv(t).DomainLookupByName("banlieue-build-" + name); err == nil {
			t.Error("the build VM is still defined")
		}
		domain := vmOf("from-immediate", img.Name)
		for _, want := range []string{"BANLIEUE-INSTALLED " + token, "BANLIEUE-READY"} {
			waitSerialFor(t, domain, want, 3*time.Minute)
		}
		if log := daemon.SerialLog(domain); strings.Contains(log, "BANLIEUE-INSTALLER START") {
			t.Errorf("a VM of an immediate image ran the installer:\n%s", log)
		}
	})

	t.Run("deferred", func(t *testing.T) {
		img := installer("installer-deferred", v1alpha1.InstallModeDeferred, "/installer.iso", nil)
		waitImage(t, img, 2*time.Minute)
		domain := vmOf("from-deferred", img.Name)
		// The clone installs itself from its own blank disk, powers off
		// and is powered on again into the installed system.
		for _, want := range []string{"BANLIEUE-INSTALLER DONE", "BANLIEUE-INSTALLED " + token, "BANLIEUE-READY"} {
			waitSerialFor(t, domain, want, 5*time.Minute)
		}
	})

	t.Run("never powers off", func(t *testing.T) {
		img := installer("installer-stuck", v1alpha1.InstallModeImmediate, "/dead.iso", ptrTo[int32](60))
		var fd v1alpha1.ImageFailureDomainStatus
		eventually(t, 3*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
				return err
			}
			if fd = importedIn(t, img, key); fd.Phase != v1alpha1.ImagePhaseFailed {
				return fmt.Errorf("failure domain %+v, want Failed", fd)
			}
			return nil
		})
		if fd.Reason != v1alpha1.ImageReasonInstallTimedOut {
			t.Errorf("reason %s (%s), want InstallTimedOut", fd.Reason, fd.Message)
		}
		name := images.ArtifactName(img.UID, img.Status.Revision)
		if left := importedVolumes(t, lv(t), name); len(left) > 0 {
			t.Errorf("a timed-out install left %v", left)
		}
		if _, err := lv(t).DomainLookupByName("banlieue-build-" + name); err == nil {
			t.Error("a timed-out install left its build VM")
		}
		_ = c.Delete(ctx, img)
	})
}

func ptrTo[T any](v T) *T { return &v }

// waitImage waits for kubectl wait to see img Ready, and reads it again.
func waitImage(t *testing.T, img *v1alpha1.VMImage, timeout time.Duration) {
	t.Helper()
	out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
		"vmimage/"+img.Name, fmt.Sprintf("--timeout=%ds", int(timeout.Seconds()))).CombinedOutput()
	_ = c.Get(context.Background(), client.ObjectKeyFromObject(img), img)
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
	}
}

func waitSerialFor(t *testing.T, name, want string, timeout time.Duration) {
	t.Helper()
	eventually(t, timeout, func() error {
		if log := daemon.SerialLog(name); !strings.Contains(log, want) {
			return fmt.Errorf("no %q on %s's serial console:\n%s", want, name, log)
		}
		return nil
	})
}

// sawEvent tells whether an Event with reason was recorded about the
// VMImage name.
func sawEvent(t *testing.T, name, reason string) bool {
	t.Helper()
	var list eventsv1.EventList
	if err := c.List(context.Background(), &list); err != nil {
		t.Fatal(err)
	}
	for _, e := range list.Items {
		if e.Regarding.Kind == "VMImage" && e.Regarding.Name == name && e.Reason == reason {
			return true
		}
	}
	return false
}
