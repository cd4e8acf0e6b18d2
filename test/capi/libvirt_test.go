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

package capi

import (
	"context"
	"fmt"
	"os/exec"
	"path"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestMachineOnLibvirt: a Cluster API Machine whose infrastructureRef is a
// LibvirtMachine is built by banlieue's libvirt provider (the shipped
// Deployment's pods) on a real libvirtd, reached over qemu+tls:// as a
// host of a real site: the guest boots and runs the Machine's
// bootstrap data, the Machine reaches Provisioned through Cluster API's
// own reconcilers with libvirt://<domain UUID> as providerID and the
// guest's DHCP address; deleting the Machine destroys the domain.
func TestMachineOnLibvirt(t *testing.T) {
	ctx := context.Background()
	d := startLibvirtds(t, "capi-libvirt")[0]
	daemon := d.Daemon
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-libvirt", Namespace: devenv.Namespace, Labels: map[string]string{"capi": "libvirt"}},
		Spec:       v1alpha1.ProviderSpec{Connection: v1alpha1.ProviderConnection{Endpoint: d.Endpoint}},
	}
	startLibvirtProvider(t, ctx, p, d)

	ns := newNamespace(t, "capi-libvirt")
	bindUserData(t, ctx, ns, "libvirt")
	// banlieue's controller serves the LibvirtCluster: it aggregates the
	// Provider's failure domains, and gives the machine below, which names
	// none, its Machine's.
	createInfraCluster(t, ctx, &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "c4", Namespace: ns},
		Spec: infrav1.LibvirtClusterSpec{CommonClusterSpec: infrav1.CommonClusterSpec{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"capi": "libvirt"}}}}},
		"LibvirtCluster", failureDomainNames(p))
	bootstrap := "#!/bin/sh\necho capi-bootstrap-m4\n"
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "m4-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte(bootstrap)}}); err != nil {
		t.Fatal(err)
	}
	lm := &infrav1.LibvirtMachine{
		// Labelled as Cluster API's own machines are: the provider waits
		// for the owning Machine (and its bootstrap data) before building.
		ObjectMeta: metav1.ObjectMeta{Name: "m4", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "c4"}},
		Spec:       guestMachineSpec(),
	}
	if err := c.Create(ctx, lm); err != nil {
		t.Fatal(err)
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m4", Namespace: ns},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c4",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("m4-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "LibvirtMachine", Name: "m4"},
			FailureDomain:     p.Status.FailureDomains[0].Name,
		},
	}
	if err := c.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(machine), machine); err != nil {
			return err
		}
		if machine.Status.Phase != string(clusterv1.MachinePhaseProvisioned) {
			return fmt.Errorf("phase %q", machine.Status.Phase)
		}
		for _, a := range machine.Status.Addresses {
			if a.Type == clusterv1.MachineInternalIP && strings.HasPrefix(a.Address, libvirtd.Subnet+".") {
				return nil
			}
		}
		return fmt.Errorf("no InternalIP yet: %+v", machine.Status.Addresses)
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
		t.Fatal(err)
	}
	if lm.Spec.FailureDomain != machine.Spec.FailureDomain {
		t.Errorf("LibvirtMachine failure domain %q, want its Machine's %q", lm.Spec.FailureDomain, machine.Spec.FailureDomain)
	}
	if machine.Spec.ProviderID != "libvirt://"+string(lm.UID) {
		t.Errorf("Machine providerID %q, LibvirtMachine UID %s", machine.Spec.ProviderID, lm.UID)
	}
	name := providers.BackendName(ns, "m4")
	waitSerial(t, daemon, name, "BANLIEUE-USERDATA capi-bootstrap-m4")

	if err := c.Delete(ctx, machine); err != nil {
		t.Fatal(err)
	}
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(lm), lm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("LibvirtMachine still there (%v)", err)
		}
		if _, err := l.DomainLookupByName(name); err == nil {
			return fmt.Errorf("libvirt still has %s", name)
		}
		return nil
	})
}

// guestImage is the volume of the repository's guest image that
// startLibvirtds imports on each libvirtd.
const guestImage = libvirtd.Pool + "/guest.qcow2"

// startLibvirtds starts a private libvirtd for each name (its own network
// with DHCP, its own pool, in a network namespace of its own), the hosts
// of one site that the provider's pods reach over qemu+tls:// with one
// client certificate (devenv.StartPodsLibvirtds), each holding the
// repository's guest image (built if need be) as guestImage. They stop
// when the test ends, their domains destroyed, leaving nothing running in
// their namespaces.
func startLibvirtds(t *testing.T, names ...string) []*devenv.PodsLibvirtd {
	t.Helper()
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	if out, err := exec.Command(filepath.Join(root, "hack", "build-guest-image.sh"), guest).CombinedOutput(); err != nil {
		t.Fatalf("building the guest image: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ds, err := env.StartPodsLibvirtds(ctx, names...)
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range ds {
		t.Cleanup(func() {
			if err := d.StopAndCheck(); err != nil {
				t.Error(err)
			}
		})
		if err := d.ImportVolume(guest, path.Base(guestImage)); err != nil {
			t.Fatal(err)
		}
	}
	return ds
}

// startLibvirtProvider creates p, a libvirt Provider of the test's
// libvirtds (its endpoints set; d is any of them, as they share their
// credentials), publishing their pool and network as the classes gold and
// prod, the client certificate and CA its connection names (granted to
// the provider by name, as the static install's administrator does), and
// the VMImage capi-guest of guestImage; it waits until banlieue's libvirt
// provider (the package's pods) reports p Ready. p and its credentials
// are deleted when the test ends, before the libvirtds stop.
func startLibvirtProvider(t *testing.T, ctx context.Context, p *v1alpha1.Provider, d *devenv.PodsLibvirtd) {
	t.Helper()
	secret, ca := d.Credentials(devenv.Namespace, p.Name+"-creds", p.Name+"-ca")
	for _, o := range []client.Object{secret, ca} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Delete(context.Background(), o) })
	}
	if err := env.GrantCredentials(ctx, "libvirt", "secrets", secret.Name); err != nil {
		t.Fatal(err)
	}
	if err := env.GrantCredentials(ctx, "libvirt", "configmaps", ca.Name); err != nil {
		t.Fatal(err)
	}
	p.Spec.ProviderClassRef = v1alpha1.LocalObjectReference{Name: "libvirt"}
	p.Spec.Connection.CredentialsRef = v1alpha1.LocalObjectReference{Name: secret.Name}
	p.Spec.Connection.CABundle = &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Name: ca.Name}}
	p.Spec.Capabilities = v1alpha1.ProviderCapabilities{
		StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Pool: libvirtd.Pool}}},
		NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Network: libvirtd.Network}}},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devenv.DeleteProvider(context.Background(), c, p) })
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "capi-guest"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: "Volume", Ref: guestImage}}}}
	if err := c.Create(ctx, img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitProviderReady(t, ctx, p)
}

// guestMachineSpec is a small machine booting the guest image, with a
// DHCP interface on the libvirtd's network; it names no failure domain.
func guestMachineSpec() infrav1.LibvirtMachineSpec {
	return infrav1.LibvirtMachineSpec{
		CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 1, MemoryMiB: 256},
		Image:             guestImage,
		Disks:             []infrav1.LibvirtDisk{{Name: "root", SizeGiB: 1, Pool: libvirtd.Pool}},
		Network:           []infrav1.LibvirtNetworkDevice{{Name: "eth0", Network: libvirtd.Network, DHCP4: true}},
	}
}

// waitSerial waits until the serial console of the domain named name on
// daemon shows line (the guest boots under TCG: tens of seconds).
func waitSerial(t *testing.T, daemon *libvirtd.Daemon, name, line string) {
	t.Helper()
	eventually(t, 3*time.Minute, func() error {
		if log := daemon.SerialLog(name); !strings.Contains(log, line) {
			return fmt.Errorf("the serial console of %s shows no %q:\n%s", name, line, log)
		}
		return nil
	})
}
