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
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// installed is, on the simulator, the VMs named name (templates or
// not) and the ISO volumes of that name (installer and seed) on any node.
func installed(name string) (vms []pvesim.VM, isos []string) {
	for _, v := range sim.VMs() {
		if v.Name == name {
			vms = append(vms, v)
		}
	}
	for _, vol := range sim.Volumes() {
		if strings.Contains(vol, ":iso/"+name) {
			isos = append(isos, vol)
		}
	}
	return vms, isos
}

// TestProxmoxInstallerImages: installer images (format iso) on each node
// of the simulated cluster.
//   - deferred: the ISO uploaded as iso content and a template made of a
//     VM with a blank disk and the ISO as a CD-ROM (booting the disk,
//     then the CD-ROM), never powered on; the ISO stays for the clones;
//     a VM of the image becomes Ready.
//   - immediate: a build VM (the ISO, a NoCloud seed with the image's
//     cloudConfigs) is started and the failure domain reports Installing;
//     pvesim runs no guest, so the TEST powers the build VM off through
//     the Proxmox API, as the installer's guest would; the VM, its
//     CD-ROMs detached, becomes the template and both ISOs are deleted.
//   - an immediate installer nobody powers off fails InstallTimedOut and
//     leaves no VM and no ISO on its node.
func TestProxmoxInstallerImages(t *testing.T) {
	ctx := context.Background()
	// pvesim boots nothing: any valid ISO is an installer.
	iso, err := cloudinit.ISO("INSTALLER", map[string][]byte{"readme": []byte("an installer pvesim never boots\n")})
	if err != nil {
		t.Fatal(err)
	}
	// Served as a mirror would, from loopback, to the provider's pods.
	isoFile := imagetest.WriteFile(t, "installer.iso", iso)
	url, sum := servedToPods(t, map[string]string{"/installer.iso": isoFile})+"/installer.iso", imagetest.Checksum(t, isoFile)
	p := proxmoxProvider(t, "install-proxmox", "proxmox-token", map[string]string{"role": "install"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	p = waitProvider(t, p.Name, "InventoryWalked")
	key := ns + "/" + p.Name
	nodeOf := map[string]string{}
	var nodes []string
	for _, fd := range p.Status.FailureDomains {
		nodeOf[fd.Name] = fd.Host
		nodes = append(nodes, fd.Host)
	}
	if len(nodes) != 3 {
		t.Fatalf("failure domains %+v: want the 3 nodes", p.Status.FailureDomains)
	}
	cc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pve-install-config", Namespace: ns}, StringData: map[string]string{
		"cloud-config": "#cloud-config\nwrite_files:\n- path: /etc/banlieue/marker\n  content: installed\n"}}
	if err := c.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	// The administrator publishing the image names its cloud config in
	// the static provider's credentials Role.
	if err := env.GrantCredentials(ctx, "proxmox", "secrets", cc.Name); err != nil {
		t.Fatal(err)
	}
	installer := func(name string, mode v1alpha1.InstallMode, firmware v1alpha1.Firmware, timeout *int32) *v1alpha1.VMImage {
		img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VMImageSpec{
			OSFamily: "linux",
			Import: &v1alpha1.ImageImport{URL: url, Checksum: sum, Format: v1alpha1.ImageFormatISO,
				InstallTimeoutSeconds: timeout, ProviderClasses: []string{"proxmox"}},
			Template:     &v1alpha1.ImageTemplate{InstallMode: mode, Firmware: firmware},
			CloudConfigs: []v1alpha1.CloudConfigSource{{SecretRef: v1alpha1.LocalObjectReference{Name: cc.Name}}}}}
		if err := c.Create(ctx, img); err != nil {
			t.Fatal(err)
		}
		return img
	}
	templatesOf := func(t *testing.T, name string) map[string]pvesim.VM {
		t.Helper()
		vms, _ := installed(name)
		out := map[string]pvesim.VM{}
		for _, v := range vms {
			if !v.Template {
				t.Errorf("VM %d %s on %s is no template", v.VMID, v.Name, v.Node)
				continue
			}
			if _, dup := out[v.Node]; dup {
				t.Errorf("node %s has two templates %s", v.Node, name)
			}
			out[v.Node] = v
		}
		for _, n := range nodes {
			if _, ok := out[n]; !ok {
				t.Errorf("node %s has no template %s (all: %+v)", n, name, vms)
			}
		}
		return out
	}

	t.Run("deferred", func(t *testing.T) {
		img := installer("pve-installer-deferred", v1alpha1.InstallModeDeferred, v1alpha1.FirmwareBIOS, nil)
		waitImageReady(t, img, 3*time.Minute)
		name := images.ArtifactName(img.UID, img.Status.Revision)
		for _, fd := range importedOn(img, key) {
			if fd.Phase != v1alpha1.ImagePhaseReady || fd.Ref != name {
				t.Errorf("failure domain %+v; want Ready with ref %s", fd, name)
			}
		}
		for node, v := range templatesOf(t, name) {
			if ide0 := fmt.Sprint(v.Config["ide0"]); !strings.Contains(ide0, ":iso/"+name+".iso") || !strings.Contains(ide0, "media=cdrom") {
				t.Errorf("template on %s: ide0 %q, want the installer as a CD-ROM", node, ide0)
			}
			if boot := fmt.Sprint(v.Config["boot"]); boot != "order=scsi0;ide0" {
				t.Errorf("template on %s: boot %q, want the disk then the installer", node, boot)
			}
			if !strings.Contains(fmt.Sprint(v.Config["scsi0"]), "size=8G") {
				t.Errorf("template on %s: scsi0 %v, want a blank 8 GiB disk", node, v.Config["scsi0"])
			}
			if v.Boots != 0 || v.Status != "stopped" {
				t.Errorf("template on %s: %d boots, status %s; want never powered on", node, v.Boots, v.Status)
			}
		}
		_, isos := installed(name)
		if len(isos) != len(nodes) {
			t.Errorf("ISOs %v: want the installer on each node (the clones boot it)", isos)
		}
		vm := readyVMOf(t, "pve-installed-vm", "pve-install-small", 10, img.Name, "install", "192.0.2.61")
		_ = c.Delete(ctx, vm)
	})

	t.Run("immediate", func(t *testing.T) {
		img := installer("pve-installer-immediate", v1alpha1.InstallModeImmediate, v1alpha1.FirmwareEFI, nil)
		api := proxmox.NewClient(sim.URL, proxmox.WithHTTPClient(sim.Client()), proxmox.WithAPIToken(sim.TokenID, sim.Secret))
		sawInstalling := map[string]bool{}
		poweredOff := map[int]bool{}
		var name string
		eventually(t, 4*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
				return err
			}
			if img.Status.Revision == "" {
				return fmt.Errorf("no revision yet")
			}
			name = images.ArtifactName(img.UID, img.Status.Revision)
			fds := importedOn(img, key)
			for _, fd := range fds {
				if fd.Phase == v1alpha1.ImagePhaseInstalling {
					sawInstalling[nodeOf[fd.Name]] = true
				}
			}
			// pvesim runs no guest: the test powers each build VM off
			// through the Proxmox API, as the installer's guest would
			// once done, after its failure domain reported Installing.
			vms, _ := installed(name)
			for _, v := range vms {
				if v.Template || v.Status != "running" || !sawInstalling[v.Node] || poweredOff[v.VMID] {
					continue
				}
				for _, cd := range []string{"ide0", "ide2"} {
					if !strings.Contains(fmt.Sprint(v.Config[cd]), "media=cdrom") {
						t.Errorf("build VM %d on %s: %s %v, want a CD-ROM", v.VMID, v.Node, cd, v.Config[cd])
					}
				}
				if _, err := api.NodeRef(v.Node).VirtualMachineRef(v.VMID).Stop(ctx); err != nil {
					return err
				}
				poweredOff[v.VMID] = true
			}
			ready := 0
			for _, fd := range fds {
				if fd.Phase == v1alpha1.ImagePhaseReady {
					ready++
				}
			}
			if ready != len(nodes) || len(fds) != len(nodes) {
				return fmt.Errorf("failure domains %+v, want %d Ready", fds, len(nodes))
			}
			return nil
		})
		for _, n := range nodes {
			if !sawInstalling[n] {
				t.Errorf("node %s never reported Installing", n)
			}
		}
		if len(poweredOff) != len(nodes) {
			t.Errorf("powered off %d build VMs, want one per node", len(poweredOff))
		}
		for node, v := range templatesOf(t, name) {
			for _, cd := range []string{"ide0", "ide2"} {
				if _, ok := v.Config[cd]; ok {
					t.Errorf("template on %s still has %s = %v", node, cd, v.Config[cd])
				}
			}
			if v.Config["bios"] != "ovmf" || v.Config["efidisk0"] == nil {
				t.Errorf("template on %s: bios %v efidisk0 %v, want the template's efi firmware", node, v.Config["bios"], v.Config["efidisk0"])
			}
		}
		if _, isos := installed(name); len(isos) > 0 {
			t.Errorf("ISOs left after the install: %v", isos)
		}
		_ = c.Delete(ctx, img)
	})

	t.Run("never powers off", func(t *testing.T) {
		img := installer("pve-installer-stuck", v1alpha1.InstallModeImmediate, v1alpha1.FirmwareBIOS, ptr.To[int32](60))
		// Each node's failure, checked on its node before its retry
		// (the message says when) builds again.
		checked := map[string]bool{}
		eventually(t, 6*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
				return err
			}
			name := images.ArtifactName(img.UID, img.Status.Revision)
			for _, fd := range importedOn(img, key) {
				node := nodeOf[fd.Name]
				if checked[node] || fd.Phase != v1alpha1.ImagePhaseFailed {
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
				vms, isos := installed(name)
				if time.Now().After(retry.Add(-time.Second)) {
					continue // the retry may run: the next failure
				}
				for _, v := range vms {
					if v.Node == node {
						t.Errorf("a timed-out install left VM %d (template %v, %s) on %s", v.VMID, v.Template, v.Status, node)
					}
				}
				for _, iso := range isos {
					if strings.HasPrefix(iso, node+"/") {
						t.Errorf("a timed-out install left %s", iso)
					}
				}
				checked[node] = true
			}
			if len(checked) != len(nodes) {
				return fmt.Errorf("checked the failure on %v; failure domains %+v", checked, importedOn(img, key))
			}
			return nil
		})
		_ = c.Delete(ctx, img)
	})
}

// waitImageReady waits for kubectl wait to see img Ready, and reads it
// again.
func waitImageReady(t *testing.T, img *v1alpha1.VMImage, timeout time.Duration) {
	t.Helper()
	out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "wait", "--for=condition=Ready",
		"vmimage/"+img.Name, fmt.Sprintf("--timeout=%ds", int(timeout.Seconds()))).CombinedOutput()
	_ = c.Get(context.Background(), client.ObjectKeyFromObject(img), img)
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s\nstatus: %+v", err, out, img.Status)
	}
}
