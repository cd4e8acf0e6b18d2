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

package proxmox

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers"
)

// imageServer serves the repo's test guest (hack/build-guest-image.sh),
// as a mirror would, from loopback: GET /guest.qcow2 with its length
// (http.ServeFile). It returns the server's root as the provider's pods
// reach it (servedToPods) and the guest's checksum.
func imageServer(t *testing.T) (url, checksum string) {
	t.Helper()
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	return servedToPods(t, map[string]string{"/guest.qcow2": guest}), imagetest.Checksum(t, guest)
}

// imported counts, per node, the templates named name on the simulator,
// and lists the import volumes of that name left on any storage.
func imported(name string) (templates map[string]int, volumes []string) {
	templates = map[string]int{}
	for _, v := range sim.VMs() {
		if v.Name == name && v.Template {
			templates[v.Node]++
		}
	}
	for _, vol := range sim.Volumes() {
		if strings.Contains(vol, ":import/"+name) {
			volumes = append(volumes, vol)
		}
	}
	return templates, volumes
}

// TestProxmoxImageImportByURL: a VMImage that is only a URL and a
// checksum becomes, on each node of the cluster (each a failure domain),
// a template of its own named after the artifact: the provider uploads
// the bytes as import content (PVE 8.4+), creates a VM importing its disk
// from them, converts it to a template and deletes the upload. kubectl
// wait sees the image Ready, a VM of it is cloned from its node's
// template and becomes Ready. A wrong checksum fails every node and
// leaves no template and no import volume anywhere.
func TestProxmoxImageImportByURL(t *testing.T) {
	ctx := context.Background()
	base, sum := imageServer(t)
	p := proxmoxProvider(t, "import-proxmox", "proxmox-token", map[string]string{"role": "import"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitProvider(t, p.Name, "InventoryWalked")
	key := ns + "/" + p.Name
	nodes := []string{}
	for _, fd := range p.Status.FailureDomains {
		nodes = append(nodes, fd.Host)
	}
	if len(nodes) != 3 {
		t.Fatalf("failure domains %+v: want the 3 nodes", p.Status.FailureDomains)
	}

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pve-imported-guest"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: sum, Format: v1alpha1.ImageFormatQCOW2,
			ProviderClasses: []string{"proxmox"}}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
		"vmimage/"+img.Name, "--timeout=3m").CombinedOutput()
	if err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(img), img)
		t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
		t.Fatal(err)
	}
	name := images.ArtifactName(img.UID, img.Status.Revision)
	fds := importedOn(img, key)
	if len(fds) != len(nodes) {
		t.Errorf("failure domains %+v: want one per node", fds)
	}
	for _, fd := range fds {
		if fd.Phase != v1alpha1.ImagePhaseReady || fd.Ref != name || fd.Revision != img.Status.Revision {
			t.Errorf("failure domain %+v; want Ready with ref %s (the template's name) at revision %s", fd, name, img.Status.Revision)
		}
	}
	templates, volumes := imported(name)
	for _, n := range nodes {
		if templates[n] != 1 {
			t.Errorf("node %s has %d templates named %s, want 1 (all: %v)", n, templates[n], name, templates)
		}
	}
	if len(volumes) > 0 {
		t.Errorf("import volumes left after the templates were made: %v", volumes)
	}

	// A VM of the imported image: cloned from its node's template. The
	// simulator runs no guest: where a real node would boot the imported
	// disk, its guest agent answers with the static address.
	vm := readyVMOf(t, "pve-imported-vm", "pve-import-small", 2, img.Name, "import", "192.0.2.60")
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), pm); err != nil {
		t.Fatal(err)
	}
	if pm.Spec.Template != name || pm.Status.VMID == 0 {
		t.Errorf("ProxmoxMachine spec.template %q vmid %d, want the imported template %s", pm.Spec.Template, pm.Status.VMID, name)
	}
	backend := providers.BackendName(ns, vm.Name)
	found := false
	for _, v := range sim.VMs() {
		if v.Name == backend {
			found = true
			if v.Node != pm.Status.Node || v.Template {
				t.Errorf("VM %s on %s (template %v), want a VM on %s", backend, v.Node, v.Template, pm.Status.Node)
			}
		}
	}
	if !found {
		t.Errorf("no VM %s in the simulator", backend)
	}
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}

	// A wrong checksum fails every node and builds nothing.
	bad := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pve-import-bad-checksum"}, Spec: v1alpha1.VMImageSpec{
		Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: "sha256:" + strings.Repeat("ab", 32), Format: v1alpha1.ImageFormatQCOW2,
			ProviderClasses: []string{"proxmox"}}}}
	if err := c.Create(ctx, bad); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(bad), bad); err != nil {
			return err
		}
		fds := importedOn(bad, key)
		if len(fds) != len(nodes) {
			return fmt.Errorf("failure domains %+v, want %d", fds, len(nodes))
		}
		for _, fd := range fds {
			if fd.Phase != v1alpha1.ImagePhaseFailed || fd.Reason != v1alpha1.ImageReasonChecksumMismatch {
				return fmt.Errorf("failure domain %+v, want Failed (ChecksumMismatch)", fd)
			}
		}
		return nil
	})
	badName := images.ArtifactName(bad.UID, bad.Status.Revision)
	if templates, volumes := imported(badName); len(templates) > 0 || len(volumes) > 0 {
		t.Errorf("a failed import left templates %v and import volumes %v", templates, volumes)
	}
	for _, v := range sim.VMs() {
		if v.Name == badName {
			t.Errorf("a failed import left VM %d %s on %s", v.VMID, v.Name, v.Node)
		}
	}
	_ = c.Delete(ctx, bad)
}

// importedOn is img's import status in the failure domains of Provider
// key.
func importedOn(img *v1alpha1.VMImage, key string) []v1alpha1.ImageFailureDomainStatus {
	for _, p := range img.Status.PerProvider {
		if p.Provider == key {
			return p.FailureDomains
		}
	}
	return nil
}

// readyVMOf makes a VMClass className (one thin disk of diskGiB) and a
// VM of image on the Providers labelled role, with a static address, and
// waits for kubectl to see it Ready. The simulator runs no guest: its
// guest agent answers with the static address where a real guest would
// boot (or install itself, and boot).
func readyVMOf(t *testing.T, name, className string, diskGiB int64, image, role, address string) *v1alpha1.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: className}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: diskGiB, StorageClass: "gold", Provisioning: "thin"}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": role}}},
		NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
			Address: address, Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/"+vm.Name, "--timeout=3m").CombinedOutput(); err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %+v", err, out, vm.Status.Conditions)
	}
	return vm
}
