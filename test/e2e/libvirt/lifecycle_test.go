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
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"libvirt.org/go/libvirtxml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// libvirtProvider is a Provider of the test's libvirtd: its qemu+tls://
// endpoint as the provider's pods reach it, with the site's client
// certificate and CA (siteCredentials), the pool and the DHCP network as
// the gold and prod classes.
func libvirtProvider(name string, labels map[string]string) *v1alpha1.Provider {
	return &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"},
			Connection: v1alpha1.ProviderConnection{Endpoint: daemon.Endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: creds},
				CABundle: &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Name: caConfigMap}}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Pool: libvirtd.Pool}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Network: libvirtd.Network}}},
			},
		},
	}
}

func waitProviderReady(t *testing.T, name string) *v1alpha1.Provider {
	t.Helper()
	p := &v1alpha1.Provider{}
	eventually(t, 90*time.Second, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
			return fmt.Errorf("Provider %s not Ready: %+v", name, p.Status.Conditions)
		}
		return nil
	})
	return p
}

// TestSeedGuideOnLibvirt: the seed guide's flow on a libvirt Provider. The
// Provider publishes its host as a failure domain, the image's volume is
// found there, and a VirtualMachine with the override example's shape
// (more memory than its class, a 2000 GiB data disk, a static eth0 beside
// a DHCP eth1) becomes a domain whose guest boots, runs the user data and
// applies the network config; kubectl wait sees it Ready with an address;
// power changes reach the domain; deleting it leaves nothing on the host.
func TestSeedGuideOnLibvirt(t *testing.T) {
	ctx := context.Background()
	p := libvirtProvider("lab-libvirt", map[string]string{"env": "lab"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitProviderReady(t, "lab-libvirt")
	if len(p.Status.FailureDomains) != 1 || p.Status.FailureDomains[0].Host == "" {
		t.Fatalf("failure domains %+v: want one host", p.Status.FailureDomains)
	}
	fd := p.Status.FailureDomains[0]

	img := ensureImage(t)
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		for _, s := range img.Status.PerProvider {
			if s.Provider == ns+"/lab-libvirt" && s.Ready {
				return nil
			}
		}
		return fmt.Errorf("image not ready on lab-libvirt: %+v", img.Status.PerProvider)
	})
	// A class small enough for software emulation; the VM overrides it.
	class := &v1alpha1.VMClass{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-small"},
		Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{
				{Name: "root", SizeGiB: 1, StorageClass: "gold", Provisioning: "thin"},
				{Name: "data", SizeGiB: 500, StorageClass: "gold", Provisioning: "thin"},
			}},
			Network: &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{
				{Name: "eth0", NetworkClass: "prod"}, {Name: "eth1", NetworkClass: "prod"}}},
			Firmware: "bios",
		},
	}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	// The VM lives in a tenant namespace that consents to its user data
	// being read: the install's own namespace never does.
	tenant := consentingNamespace(t, "lab-tenant", "libvirt")
	userData := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "lab-vm-0-cloudinit", Namespace: tenant},
		StringData: map[string]string{"user-data": "#!/bin/sh\necho seed-guide-marker-7731\n"}}
	if err := c.Create(ctx, userData); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "lab-vm-0", Namespace: tenant},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "lab-small"}, ImageRef: v1alpha1.LocalObjectReference{Name: "guest"},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "lab"}}},
			UserData:  &v1alpha1.UserData{SecretRef: &v1alpha1.KeySelector{Name: "lab-vm-0-cloudinit"}},
			HardwareOverride: &v1alpha1.HardwareOverride{MemoryMiB: ptr.To[int64](384),
				DiskOverrides: []v1alpha1.DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: libvirtd.Subnet + ".90", Prefix: ptr.To[int32](24), Gateway: libvirtd.Subnet + ".1"}}},
		},
	}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", tenant, "wait", "--for=condition=Ready",
		"virtualmachine/lab-vm-0", "--timeout=3m").CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	name := providers.BackendName(tenant, "lab-vm-0")
	lm := &infrav1.LibvirtMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "lab-vm-0"}, lm); err != nil {
		t.Fatal(err)
	}
	if lm.Spec.FailureDomain != fd.Name || lm.Spec.Image != image || lm.Spec.ProviderID != "libvirt://"+string(lm.UID) {
		t.Errorf("LibvirtMachine spec %+v (uid %s)", lm.Spec, lm.UID)
	}

	// The domain as libvirt has it.
	l := lv(t)
	dom, err := l.DomainLookupByName(name)
	if err != nil {
		t.Fatalf("domain %s: %v", name, err)
	}
	doc, err := l.DomainGetXMLDesc(dom, 0)
	if err != nil {
		t.Fatal(err)
	}
	def := &libvirtxml.Domain{}
	if err := def.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	if def.Type != "qemu" || def.Memory.Value != 384*1024 || def.VCPU.Value != 1 || len(def.Devices.Interfaces) != 2 || def.UUID != string(lm.UID) {
		t.Errorf("domain type %s memory %d KiB vcpus %d interfaces %d uuid %s", def.Type, def.Memory.Value, def.VCPU.Value, len(def.Devices.Interfaces), def.UUID)
	}

	// What the guest saw.
	log := waitSerial(t, name, "BANLIEUE-READY")
	for _, want := range []string{
		"BANLIEUE-BOOT lab-vm-0",
		"BANLIEUE-USERDATA seed-guide-marker-7731",
		"BANLIEUE-DISK vdb 2048000",
		fmt.Sprintf("BANLIEUE-NET eth0 %s %s.90/24", lm.Status.MACAddresses[0], libvirtd.Subnet),
		fmt.Sprintf("BANLIEUE-NET eth1 %s %s.", lm.Status.MACAddresses[1], libvirtd.Subnet),
	} {
		if !strings.Contains(log, want) {
			t.Errorf("serial console lacks %q:\n%s", want, log)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if !hasAddress(vm.Status.Addresses, libvirtd.Subnet+".") || vm.Status.PowerState != "PoweredOn" {
		t.Errorf("VM status addresses %v power %s", vm.Status.Addresses, vm.Status.PowerState)
	}

	// Power: off (ACPI, the guest's acpid), suspended (a managed save: the
	// domain shut off, its memory on the host), on again (restored).
	for _, want := range []struct {
		power string
		state golibvirt.DomainState
	}{{"PoweredOff", golibvirt.DomainShutoff}, {"PoweredOn", golibvirt.DomainRunning}, {"Suspended", golibvirt.DomainShutoff}, {"PoweredOn", golibvirt.DomainRunning}} {
		setPower(t, vm, want.power)
		eventually(t, 90*time.Second, func() error {
			st, _, err := l.DomainGetState(dom, 0)
			if err != nil {
				return err
			}
			if golibvirt.DomainState(st) != want.state {
				return fmt.Errorf("domain state %d, want %d (%s)", st, want.state, want.power)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if string(vm.Status.PowerState) != want.power {
				return fmt.Errorf("VM power state %s, want %s", vm.Status.PowerState, want.power)
			}
			return nil
		})
	}
	if !strings.Contains(daemon.SerialLog(name), "BANLIEUE-POWEROFF") && !strings.Contains(daemon.SerialLog(name), "reboot: Power down") {
		t.Error("the guest did not shut itself down on ACPI (the grace period destroyed it instead)")
	}

	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there (%v)", err)
		}
		return nil
	})
	if _, err := l.DomainLookupByName(name); err == nil {
		t.Errorf("domain %s left behind", name)
	}
	if left := volumesOf(t, l, string(lm.UID)); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
}

func setPower(t *testing.T, vm *v1alpha1.VirtualMachine, power string) {
	t.Helper()
	ctx := context.Background()
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.DesiredPowerState = v1alpha1.PowerState(power)
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
}

func hasAddress(addrs []v1alpha1.MachineAddress, prefix string) bool {
	for _, a := range addrs {
		if a.Type == "InternalIP" && strings.HasPrefix(a.Address, prefix) {
			return true
		}
	}
	return false
}

func waitSerial(t *testing.T, name, want string) string {
	t.Helper()
	var log string
	eventually(t, 90*time.Second, func() error {
		if log = daemon.SerialLog(name); !strings.Contains(log, want) {
			return fmt.Errorf("no %q on %s's serial console:\n%s", want, name, log)
		}
		return nil
	})
	return log
}

func volumesOf(t *testing.T, l *golibvirt.Libvirt, uid string) []string {
	t.Helper()
	vols, err := libvirtd.PoolVolumes(l, func(name string) bool { return strings.Contains(name, uid) })
	if err != nil {
		t.Fatal(err)
	}
	return vols
}

// ensureImage makes sure the VMImage "guest" has the test volume as its
// libvirt source: a Provider builds only images some VMImage publishes.
func ensureImage(t *testing.T) *v1alpha1.VMImage {
	t.Helper()
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "guest"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: "Volume", Ref: image}}}}
	if err := c.Create(context.Background(), img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return img
}
