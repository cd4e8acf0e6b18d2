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

package vsphere

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/vim25/mo"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere"
)

// importServer serves the repo's test guest, as a mirror would, from
// loopback (exposed to the provider pods), in the three formats vSphere
// imports: /guest.qcow2 (the image itself), /guest.raw (qemu-img's raw
// copy of it) and /guest.ova (an OVA built here: a one-disk descriptor and
// the guest as a streamOptimized VMDK, images.QCOW2ToStreamOptimized's).
// It returns the base URL the pods use and each file's checksum.
func importServer(t *testing.T) (string, map[string]string) {
	t.Helper()
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	dir := t.TempDir()
	imagetest.Run(t, imagetest.Tool(t, "qemu-img"), "convert", "-f", "qcow2", "-O", "raw", guest, filepath.Join(dir, "guest.raw"))
	qcow2, err := os.ReadFile(guest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "guest.qcow2"), qcow2, 0o600); err != nil {
		t.Fatal(err)
	}
	var disk bytes.Buffer
	if err := images.QCOW2ToStreamOptimized(bytes.NewReader(qcow2), int64(len(qcow2)), &disk); err != nil {
		t.Fatal(err)
	}
	virtual, err := images.Sniff(qcow2[:images.SniffLen], v1alpha1.ImageFormatQCOW2)
	if err != nil {
		t.Fatal(err)
	}
	var ova bytes.Buffer
	tw := tar.NewWriter(&ova)
	for _, f := range []struct {
		name string
		data []byte
	}{{"guest.ovf", []byte(vsphere.OneDiskOVF("guest", "guest-disk1.vmdk", int64(virtual)))}, {"guest-disk1.vmdk", disk.Bytes()}} {
		if err := tw.WriteHeader(&tar.Header{Name: f.name, Mode: 0o644, Size: int64(len(f.data)), Format: tar.FormatUSTAR}); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write(f.data); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "guest.ova"), ova.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
	files, sums := map[string]string{}, map[string]string{}
	for _, f := range []string{"guest.qcow2", "guest.raw", "guest.ova"} {
		files["/"+f] = filepath.Join(dir, f)
		sums[f] = imagetest.Checksum(t, files["/"+f])
	}
	return podURL(t, imagetest.Serve(t, files).Base), sums
}

// namedInVCSim counts the VMs and the templates named name in datacenter
// dc, as vcsim has them.
func namedInVCSim(t *testing.T, dc, name string) (vms, templates int) {
	t.Helper()
	refs, vms := templateRefs(t, dc, name)
	return vms, len(refs)
}

// templateRefs is what vcsim holds named name in datacenter dc: the
// managed object references of its templates, and how many plain VMs.
// A re-import makes a new VM, so a template keeping its reference was
// not imported again.
func templateRefs(t *testing.T, dc, name string) (templates []string, vms int) {
	t.Helper()
	ctx := context.Background()
	list, err := dcFinder(t, dc).VirtualMachineList(ctx, name)
	if err != nil {
		return nil, 0 // none
	}
	for _, vm := range list {
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"config.template"}, &m); err != nil {
			t.Fatal(err)
		}
		if m.Config.Template {
			templates = append(templates, vm.Reference().Value)
		} else {
			vms++
		}
	}
	sort.Strings(templates)
	return templates, vms
}

// destroyImported destroys the templates the test imported, in both
// datacenters, once its VM is gone.
func destroyImported(t *testing.T, artifacts map[v1alpha1.ImageFormat]string) {
	t.Helper()
	ctx := context.Background()
	eventually(t, 2*time.Minute, func() error {
		for _, dc := range []string{"DC0", "DC1"} {
			if vms := vcVMNames(t, dc, providers.BackendName(ns, "imported-vsphere-vm")); len(vms) > 0 {
				return fmt.Errorf("VM %v still in %s", vms, dc)
			}
		}
		return nil
	})
	gc := vcLogin(t)
	for _, dc := range []string{"DC0", "DC1"} {
		f := find.NewFinder(gc.Client, false)
		d, err := f.Datacenter(ctx, dc)
		if err != nil {
			t.Fatal(err)
		}
		f.SetDatacenter(d)
		for _, name := range artifacts {
			vm, err := f.VirtualMachine(ctx, name)
			if err != nil {
				continue
			}
			if task, err := vm.Destroy(ctx); err != nil || task.Wait(ctx) != nil {
				t.Errorf("destroying %s in %s: %v", name, dc, err)
			}
		}
	}
}

// scratchFiles counts the qcow2 imports' scratch files in the provider
// pods' temporary directories (their /tmp volume, read on the host).
func scratchFiles(t *testing.T) int {
	t.Helper()
	pods := &corev1.PodList{}
	sel, err := labels.Parse(providerSelector)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.List(context.Background(), pods, client.InNamespace(ns), client.MatchingLabelsSelector{Selector: sel}); err != nil {
		t.Fatal(err)
	}
	n := 0
	for i := range pods.Items {
		m, err := filepath.Glob(filepath.Join(env.EmptyDir(&pods.Items[i], "tmp"), "banlieue-import-*"))
		if err != nil {
			t.Fatal(err)
		}
		n += len(m)
	}
	return n
}

// TestVSphereImageImportByURL: VMImages that are only a URL and a
// checksum, of a qcow2, a raw and an OVA image, each become one template
// per datacenter (DC0, DC1: vcsim's, the Provider's six failure domains
// in two datacenters), kubectl wait sees them Ready, and a VM of the
// qcow2 one becomes Ready. vcsim's NFC lease accepts the uploads and
// discards the bytes (it keeps their SHA-1 and length only), and vcsim
// runs no guest: what is proved here is the provider's side (format
// sniffing, conversion, upload, lease, template) and what vCenter keeps,
// not that the disk boots. A checksum mismatch leaves no VM or template
// in any datacenter and no scratch file.
func TestVSphereImageImportByURL(t *testing.T) {
	ctx := context.Background()
	base, sums := importServer(t)
	secret(t, ns, "import-vsphere-creds", map[string]string{"username": user, "password": password})
	p := provider("import-vsphere", "import-vsphere-creds", func(s *v1alpha1.ProviderSpec) {
		s.Capabilities = v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
		}
	})
	p.Labels = map[string]string{"role": "import-vsphere"}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, p.Name, "InventoryWalked")
	key := ns + "/" + p.Name

	// Nothing of the test outlives it: later tests' Providers would
	// import its images, and later tests take a datacenter's first VM
	// for a template (vcsim.MarkTemplate).
	artifacts := map[v1alpha1.ImageFormat]string{}
	t.Cleanup(func() {
		for _, format := range []v1alpha1.ImageFormat{v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw, v1alpha1.ImageFormatOVA} {
			_ = c.Delete(ctx, &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "imported-" + string(format)}})
		}
		_ = c.Delete(ctx, &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "imported-vsphere-vm"}})
		_ = c.Delete(ctx, &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "import-vsphere-small"}})
		destroyImported(t, artifacts)
		_ = c.Delete(ctx, p)
	})
	for _, format := range []v1alpha1.ImageFormat{v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw, v1alpha1.ImageFormatOVA} {
		file := "guest." + string(format)
		img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "imported-" + string(format)}, Spec: v1alpha1.VMImageSpec{
			OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/" + file, Checksum: sums[file], Format: format}}}
		if err := c.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
			"vmimage/"+img.Name, "--timeout=3m").CombinedOutput()
		if err != nil {
			_ = c.Get(ctx, client.ObjectKeyFromObject(img), img)
			t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
		}
		t.Logf("%s: Ready in %s", format, time.Since(start).Round(time.Millisecond))
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			t.Fatal(err)
		}
		name := images.ArtifactName(img.UID, img.Status.Revision)
		artifacts[format] = name
		fds := 0
		for _, ps := range img.Status.PerProvider {
			if ps.Provider != key {
				continue
			}
			for _, fd := range ps.FailureDomains {
				fds++
				if fd.Phase != v1alpha1.ImagePhaseReady || fd.Ref != name || fd.Revision != img.Status.Revision {
					t.Errorf("%s: failure domain %+v; want Ready with ref %s at revision %s", format, fd, name, img.Status.Revision)
				}
			}
		}
		if fds != 6 {
			t.Errorf("%s: %d failure domains reported, want 6", format, fds)
		}
		for _, dc := range []string{"DC0", "DC1"} {
			if vms, templates := namedInVCSim(t, dc, name); vms != 0 || templates != 1 {
				t.Errorf("%s: %s holds %d VMs and %d templates named %s; want exactly one template", format, dc, vms, templates, name)
			}
		}
	}

	// A VM of the qcow2 image: cloned from its template. vcsim runs no
	// guest, so Ready says vCenter made and powered on the VM, nothing
	// about the disk booting (the libvirt e2e boots the same image).
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "import-vsphere-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "imported-vsphere-vm", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: "imported-qcow2"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "import-vsphere"}}},
		NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
			Address: "192.0.2.91", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/"+vm.Name, "--timeout=3m").CombinedOutput(); err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %+v", err, out, vm.Status.Conditions)
	}
	vsm := &infrav1.VSphereMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vsm); err != nil {
		t.Fatal(err)
	}
	if vsm.Spec.Template != artifacts[v1alpha1.ImageFormatQCOW2] {
		t.Errorf("VSphereMachine spec.template %q, want the imported template %s", vsm.Spec.Template, artifacts[v1alpha1.ImageFormatQCOW2])
	}
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// A checksum mismatch: the qcow2 is staged, converted and uploaded,
	// then its last read fails; nothing is left in either datacenter, and
	// the scratch file is gone.
	scratch := scratchFiles(t)
	bad := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "import-vsphere-bad-checksum"}, Spec: v1alpha1.VMImageSpec{
		Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: "sha256:" + strings.Repeat("ab", 32), Format: v1alpha1.ImageFormatQCOW2}}}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		n := 0
		for _, ps := range bad.Status.PerProvider {
			if ps.Provider != key {
				continue
			}
			for _, fd := range ps.FailureDomains {
				if fd.Phase != v1alpha1.ImagePhaseFailed || fd.Reason != v1alpha1.ImageReasonChecksumMismatch {
					return fmt.Errorf("failure domain %+v, want Failed with ChecksumMismatch", fd)
				}
				n++
			}
		}
		if n != 6 {
			return fmt.Errorf("%d failure domains failed, want 6", n)
		}
		return nil
	})
	if cond := meta.FindStatusCondition(bad.Status.Conditions, v1alpha1.ImageReady); cond == nil || cond.Status != metav1.ConditionFalse {
		t.Errorf("Ready condition %+v, want False", cond)
	}
	name := images.ArtifactName(bad.UID, bad.Status.Revision)
	for _, dc := range []string{"DC0", "DC1"} {
		if vms, templates := namedInVCSim(t, dc, name); vms+templates != 0 {
			t.Errorf("a failed import left %d VMs and %d templates named %s in %s", vms, templates, name, dc)
		}
	}
	if n := scratchFiles(t); n != scratch {
		t.Errorf("%d banlieue-import-* files in the provider pods' /tmp after the failed import, %d before", n, scratch)
	}
	_ = c.Delete(ctx, bad)
}
