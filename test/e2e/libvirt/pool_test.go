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
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// TestPoolAddresses: a class interface with ipam.pool gets its address
// through Cluster API's IPAM contract, served by banlieue's IPPool, on
// both backends: the libvirt guest configures it (its console says so),
// vcsim's guest reports it; deleting the VMs gives the addresses back.
func TestPoolAddresses(t *testing.T) {
	ctx := context.Background()
	pool := &infrav1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "lab-pool"}, Spec: infrav1.IPPoolSpec{
		Addresses: []string{"192.168.150.200-192.168.150.205"}, Prefix: 24, Gateway: "192.168.150.1",
		ExcludedAddresses: []string{"192.168.150.200"}}}
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	sim := vsphereBeside(t, "pool-vsphere", "pool", map[string]string{"pool": "yes", "backend": "vsphere"})
	lp := libvirtProvider("pool-libvirt", map[string]string{"pool": "yes", "backend": "libvirt"})
	if err := c.Create(ctx, lp); err != nil {
		t.Fatal(err)
	}
	waitProviderReady(t, lp.Name)
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pool-image"}, Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{
		{ProviderClass: "vsphere", Kind: v1alpha1.ImageSourceTemplate, Ref: "banlieue-guest"},
		{ProviderClass: "libvirt", Kind: v1alpha1.ImageSourceVolume, Ref: image},
	}}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pool-class"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1}}},
		Network: &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod",
			IPAM: v1alpha1.IPAMConfig{Pool: &v1alpha1.IPPoolReference{Name: "lab-pool"}}}}},
	}}
	for _, o := range []client.Object{img, class} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	addressOf := map[string]string{}
	for _, backend := range []string{"libvirt", "vsphere"} {
		vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "pool-on-" + backend, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "pool-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "pool-image"},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"pool": "yes", "backend": backend}}}}}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		eventually(t, 3*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) {
				return fmt.Errorf("%s not Ready: %+v", vm.Name, vm.Status.Conditions)
			}
			return nil
		})
		claim := &ipamv1.IPAddressClaim{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vm.Name + "-eth0"}, claim); err != nil {
			t.Fatal(err)
		}
		address := &ipamv1.IPAddress{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address); err != nil {
			t.Fatal(err)
		}
		addressOf[backend] = address.Spec.Address
		if !strings.HasPrefix(address.Spec.Address, "192.168.150.20") || address.Spec.Address == "192.168.150.200" {
			t.Errorf("%s: address %s, want one of the pool's, not the excluded .200", vm.Name, address.Spec.Address)
		}
		if !hasAddress(vm.Status.Addresses, address.Spec.Address) {
			t.Errorf("%s: VM addresses %+v lack %s", vm.Name, vm.Status.Addresses, address.Spec.Address)
		}
	}
	if addressOf["libvirt"] == addressOf["vsphere"] {
		t.Errorf("both VMs got %s", addressOf["libvirt"])
	}
	// The guest configured it; vcsim's guest reports it.
	waitSerial(t, ns+".pool-on-libvirt", "BANLIEUE-NET eth0 ")
	if log := daemon.SerialLog(ns + ".pool-on-libvirt"); !strings.Contains(log, " "+addressOf["libvirt"]+"/24") {
		t.Errorf("the libvirt guest did not configure %s/24:\n%s", addressOf["libvirt"], log)
	}
	m, err := vcsim.ReadVM(ctx, sim.Endpoint, "admin@vsphere.local", "pool", "DC0", providers.BackendName(ns, "pool-on-vsphere"))
	if err != nil || m == nil || m.Guest == nil || m.Guest.IpAddress != addressOf["vsphere"] {
		t.Errorf("vcsim VM guest address: %+v (%v), want %s", m, err, addressOf["vsphere"])
	}
	// Deleting the VMs frees their addresses.
	for _, backend := range []string{"libvirt", "vsphere"} {
		if err := c.Delete(ctx, &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "pool-on-" + backend, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, func() error {
		var addresses ipamv1.IPAddressList
		if err := c.List(ctx, &addresses, client.MatchingLabels{"infrastructure.banlieue.io/ippool": "lab-pool"}); err != nil {
			return err
		}
		if len(addresses.Items) > 0 {
			return fmt.Errorf("%d addresses of lab-pool still in use", len(addresses.Items))
		}
		return nil
	})
}

// TestPoolUnderLoad: 32 claims at once on a pool of 30 addresses: 30 get
// an address each, none twice, 2 say PoolExhausted; a freed address goes
// to a waiting claim.
func TestPoolUnderLoad(t *testing.T) {
	ctx := context.Background()
	pool := &infrav1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "burst-pool"}, Spec: infrav1.IPPoolSpec{
		Addresses: []string{"10.99.0.0/27"}, Prefix: 27, Gateway: "10.99.0.1"}} // 30 hosts, minus the gateway: 29
	pool.Spec.Addresses = append(pool.Spec.Addresses, "10.99.1.1") // and one more: 30
	if err := c.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	const claims = 32
	for i := range claims {
		claim := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%02d", i), Namespace: ns},
			Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: infrav1.GroupName, Kind: infrav1.IPPoolKind, Name: "burst-pool"}}}
		if err := c.Create(ctx, claim); err != nil {
			t.Fatal(err)
		}
	}
	bound, exhausted, duplicated := 0, 0, 0
	var waiting []string
	eventually(t, time.Minute, func() error {
		var list ipamv1.IPAddressClaimList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		bound, exhausted, duplicated, waiting = 0, 0, 0, nil
		var handedOut []string
		for _, cl := range list.Items {
			if !strings.HasPrefix(cl.Name, "burst-") {
				continue
			}
			if cl.Status.AddressRef.Name != "" {
				a := &ipamv1.IPAddress{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: cl.Status.AddressRef.Name}, a); err != nil {
					return err
				}
				handedOut = append(handedOut, a.Spec.Address)
				bound++
			} else if cond := meta.FindStatusCondition(cl.Status.Conditions, "Ready"); cond != nil && cond.Reason == "PoolExhausted" {
				exhausted++
				waiting = append(waiting, cl.Name)
			}
		}
		duplicated, _ = count.Duplicated(count.Sightings(handedOut))
		if bound+exhausted != claims {
			return fmt.Errorf("%d bound, %d exhausted of %d", bound, exhausted, claims)
		}
		return nil
	})
	if bound != 30 || exhausted != 2 || duplicated != 0 {
		t.Fatalf("%d bound, %d exhausted, %d addresses handed out twice; want 30, 2, 0", bound, exhausted, duplicated)
	}
	// The pool's counts follow its reservations, a moment after.
	eventually(t, 30*time.Second, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		if pool.Status.Free != 0 || pool.Status.Used != 30 || pool.Status.Total != 30 || !meta.IsStatusConditionTrue(pool.Status.Conditions, "Exhausted") {
			return fmt.Errorf("pool status %+v", pool.Status)
		}
		return nil
	})
	// Free one: one of the two waiting claims gets it.
	if err := c.Delete(ctx, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: "burst-00", Namespace: ns}},
		client.PropagationPolicy(metav1.DeletePropagationForeground)); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		served := 0
		for _, name := range waiting {
			cl := &ipamv1.IPAddressClaim{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cl); err != nil {
				return err
			}
			if cl.Status.AddressRef.Name != "" {
				served++
			}
		}
		if served != 1 {
			return fmt.Errorf("%d of the waiting claims %v served, want 1", served, waiting)
		}
		return nil
	})
	for i := range claims {
		_ = client.IgnoreNotFound(c.Delete(ctx, &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("burst-%02d", i), Namespace: ns}}))
	}
}
