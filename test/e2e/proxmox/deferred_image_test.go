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
	"strings"
	"testing"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
)

// TestProxmoxDeferredTemplate: a deferred installer image (the seed
// guide's kcrypt recipe: template firmware efi, installMode deferred, a
// class with tpmEnabled), everything read back through the Proxmox API.
//   - each node's template carries the image's firmware (bios ovmf and
//     an EFI disk without enrolled keys), no vTPM (each clone gets its
//     own), the installer on ide0;
//   - a clone (a class of efi and tpmEnabled) boots with the template's
//     EFI disk, its own vTPM and the installer CD-ROM;
//   - a class of another firmware family is refused by name
//     (ImageClassMismatch): nothing is cloned for it;
//   - deleting the VMImage while the clone lives waits (Deleting, InUse,
//     naming the clone's machine) and leaves the template and the ISO the
//     clone boots from; once the clone is deleted both go, and the image.
func TestProxmoxDeferredTemplate(t *testing.T) {
	ctx := context.Background()
	api := proxmox.NewClient(sim.URL, proxmox.WithHTTPClient(sim.Client()), proxmox.WithAPIToken(sim.TokenID, sim.Secret))
	// pvesim boots nothing: any valid ISO is an installer.
	iso, err := cloudinit.ISO("DEFERRED", map[string][]byte{"readme": []byte("an installer each clone runs\n")})
	if err != nil {
		t.Fatal(err)
	}
	isoFile := imagetest.WriteFile(t, "installer.iso", iso)
	url, sum := servedToPods(t, map[string]string{"/installer.iso": isoFile})+"/installer.iso", imagetest.Checksum(t, isoFile)
	p := proxmoxProvider(t, "deferred-proxmox", "proxmox-token", map[string]string{"role": "deferred"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	p = waitProvider(t, p.Name, "InventoryWalked")
	key := ns + "/" + p.Name
	var nodes []string
	for _, fd := range p.Status.FailureDomains {
		nodes = append(nodes, fd.Host)
	}

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pve-deferred-efi"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux",
		Import:   &v1alpha1.ImageImport{URL: url, Checksum: sum, Format: v1alpha1.ImageFormatISO, ProviderClasses: []string{"proxmox"}},
		Template: &v1alpha1.ImageTemplate{InstallMode: v1alpha1.InstallModeDeferred, Firmware: v1alpha1.FirmwareEFI}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	waitImageReady(t, img, 3*time.Minute)
	name := images.ArtifactName(img.UID, img.Status.Revision)
	if fds := importedOn(img, key); len(fds) != len(nodes) {
		t.Fatalf("failure domains %+v, want one per node %v", fds, nodes)
	}

	templates := map[string]int{}
	for _, node := range nodes {
		vm := pveByName(t, api, node, name)
		if vm == nil {
			t.Fatalf("no VM %s on %s", name, node)
		}
		templates[node] = int(vm.VMID)
		cfg := vm.VirtualMachineConfig
		if !bool(vm.Template) {
			t.Errorf("%s on %s is no template", name, node)
		}
		if cfg.Bios == nil || *cfg.Bios != "ovmf" || !strings.Contains(cfg.EFIDisk0, "pre-enrolled-keys=0") {
			t.Errorf("template on %s: bios %v efidisk0 %q, want ovmf and an EFI disk without enrolled keys (firmware efi)", node, cfg.Bios, cfg.EFIDisk0)
		}
		if cfg.TPMState0 != "" {
			t.Errorf("template on %s has a vTPM %q: each clone gets its own", node, cfg.TPMState0)
		}
		if !strings.Contains(cfg.IDEs["ide0"], ":iso/"+name+".iso") {
			t.Errorf("template on %s: ide0 %q, want the installer", node, cfg.IDEs["ide0"])
		}
	}
	if got := isosNamed(t, api, nodes, name); len(got) != len(nodes) {
		t.Fatalf("installer ISOs %v, want one per node", got)
	}

	// A bios class is of another firmware family than the template:
	// refused by name before anything is cloned.
	biosClass := deferredClass(t, "pve-deferred-bios", v1alpha1.FirmwareBIOS, false)
	refused := deferredVM(t, "pve-deferred-refused", biosClass, img.Name, "192.0.2.71")
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(refused), refused); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(refused.Status.Conditions, v1alpha1.VirtualMachineScheduled)
		if cond == nil || cond.Reason != placement.ReasonImageClassMismatch || !strings.Contains(cond.Message, "efi") {
			return fmt.Errorf("Scheduled %+v, want ImageClassMismatch naming the firmware", cond)
		}
		return nil
	})
	if vm := pveByNameAnywhere(t, api, nodes, providers.BackendName(ns, refused.Name)); vm != nil {
		t.Errorf("a VM %d was cloned for a refused class", vm.VMID)
	}
	_ = c.Delete(ctx, refused)

	// The seed guide's class: efi and a vTPM. The clone keeps the
	// template's EFI disk and gets its own TPM.
	tpmClass := deferredClass(t, "pve-deferred-tpm", v1alpha1.FirmwareEFI, true)
	vm := deferredVM(t, "pve-deferred-vm", tpmClass, img.Name, "192.0.2.72")
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/"+vm.Name, "--timeout=3m").CombinedOutput(); err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %+v", err, out, vm.Status.Conditions)
	}
	clone := pveByNameAnywhere(t, api, nodes, providers.BackendName(ns, vm.Name))
	if clone == nil {
		t.Fatalf("no clone of %s", vm.Name)
	}
	cfg := clone.VirtualMachineConfig
	if cfg.Bios == nil || *cfg.Bios != "ovmf" || !strings.Contains(cfg.EFIDisk0, "pre-enrolled-keys=0") {
		t.Errorf("clone: bios %v efidisk0 %q, want the template's EFI firmware", cfg.Bios, cfg.EFIDisk0)
	}
	if cfg.TPMState0 == "" {
		t.Errorf("clone has no vTPM; its class has tpmEnabled")
	}
	if !strings.Contains(cfg.IDEs["ide0"], ":iso/"+name+".iso") {
		t.Errorf("clone: ide0 %q, want the template's installer (it installs at first boot)", cfg.IDEs["ide0"])
	}

	// Deleting the image while the clone lives: it waits, naming the
	// clone's machine, and what the clone boots from stays.
	t.Logf("Deleting: %s", imagetest.DeleteWhileInUse(t, c, img, ns+"/"+vm.Name))
	// A few resyncs: nothing is removed meanwhile.
	time.Sleep(5 * time.Second)
	if got := isosNamed(t, api, nodes, name); len(got) != len(nodes) {
		t.Errorf("installer ISOs %v while a clone boots from them, want one per node", got)
	}
	for node := range templates {
		if pveByName(t, api, node, name) == nil {
			t.Errorf("the template on %s went while a clone of it lives", node)
		}
	}

	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); !apierrors.IsNotFound(err) {
			return fmt.Errorf("the VMImage is still there (%v): conditions %+v", err, img.Status.Conditions)
		}
		return nil
	})
	if got := isosNamed(t, api, nodes, name); len(got) > 0 {
		t.Errorf("installer ISOs %v left after the image and its clone went", got)
	}
	for _, node := range nodes {
		if vm := pveByName(t, api, node, name); vm != nil {
			t.Errorf("template %d left on %s", vm.VMID, node)
		}
	}
}

// deferredClass is a VMClass of one 10 GiB disk and one NIC, firmware
// and tpmEnabled as given.
func deferredClass(t *testing.T, name string, firmware v1alpha1.Firmware, tpm bool) string {
	t.Helper()
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold", Provisioning: "thin"}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
		Firmware: firmware, TPMEnabled: tpm}}
	if tpm {
		class.Spec.Features = []string{"vtpm"}
	}
	if err := c.Create(context.Background(), class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	return class.Name
}

// deferredVM is a VirtualMachine of class and image on the deferred
// test's Provider, with a static address.
func deferredVM(t *testing.T, name, class, image, address string) *v1alpha1.VirtualMachine {
	t.Helper()
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "deferred"}}},
		NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
			Address: address, Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}}}}
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	return vm
}

// pveByName reads, through the Proxmox API, the VM named name on node;
// nil when there is none.
func pveByName(t *testing.T, api *proxmox.Client, node, name string) *proxmox.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	cl, err := api.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rs, err := cl.Resources(ctx, "vm")
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rs {
		if r.Type == "qemu" && r.Node == node && r.Name == name {
			vm, err := api.NodeRef(node).VirtualMachine(ctx, int(r.VMID))
			if err != nil {
				t.Fatal(err)
			}
			return vm
		}
	}
	return nil
}

func pveByNameAnywhere(t *testing.T, api *proxmox.Client, nodes []string, name string) *proxmox.VirtualMachine {
	t.Helper()
	for _, n := range nodes {
		if vm := pveByName(t, api, n, name); vm != nil {
			return vm
		}
	}
	return nil
}

// isosNamed are, through the Proxmox API, the iso volumes of any storage
// of nodes whose name starts with name.
func isosNamed(t *testing.T, api *proxmox.Client, nodes []string, name string) []string {
	t.Helper()
	ctx := context.Background()
	var out []string
	for _, node := range nodes {
		storages, err := api.NodeRef(node).Storages(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range storages {
			if !strings.Contains(","+s.Content+",", ",iso,") {
				continue
			}
			var list []map[string]any
			if err := api.Get(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content?content=iso", node, s.Name), &list); err != nil {
				t.Fatal(err)
			}
			for _, e := range list {
				if v := fmt.Sprint(e["volid"]); strings.Contains(v, ":iso/"+name) {
					out = append(out, node+"/"+v)
				}
			}
		}
	}
	return out
}
