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
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestImageLifecycle: the revisions of an imported image over its life
// (issue 33), counted on the real host. A VM keeps the revision it was
// built from when the image's URL and checksum change; a new VM gets the
// new one; the first revision's volume stays while the first VM exists
// and goes once it is deleted. Deleting the VMImage waits, naming the VM
// still using it, and removes every volume once that VM is gone; an image
// with retainOnDelete leaves its volume behind.
func TestImageLifecycle(t *testing.T) {
	ctx := context.Background()
	// The second revision: the same guest, other bytes (another cluster size).
	second := filepath.Join(t.TempDir(), "guest2.qcow2")
	imagetest.Run(t, imagetest.Tool(t, "qemu-img"), "convert", "-O", "qcow2", "-o", "cluster_size=131072", guest, second)
	base := servedToPods(t, map[string]string{"/guest.qcow2": guest, "/guest2.qcow2": second})
	sum1, sum2 := imagetest.Checksum(t, guest), imagetest.Checksum(t, second)
	if sum1 == sum2 {
		t.Fatal("the second image has the first's bytes")
	}

	p := libvirtProvider("imglife-libvirt", map[string]string{"role": "imglife"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Gone at the end (once its machines are), so that no later test's
	// image is imported by it too.
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitProviderReady(t, p.Name)
	key := ns + "/" + p.Name
	host := lv(t)

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "imglife-guest"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: sum1, Format: v1alpha1.ImageFormatQCOW2}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	waitImageReady(t, img)
	rev1 := img.Status.Revision
	prefix := images.ArtifactName(img.UID, "")
	ref1 := libvirtd.Pool + "/" + images.ArtifactName(img.UID, rev1)
	if !slices.Contains(img.Finalizers, p.Name+"."+ns+".providers.banlieue.io/vmimage-artifacts") {
		t.Errorf("finalizers %v: the provider does not hold the image it imported", img.Finalizers)
	}

	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "imglife-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm1 := imglifeVM(t, "imglife-vm-1", class.Name, img.Name)
	if lm := machineOf(t, vm1); lm.Spec.Image != ref1 {
		t.Fatalf("first VM's machine spec.image %q, want %s", lm.Spec.Image, ref1)
	}

	// A new URL and checksum: a second revision, for new VMs only.
	if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
		t.Fatal(err)
	}
	img.Spec.Import.URL, img.Spec.Import.Checksum = base+"/guest2.qcow2", sum2
	if err := c.Update(ctx, img); err != nil {
		t.Fatal(err)
	}
	waitImageReady(t, img)
	rev2 := img.Status.Revision
	ref2 := libvirtd.Pool + "/" + images.ArtifactName(img.UID, rev2)
	if rev2 == rev1 {
		t.Fatalf("revision %s unchanged by a new URL and checksum", rev2)
	}
	if fd := importedIn(t, img, key); fd.Revision != rev2 || !slices.Contains(fd.PreviousRevisions, rev1) {
		t.Errorf("failure domain %+v: want revision %s with %s kept as a previous one", fd, rev2, rev1)
	}
	if got := importedVolumes(t, host, prefix); len(got) != 4 {
		t.Errorf("volumes on the host %v; want both revisions' (each with its marker)", got)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm1), vm1); err != nil {
		t.Fatal(err)
	}
	if vm1.Status.ImageRevision != rev1 {
		t.Errorf("first VM's status.imageRevision %q, want %s", vm1.Status.ImageRevision, rev1)
	}
	// Its machine keeps the first revision, reconciled since.
	time.Sleep(5 * time.Second)
	if lm := machineOf(t, vm1); lm.Spec.Image != ref1 {
		t.Errorf("first VM's machine spec.image %q after the change, want %s", lm.Spec.Image, ref1)
	}
	vm2 := imglifeVM(t, "imglife-vm-2", class.Name, img.Name)
	if lm := machineOf(t, vm2); lm.Spec.Image != ref2 {
		t.Errorf("second VM's machine spec.image %q, want %s", lm.Spec.Image, ref2)
	}
	if got := importedVolumes(t, host, images.ArtifactName(img.UID, rev1)); len(got) != 2 {
		t.Errorf("the first revision's volumes %v while the first VM uses it", got)
	}

	// The first VM gone, nothing uses the first revision: it is removed.
	deleteVM(t, vm1)
	eventually(t, time.Minute, func() error {
		if got := importedVolumes(t, host, images.ArtifactName(img.UID, rev1)); len(got) > 0 {
			return fmt.Errorf("the first revision's volumes %v are still on the host", got)
		}
		return nil
	})
	if got := importedVolumes(t, host, images.ArtifactName(img.UID, rev2)); len(got) != 2 {
		t.Errorf("the second revision's volumes %v, want the image and its marker", got)
	}
	eventually(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		if fd := importedIn(t, img, key); len(fd.PreviousRevisions) > 0 {
			return fmt.Errorf("previousRevisions %v after their removal", fd.PreviousRevisions)
		}
		return nil
	})

	// Deleting the image waits for the second VM, naming it.
	if err := c.Delete(ctx, img); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(img.Status.Conditions, v1alpha1.ImageDeleting)
		if cond == nil || cond.Status != metav1.ConditionTrue || !strings.Contains(cond.Message, ns+"/"+vm2.Name) {
			return fmt.Errorf("Deleting condition %+v does not name %s/%s", cond, ns, vm2.Name)
		}
		return nil
	})
	if got := importedVolumes(t, host, prefix); len(got) != 2 {
		t.Errorf("volumes %v while the deleted image is in use; want the second revision's", got)
	}
	deleteVM(t, vm2)
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the VMImage is still there (%v): finalizers %v, conditions %+v", err, img.Finalizers, img.Status.Conditions)
		}
		return nil
	})
	if got := importedVolumes(t, host, prefix); len(got) > 0 {
		t.Errorf("volumes %v left on the host by the deleted image", got)
	}

	// retainOnDelete: the volume outlives the image.
	kept := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "imglife-retained"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: sum1, Format: v1alpha1.ImageFormatQCOW2, RetainOnDelete: true}}}
	if err := c.Create(ctx, kept); err != nil {
		t.Fatal(err)
	}
	waitImageReady(t, kept)
	keptName := images.ArtifactName(kept.UID, kept.Status.Revision)
	t.Cleanup(func() {
		l := lv(t)
		pool, err := l.StoragePoolLookupByName(libvirtd.Pool)
		if err != nil {
			return
		}
		for _, name := range importedVolumes(t, l, keptName) {
			if v, err := l.StorageVolLookupByName(pool, name); err == nil {
				_ = l.StorageVolDelete(v, 0)
			}
		}
	})
	if err := c.Delete(ctx, kept); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(kept), kept); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the retained VMImage is still there (%v): finalizers %v", err, kept.Finalizers)
		}
		return nil
	})
	if got := importedVolumes(t, host, keptName); len(got) != 2 {
		t.Errorf("volumes %v of the retained image after its deletion; want the image and its marker", got)
	}
}

// waitImageReady waits for img to be Ready at its current revision and
// reads it back.
func waitImageReady(t *testing.T, img *v1alpha1.VMImage) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(img.Status.Conditions, v1alpha1.ImageReady)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != img.Generation {
			return fmt.Errorf("VMImage %s not Ready: %+v", img.Name, img.Status)
		}
		for _, p := range img.Status.PerProvider {
			for _, fd := range p.FailureDomains {
				if fd.Revision != img.Status.Revision {
					return fmt.Errorf("VMImage %s: %s/%s at revision %s, not %s", img.Name, p.Provider, fd.Name, fd.Revision, img.Status.Revision)
				}
			}
		}
		return nil
	})
}

// imglifeVM creates a VM of image on the test's Provider and waits for it
// to be Ready.
func imglifeVM(t *testing.T, name, class, image string) *v1alpha1.VirtualMachine {
	t.Helper()
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "imglife"}}}}}
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/"+name, "--timeout=3m").CombinedOutput(); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	return vm
}

// machineOf is vm's LibvirtMachine.
func machineOf(t *testing.T, vm *v1alpha1.VirtualMachine) *infrav1.LibvirtMachine {
	t.Helper()
	lm := &infrav1.LibvirtMachine{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), lm); err != nil {
		t.Fatal(err)
	}
	return lm
}

// deleteVM deletes vm and waits for its machine to be gone.
func deleteVM(t *testing.T, vm *v1alpha1.VirtualMachine) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		lm := &infrav1.LibvirtMachine{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), lm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("LibvirtMachine %s still there (%v)", vm.Name, err)
		}
		return nil
	})
}
