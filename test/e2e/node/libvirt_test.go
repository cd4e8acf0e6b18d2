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

package node

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestLibvirtProviderRunsAsPods: the shipped libvirt provider Deployment,
// applied as it is but for the domain type its configuration is edited to
// (qemu: this machine has no working KVM), runs as a pod that reaches a
// real libvirtd over qemu+tls:// from the pod network (libvirtd in a
// network namespace of its own with its guest network, reached through
// its forwarder on the host's loopback, that port exposed on the bridge's
// gateway, its certificate naming that address), with the client
// certificate and CA read by the names its Role grants (libvirt-creds,
// libvirt-ca), and reports the Provider Ready (runStaticProvider). Then a
// VirtualMachine placed on that Provider, made into a LibvirtMachine by
// the shipped controller's pods, is built by the pod over TLS: kubectl
// wait sees it Ready, its guest boots to its shell (the serial console)
// and takes a DHCP address on the guest network the VM reports; deleting
// it leaves neither the domain nor its volumes; stopping the libvirtd
// leaves nothing running in its namespace.
func TestLibvirtProviderRunsAsPods(t *testing.T) {
	if why := libvirtd.Missing(); why != "" {
		t.Fatalf("a libvirtd needs %s", why)
	}
	ctx := context.Background()
	c, err := env.ServedClient(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d := podsLibvirtd(t, ctx)

	secret, ca := d.Credentials(devenv.Namespace, "libvirt-creds", "libvirt-ca")
	for _, o := range []client.Object{secret, ca} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "pod-libvirt", Namespace: devenv.Namespace, Labels: map[string]string{"role": "pod-libvirt"}},
		Spec: v1alpha1.ProviderSpec{ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"},
			Connection: v1alpha1.ProviderConnection{Endpoint: d.Endpoint,
				CredentialsRef: v1alpha1.LocalObjectReference{Name: "libvirt-creds"},
				CABundle:       &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Name: "libvirt-ca"}}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Pool: libvirtd.Pool}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Network: libvirtd.Network}}},
			}}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}

	// The controller's pods make the VM into a LibvirtMachine.
	installController(t)
	runStaticProvider(t, ctx, c, p, "libvirt", map[string]string{"BANLIEUE_DOMAIN_TYPE": "qemu"})
	bootOnPodProvider(t, ctx, c, d.Daemon, p)
}

// bootOnPodProvider builds a VM of the test guest on p (the pod-run
// provider's), checks it boots on d with an address of d's guest network,
// deletes it and checks d keeps nothing of it.
func bootOnPodProvider(t *testing.T, ctx context.Context, c client.Client, d *libvirtd.Daemon, p *v1alpha1.Provider) {
	t.Helper()
	img := guestImage(t, ctx, c, p)
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pod-libvirt-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "pod-libvirt-vm", Namespace: devenv.Namespace}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: img.Name},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: p.Labels}}}}
	created := time.Now()
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	// Software emulation on a busy machine: minutes, not seconds.
	if out, err := env.Kubectl("", "-n", devenv.Namespace, "wait", "--for=condition=Ready", "virtualmachine/"+vm.Name, "--timeout=5m"); err != nil {
		t.Fatalf("kubectl wait: %v\n%s\n%s", err, out, env.PodsSummary(ctx))
	}
	t.Logf("VM %s Ready %s after its creation", vm.Name, time.Since(created).Round(time.Second))
	domain := providers.BackendName(vm.Namespace, vm.Name)
	// The shell starts after this line (hack/guest/init).
	eventually(t, 3*time.Minute, func() error {
		if log := d.SerialLog(domain); !strings.Contains(log, "BANLIEUE-READY") {
			return fmt.Errorf("no BANLIEUE-READY on %s's serial console:\n%s", domain, log)
		}
		return nil
	})
	addr := guestAddress(t, ctx, c, vm)
	// The guest itself has that address (from the network's DHCP server).
	if line := serialLine(d.SerialLog(domain), "BANLIEUE-NET eth0 "); !strings.HasSuffix(line, " "+addr+"/24") {
		t.Errorf("the VM reports %s, the guest's serial console %q:\n%s", addr, line, d.SerialLog(domain))
	}
	t.Logf("guest booted %s after the VM's creation, address %s", time.Since(created).Round(time.Second), addr)

	lm := &infrav1.LibvirtMachine{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), lm); err != nil {
		t.Fatal(err)
	}
	deleteAndCheckGone(t, ctx, c, d, vm, domain, string(lm.UID))
}

// serialLine is the first line of log that starts with prefix, without
// its line ending, or "".
func serialLine(log, prefix string) string {
	for _, line := range strings.Split(log, "\n") {
		if strings.HasPrefix(line, prefix) {
			return strings.TrimRight(line, "\r")
		}
	}
	return ""
}

// guestAddress waits until vm reports an address on the guest network,
// and returns it.
func guestAddress(t *testing.T, ctx context.Context, c client.Client, vm *v1alpha1.VirtualMachine) string {
	t.Helper()
	var addr string
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		for _, a := range vm.Status.Addresses {
			if a.Type == "InternalIP" && strings.HasPrefix(a.Address, libvirtd.Subnet+".") {
				addr = a.Address
				return nil
			}
		}
		return fmt.Errorf("VM addresses %v, want one on the guest network %s.0/24", vm.Status.Addresses, libvirtd.Subnet)
	})
	return addr
}

// deleteAndCheckGone deletes vm and checks that d has neither its domain
// nor a volume named for uid (its LibvirtMachine's) once it is gone.
func deleteAndCheckGone(t *testing.T, ctx context.Context, c client.Client, d *libvirtd.Daemon, vm *v1alpha1.VirtualMachine, domain, uid string) {
	t.Helper()
	l, err := d.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	if vols := volumesOf(t, l, uid); len(vols) == 0 {
		t.Fatalf("no volume named for %s while the VM runs: the check below could not fail", uid)
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
	if _, err := l.DomainLookupByName(domain); err == nil {
		t.Errorf("domain %s left behind", domain)
	}
	if left := volumesOf(t, l, uid); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
}

// guestImage publishes the test guest's volume, in the daemon's pool, as
// the VMImage pod-libvirt-guest, and waits until p finds it there.
func guestImage(t *testing.T, ctx context.Context, c client.Client, p *v1alpha1.Provider) *v1alpha1.VMImage {
	t.Helper()
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pod-libvirt-guest"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: "Volume", Ref: libvirtd.Pool + "/" + guestVolume}}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		for _, s := range img.Status.PerProvider {
			if s.Provider == p.Namespace+"/"+p.Name && s.Ready {
				return nil
			}
		}
		return fmt.Errorf("image not ready on %s: %+v", p.Name, img.Status.PerProvider)
	})
	return img
}

// volumesOf lists the volumes of the daemon's pool named for uid.
func volumesOf(t *testing.T, l *golibvirt.Libvirt, uid string) []string {
	t.Helper()
	vols, err := libvirtd.PoolVolumes(l, func(name string) bool { return strings.Contains(name, uid) })
	if err != nil {
		t.Fatal(err)
	}
	return vols
}

// eventually polls f until it returns nil, failing the test with its last
// error after timeout.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), time.Second, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("not within %s: %v", timeout, last)
	}
}

// guestVolume is the test guest's image (bin/guest, hack/build-guest-image.sh)
// in the daemon's pool.
const guestVolume = "guest.qcow2"

// podsLibvirtd starts a libvirtd pods reach (devenv.StartPodsLibvirtd),
// the test guest's image in its pool; it stops when the test ends,
// leaving nothing running in its network namespace.
func podsLibvirtd(t *testing.T, ctx context.Context) *devenv.PodsLibvirtd {
	t.Helper()
	start, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := env.StartPodsLibvirtd(start, "pod-libvirt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.StopAndCheck(); err != nil {
			t.Error(err)
		}
	})
	if err := d.ImportVolume(filepath.Join(root, "bin", "guest", guestVolume), guestVolume); err != nil {
		t.Fatal(err)
	}
	return d
}
