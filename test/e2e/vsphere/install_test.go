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
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
)

// installDatastore is where the test's Provider keeps its images.
const installDatastore = "LocalDS_0"

// vcInstall is what vcsim holds of an installer image named name in a
// datacenter: its VMs and templates, and whether the installer's and
// the seed's ISO files are in the datastore.
type vcInstall struct {
	vms      []mo.VirtualMachine
	vmObject []*object.VirtualMachine
	iso      bool
	seed     bool
}

func installedIn(t *testing.T, dc, name string) vcInstall {
	t.Helper()
	ctx := context.Background()
	gc := vcLogin(t)
	f := find.NewFinder(gc.Client, false)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(d)
	var out vcInstall
	if list, err := f.VirtualMachineList(ctx, name); err == nil {
		for _, vm := range list {
			var m mo.VirtualMachine
			if err := vm.Properties(ctx, vm.Reference(), []string{"name", "config", "runtime.powerState"}, &m); err != nil {
				t.Fatal(err)
			}
			out.vms = append(out.vms, m)
			out.vmObject = append(out.vmObject, vm)
		}
	}
	ds, err := f.Datastore(ctx, installDatastore)
	if err != nil {
		t.Fatal(err)
	}
	exists := func(file string) bool {
		_, err := ds.Stat(ctx, file)
		if err == nil {
			return true
		}
		var noFile object.DatastoreNoSuchFileError
		var noDir object.DatastoreNoSuchDirectoryError
		if errors.As(err, &noFile) || errors.As(err, &noDir) || fault.Is(err, &types.FileNotFound{}) {
			return false
		}
		t.Fatalf("stat %s in %s: %v", file, dc, err)
		return false
	}
	out.iso = exists("banlieue-images/" + name + ".iso")
	out.seed = exists("banlieue-images/" + name + "-seed.iso")
	return out
}

// cdroms are the VM's CD-ROMs' ISO files.
func cdroms(m mo.VirtualMachine) []string {
	var out []string
	if m.Config == nil {
		return nil
	}
	for _, d := range m.Config.Hardware.Device {
		cd, ok := d.(*types.VirtualCdrom)
		if !ok {
			continue
		}
		file := ""
		if b, ok := cd.Backing.(*types.VirtualCdromIsoBackingInfo); ok {
			file = b.FileName
		}
		out = append(out, file)
	}
	return out
}

// TestVSphereInstallerImages: installer images (format iso) in each
// datacenter of vcsim (DC0, DC1).
//   - deferred: the ISO uploaded to the image datastore and a template
//     made of a VM with a blank disk and the ISO on a CD-ROM, never
//     powered on; the ISO stays for the clones.
//   - immediate: a build VM (the ISO, a NoCloud seed with the image's
//     cloudConfigs) is powered on and the failure domains report
//     Installing; vcsim runs no guest, so the TEST powers each build VM
//     off through govmomi, as the installer's guest would once done; the
//     VM, its CD-ROMs removed, becomes the template and both ISOs are
//     deleted.
//   - an immediate installer nobody powers off fails InstallTimedOut and
//     leaves no VM and no ISO in its datacenter.
func TestVSphereInstallerImages(t *testing.T) {
	ctx := context.Background()
	// vcsim boots nothing: any valid ISO is an installer.
	iso, err := cloudinit.ISO("INSTALLER", map[string][]byte{"readme": []byte("an installer vcsim never boots\n")})
	if err != nil {
		t.Fatal(err)
	}
	// Served as a mirror would, from loopback, exposed to the provider pods.
	isoFile := imagetest.WriteFile(t, "installer.iso", iso)
	url, sum := podURL(t, imagetest.Serve(t, map[string]string{"/installer.iso": isoFile}).URL("/installer.iso")), imagetest.Checksum(t, isoFile)
	secret(t, ns, "install-vsphere-creds", map[string]string{"username": user, "password": password})
	p := provider("install-vsphere", "install-vsphere-creds", func(s *v1alpha1.ProviderSpec) {
		s.Capabilities = v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: installDatastore}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
		}
	})
	p.Labels = map[string]string{"role": "install-vsphere"}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitReady(t, p.Name, "InventoryWalked")
	key := ns + "/" + p.Name
	dcOf := map[string]string{}
	for _, fd := range p.Status.FailureDomains {
		dcOf[fd.Name] = fd.Datacenter
	}
	dcs := []string{"DC0", "DC1"}
	cc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "vsphere-install-config", Namespace: ns}, StringData: map[string]string{
		"cloud-config": "#cloud-config\nwrite_files:\n- path: /etc/banlieue/marker\n  content: installed\n"}}
	if err := c.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	// The administrator publishing the image names its cloud config in
	// the static provider's credentials Role.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", cc.Name); err != nil {
		t.Fatal(err)
	}
	// Nothing of the test outlives it: the images, the Provider, and what
	// vcsim holds of them (templates, ISO files).
	var made []string
	t.Cleanup(func() {
		for _, n := range []string{"vs-installer-deferred", "vs-installer-immediate", "vs-installer-stuck"} {
			_ = c.Delete(ctx, &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: n}})
		}
		_ = c.Delete(ctx, p)
		_ = c.Delete(ctx, cc)
		gc := vcLogin(t)
		for _, dc := range dcs {
			f := find.NewFinder(gc.Client, false)
			d, err := f.Datacenter(ctx, dc)
			if err != nil {
				continue
			}
			f.SetDatacenter(d)
			ds, err := f.Datastore(ctx, installDatastore)
			if err != nil {
				continue
			}
			for _, name := range made {
				if list, err := f.VirtualMachineList(ctx, name); err == nil {
					for _, vm := range list {
						if task, err := vm.PowerOff(ctx); err == nil {
							_ = task.Wait(ctx)
						}
						if task, err := vm.Destroy(ctx); err == nil {
							_ = task.Wait(ctx)
						}
					}
				}
				fm := ds.NewFileManager(d, false)
				_ = fm.DeleteFile(ctx, "banlieue-images/"+name+".iso")
				_ = fm.DeleteFile(ctx, "banlieue-images/"+name+"-seed.iso")
			}
		}
	})
	installer := func(name string, mode v1alpha1.InstallMode, firmware v1alpha1.Firmware, timeout *int32) *v1alpha1.VMImage {
		img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VMImageSpec{
			OSFamily: "linux",
			Import: &v1alpha1.ImageImport{URL: url, Checksum: sum, Format: v1alpha1.ImageFormatISO,
				InstallTimeoutSeconds: timeout, ProviderClasses: []string{"vsphere"}},
			Template:     &v1alpha1.ImageTemplate{InstallMode: mode, Firmware: firmware},
			CloudConfigs: []v1alpha1.CloudConfigSource{{SecretRef: v1alpha1.LocalObjectReference{Name: cc.Name}}}}}
		if err := c.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
		return img
	}
	fdsOf := func(img *v1alpha1.VMImage) []v1alpha1.ImageFailureDomainStatus {
		for _, ps := range img.Status.PerProvider {
			if ps.Provider == key {
				return ps.FailureDomains
			}
		}
		return nil
	}
	// template is the one template named name in dc.
	template := func(t *testing.T, dc, name string) (mo.VirtualMachine, vcInstall) {
		t.Helper()
		in := installedIn(t, dc, name)
		if len(in.vms) != 1 || !in.vms[0].Config.Template {
			t.Fatalf("%s holds %d VMs named %s, want exactly one template", dc, len(in.vms), name)
		}
		return in.vms[0], in
	}

	t.Run("deferred", func(t *testing.T) {
		img := installer("vs-installer-deferred", v1alpha1.InstallModeDeferred, v1alpha1.FirmwareBIOS, nil)
		start := time.Now()
		out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
			"vmimage/"+img.Name, "--timeout=3m").CombinedOutput()
		_ = c.Get(ctx, client.ObjectKeyFromObject(img), img)
		if err != nil {
			t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
		}
		t.Logf("deferred: Ready in %s", time.Since(start).Round(time.Millisecond))
		name := images.ArtifactName(img.UID, img.Status.Revision)
		made = append(made, name)
		fds := fdsOf(img)
		if len(fds) != 6 {
			t.Errorf("%d failure domains reported, want 6", len(fds))
		}
		for _, fd := range fds {
			if fd.Phase != v1alpha1.ImagePhaseReady || fd.Ref != name {
				t.Errorf("failure domain %+v; want Ready with ref %s", fd, name)
			}
		}
		for _, dc := range dcs {
			m, in := template(t, dc, name)
			if cds := cdroms(m); len(cds) != 1 || !strings.HasSuffix(cds[0], "banlieue-images/"+name+".iso") {
				t.Errorf("template in %s: CD-ROMs %v, want the installer", dc, cds)
			}
			if m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOff || m.Runtime.BootTime != nil {
				t.Errorf("template in %s: %s, booted %v; want never powered on", dc, m.Runtime.PowerState, m.Runtime.BootTime)
			}
			if m.Config.Firmware != string(types.GuestOsDescriptorFirmwareTypeBios) {
				t.Errorf("template in %s: firmware %s, want bios", dc, m.Config.Firmware)
			}
			if !in.iso {
				t.Errorf("no installer ISO in %s's %s: the clones boot it", dc, installDatastore)
			}
		}
	})

	t.Run("immediate", func(t *testing.T) {
		img := installer("vs-installer-immediate", v1alpha1.InstallModeImmediate, v1alpha1.FirmwareEFI, nil)
		sawInstalling := map[string]bool{}
		poweredOff := map[string]bool{}
		var name string
		start := time.Now()
		eventually(t, 4*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
				return err
			}
			if img.Status.Revision == "" {
				return fmt.Errorf("no revision yet")
			}
			name = images.ArtifactName(img.UID, img.Status.Revision)
			if len(made) == 0 || made[len(made)-1] != name {
				made = append(made, name)
			}
			fds := fdsOf(img)
			for _, fd := range fds {
				if fd.Phase == v1alpha1.ImagePhaseInstalling {
					sawInstalling[dcOf[fd.Name]] = true
				}
			}
			// vcsim runs no guest: the test powers each build VM off
			// through govmomi, as the installer's guest would once done,
			// after its datacenter's failure domains reported Installing.
			for _, dc := range dcs {
				if !sawInstalling[dc] || poweredOff[dc] {
					continue
				}
				in := installedIn(t, dc, name)
				for i, m := range in.vms {
					if m.Config.Template || m.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn {
						continue
					}
					cds := cdroms(m)
					if len(cds) != 2 || !in.iso || !in.seed {
						t.Errorf("build VM in %s: CD-ROMs %v (ISO uploaded %v, seed %v), want the installer and the seed", dc, cds, in.iso, in.seed)
					}
					task, err := in.vmObject[i].PowerOff(ctx)
					if err != nil {
						return err
					}
					if err := task.Wait(ctx); err != nil {
						return err
					}
					poweredOff[dc] = true
				}
			}
			ready := 0
			for _, fd := range fds {
				if fd.Phase == v1alpha1.ImagePhaseReady {
					ready++
				}
			}
			if ready != 6 || len(fds) != 6 {
				return fmt.Errorf("failure domains %+v, want 6 Ready", fds)
			}
			return nil
		})
		t.Logf("immediate: Ready in %s", time.Since(start).Round(time.Millisecond))
		for _, dc := range dcs {
			if !sawInstalling[dc] {
				t.Errorf("%s never reported Installing", dc)
			}
			if !poweredOff[dc] {
				t.Errorf("no build VM powered off in %s", dc)
			}
			m, in := template(t, dc, name)
			if cds := cdroms(m); len(cds) != 0 {
				t.Errorf("template in %s still has CD-ROMs %v", dc, cds)
			}
			if m.Config.Firmware != string(types.GuestOsDescriptorFirmwareTypeEfi) {
				t.Errorf("template in %s: firmware %s, want the template's efi", dc, m.Config.Firmware)
			}
			if in.iso || in.seed {
				t.Errorf("ISOs left in %s after the install: installer %v, seed %v", dc, in.iso, in.seed)
			}
		}
	})

	t.Run("never powers off", func(t *testing.T) {
		img := installer("vs-installer-stuck", v1alpha1.InstallModeImmediate, v1alpha1.FirmwareBIOS, ptr.To[int32](60))
		// Each datacenter's failure, checked there before its retry (the
		// message says when) builds again.
		checked := map[string]bool{}
		start := time.Now()
		eventually(t, 6*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
				return err
			}
			if img.Status.Revision == "" {
				return fmt.Errorf("no revision yet")
			}
			name := images.ArtifactName(img.UID, img.Status.Revision)
			if len(made) == 0 || made[len(made)-1] != name {
				made = append(made, name)
			}
			for _, fd := range fdsOf(img) {
				dc := dcOf[fd.Name]
				if checked[dc] || fd.Phase != v1alpha1.ImagePhaseFailed {
					continue
				}
				if fd.Reason != v1alpha1.ImageReasonInstallTimedOut {
					t.Fatalf("failure domain %+v, want Failed InstallTimedOut", fd)
				}
				_, at, _ := strings.Cut(fd.Message, "(retried at ")
				retry, err := time.Parse(time.RFC3339, strings.TrimSuffix(at, ")"))
				if err != nil {
					return fmt.Errorf("no retry time in %q: %v", fd.Message, err)
				}
				in := installedIn(t, dc, name)
				if time.Now().After(retry.Add(-time.Second)) {
					continue // the retry may run: the next failure
				}
				for _, m := range in.vms {
					t.Errorf("a timed-out install left VM %s (template %v, %s) in %s", m.Name, m.Config.Template, m.Runtime.PowerState, dc)
				}
				if in.iso || in.seed {
					t.Errorf("a timed-out install left ISOs in %s: installer %v, seed %v", dc, in.iso, in.seed)
				}
				checked[dc] = true
			}
			if len(checked) != len(dcs) {
				return fmt.Errorf("checked the failure in %v; failure domains %+v", checked, fdsOf(img))
			}
			return nil
		})
		t.Logf("never powers off: Failed InstallTimedOut, checked in %s", time.Since(start).Round(time.Millisecond))
	})
}
