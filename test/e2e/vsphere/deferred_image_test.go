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
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
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

// TestVSphereDeferredTemplate: a deferred installer image (the seed
// guide's kcrypt recipe: template firmware efi-secure, installMode
// deferred, a class with tpmEnabled), everything read back from vcsim
// through govmomi.
//   - each datacenter's template carries the image's firmware (efi,
//     secure boot on), no vTPM, the installer on a CD-ROM;
//   - a clone boots with that firmware, its own vTPM and the installer;
//   - a class of another firmware family is refused by name
//     (ImageClassMismatch): nothing is cloned for it;
//   - deleting the VMImage while the clone lives waits (Deleting, InUse,
//     naming the clone's machine) and leaves the template and the ISO the
//     clone boots from; once the clone is deleted both go, and the image.
func TestVSphereDeferredTemplate(t *testing.T) {
	ctx := context.Background()
	// vcsim boots nothing: any valid ISO is an installer.
	iso, err := cloudinit.ISO("DEFERRED", map[string][]byte{"readme": []byte("an installer each clone runs\n")})
	if err != nil {
		t.Fatal(err)
	}
	isoFile := imagetest.WriteFile(t, "installer.iso", iso)
	url, sum := podURL(t, imagetest.Serve(t, map[string]string{"/installer.iso": isoFile}).URL("/installer.iso")), imagetest.Checksum(t, isoFile)
	secret(t, ns, "deferred-vsphere-creds", map[string]string{"username": user, "password": password})
	p := provider("deferred-vsphere", "deferred-vsphere-creds", func(s *v1alpha1.ProviderSpec) {
		s.Capabilities = v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: installDatastore}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
			Features:       []string{"vtpm", "efiSecureBoot"},
		}
	})
	p.Labels = map[string]string{"role": "deferred-vsphere"}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitReady(t, p.Name, "InventoryWalked")
	dcs := []string{"DC0", "DC1"}

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "vs-deferred-efi"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux",
		Import:   &v1alpha1.ImageImport{URL: url, Checksum: sum, Format: v1alpha1.ImageFormatISO, ProviderClasses: []string{"vsphere"}},
		Template: &v1alpha1.ImageTemplate{InstallMode: v1alpha1.InstallModeDeferred, Firmware: v1alpha1.FirmwareEFISecure}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
		"vmimage/"+img.Name, "--timeout=3m").CombinedOutput(); err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(img), img)
		t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
		t.Fatal(err)
	}
	name := images.ArtifactName(img.UID, img.Status.Revision)
	for _, dc := range dcs {
		in := installedIn(t, dc, name)
		if len(in.vms) != 1 || !in.vms[0].Config.Template {
			t.Fatalf("%s holds %d VMs named %s, want one template", dc, len(in.vms), name)
		}
		cfg := in.vms[0].Config
		if cfg.Firmware != string(types.GuestOsDescriptorFirmwareTypeEfi) || cfg.BootOptions == nil || !ptr.Deref(cfg.BootOptions.EfiSecureBootEnabled, false) {
			t.Errorf("template in %s: firmware %s, boot options %+v; want efi with secure boot (the image's efi-secure)", dc, cfg.Firmware, cfg.BootOptions)
		}
		if hasTPM(in.vms[0].Config.Hardware.Device) {
			t.Errorf("template in %s has a vTPM: each clone gets its own", dc)
		}
		if cds := cdroms(in.vms[0]); len(cds) != 1 || !strings.HasSuffix(cds[0], "banlieue-images/"+name+".iso") {
			t.Errorf("template in %s: CD-ROMs %v, want the installer", dc, cds)
		}
		if !in.iso {
			t.Errorf("no installer ISO in %s", dc)
		}
	}

	class := func(name string, firmware v1alpha1.Firmware, tpm bool) string {
		cl := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 1024, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}},
			Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
			Firmware: firmware, TPMEnabled: tpm}}
		if tpm {
			cl.Spec.Features = []string{"vtpm"}
		}
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), cl) })
		return cl.Name
	}
	newVM := func(name, class, address string) *v1alpha1.VirtualMachine {
		vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: class}, ImageRef: v1alpha1.LocalObjectReference{Name: img.Name},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: p.Labels}},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: address, Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}}}}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
		return vm
	}

	// A bios class is of another firmware family than the template:
	// refused by name before anything is cloned.
	refused := newVM("vs-deferred-refused", class("vs-deferred-bios", v1alpha1.FirmwareBIOS, false), "192.0.2.81")
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
	for _, dc := range dcs {
		if m := vcVM(t, dc, providers.BackendName(ns, refused.Name)); m != nil {
			t.Errorf("a VM was cloned in %s for a refused class", dc)
		}
	}
	_ = c.Delete(ctx, refused)

	// The seed guide's class: efi-secure and a vTPM.
	vm := newVM("vs-deferred-vm", class("vs-deferred-tpm", v1alpha1.FirmwareEFISecure, true), "192.0.2.82")
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/"+vm.Name, "--timeout=3m").CombinedOutput(); err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %+v", err, out, vm.Status.Conditions)
	}
	var clone *mo.VirtualMachine
	for _, dc := range dcs {
		if m := vcVM(t, dc, providers.BackendName(ns, vm.Name)); m != nil {
			clone = m
		}
	}
	if clone == nil {
		t.Fatalf("no clone of %s in %v", vm.Name, dcs)
	}
	if clone.Config.Firmware != string(types.GuestOsDescriptorFirmwareTypeEfi) || clone.Config.BootOptions == nil || !ptr.Deref(clone.Config.BootOptions.EfiSecureBootEnabled, false) {
		t.Errorf("clone: firmware %s, boot options %+v; want efi with secure boot", clone.Config.Firmware, clone.Config.BootOptions)
	}
	if !hasTPM(clone.Config.Hardware.Device) {
		t.Errorf("clone has no vTPM; its class has tpmEnabled")
	}
	if cds := cdroms(*clone); len(cds) != 1 || !strings.HasSuffix(cds[0], "banlieue-images/"+name+".iso") {
		t.Errorf("clone: CD-ROMs %v, want the template's installer (it installs at first boot)", cds)
	}

	// Deleting the image while the clone lives: it waits, naming the
	// clone's machine, and what the clone boots from stays.
	t.Logf("Deleting: %s", imagetest.DeleteWhileInUse(t, c, img, ns+"/"+vm.Name))
	// A few resyncs: nothing is removed meanwhile.
	time.Sleep(5 * time.Second)
	for _, dc := range dcs {
		in := installedIn(t, dc, name)
		if !in.iso || len(in.vms) != 1 {
			t.Errorf("%s: ISO %v, %d template(s) while a clone boots from them; want both", dc, in.iso, len(in.vms))
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
	for _, dc := range dcs {
		if in := installedIn(t, dc, name); in.iso || len(in.vms) > 0 {
			t.Errorf("%s: ISO %v, %d VM(s) named %s left after the image and its clone went", dc, in.iso, len(in.vms), name)
		}
	}
}

// hasTPM tells whether devices hold a virtual TPM.
func hasTPM(devices []types.BaseVirtualDevice) bool {
	for _, d := range devices {
		if _, ok := d.(*types.VirtualTPM); ok {
			return true
		}
	}
	return false
}
