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

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// TestMigrationAcrossBackends: a VM on vcsim moves to the real libvirtd
// when its providerSelector changes: the LibvirtMachine is built and Ready
// before the VSphereMachine (and its vcsim VM) is deleted, the user data
// runs again in the new guest, status.scheduled says where it is now.
// With migrationPolicy Never, a drifted placement is only reported.
func TestMigrationAcrossBackends(t *testing.T) {
	ctx := context.Background()
	sim := vsphereBeside(t, "mig-vsphere", "mig", map[string]string{"mig": "yes", "backend": "vsphere"})
	lp := libvirtProvider("mig-libvirt", map[string]string{"mig": "yes", "backend": "libvirt"})
	if err := c.Create(ctx, lp); err != nil {
		t.Fatal(err)
	}
	waitProviderReady(t, lp.Name)
	tenant := consentingNamespace(t, "mig-tenant", "libvirt", "vsphere")
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mig-user-data", Namespace: tenant},
		Data: map[string]string{"user-data": "#!/bin/sh\necho marker-migrated-77\n"}}); err != nil {
		t.Fatal(err)
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "mig-image"}, Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{
		{ProviderClass: "vsphere", Kind: v1alpha1.ImageSourceTemplate, Ref: "banlieue-guest"},
		{ProviderClass: "libvirt", Kind: v1alpha1.ImageSourceVolume, Ref: image},
	}}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "mig-class"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
	}}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "mig-vm", Namespace: tenant}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "mig-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "mig-image"},
		UserData:  &v1alpha1.UserData{ConfigMapRef: &v1alpha1.KeySelector{Name: "mig-user-data"}},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mig": "yes", "backend": "vsphere"}}}}}
	for _, o := range []client.Object{img, class, vm} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	waitVM := func(what string, timeout time.Duration, ok func(*v1alpha1.VirtualMachine) error) {
		t.Helper()
		eventually(t, timeout, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if err := ok(vm); err != nil {
				return fmt.Errorf("%s: %w (conditions %+v)", what, err, vm.Status.Conditions)
			}
			return nil
		})
	}
	ready := func(provider string) func(*v1alpha1.VirtualMachine) error {
		return func(vm *v1alpha1.VirtualMachine) error {
			if s := vm.Status.Scheduled; s == nil || s.Provider != provider {
				return fmt.Errorf("scheduled %+v", vm.Status.Scheduled)
			}
			if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) {
				return fmt.Errorf("not Ready")
			}
			return nil
		}
	}
	waitVM("Ready on vSphere", 3*time.Minute, ready(ns+"/mig-vsphere"))
	vcName := providers.BackendName(tenant, "mig-vm")
	if m, err := vcsim.ReadVM(ctx, sim.Endpoint, "admin@vsphere.local", "mig", "DC0", vcName); err != nil || m == nil {
		t.Fatalf("no vcsim VM: %v", err)
	}

	// The selector now picks libvirt: the VM moves there.
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.Placement.ProviderSelector.MatchLabels["backend"] = "libvirt"
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	waitVM("migrated to libvirt", 4*time.Minute, func(vm *v1alpha1.VirtualMachine) error {
		if err := ready(ns + "/mig-libvirt")(vm); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating); c == nil || c.Status != metav1.ConditionFalse || c.Reason != "Migrated" {
			return fmt.Errorf("Migrating %+v", c)
		}
		return nil
	})
	ref := vm.Status.InfrastructureRef
	if ref == nil || ref.Kind != "LibvirtMachine" || vm.Status.Migration != nil {
		t.Fatalf("after the migration: infrastructureRef %+v, migration %+v", ref, vm.Status.Migration)
	}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "mig-vm"}, &infrav1.VSphereMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("the VSphereMachine is still there: %v", err)
	}
	eventually(t, time.Minute, func() error {
		if m, err := vcsim.ReadVM(ctx, sim.Endpoint, "admin@vsphere.local", "mig", "DC0", vcName); err != nil || m != nil {
			return fmt.Errorf("vcsim still has %s (%v)", vcName, err)
		}
		return nil
	})
	// The user data ran again, in the new guest.
	waitSerial(t, tenant+"."+ref.Name, "BANLIEUE-USERDATA marker-migrated-77")

	// Manual: the drift is reported with the one-liner; the annotation moves it.
	patch = client.MergeFrom(vm.DeepCopy())
	vm.Spec.MigrationPolicy = v1alpha1.MigrationManual
	vm.Spec.Placement.ProviderSelector.MatchLabels["backend"] = "vsphere"
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	drifted := func(vm *v1alpha1.VirtualMachine) error {
		c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePlacementValid)
		if vm.Status.ObservedGeneration != vm.Generation || c == nil || c.Status != metav1.ConditionFalse || c.Reason != "PlacementDrifted" {
			return fmt.Errorf("PlacementValid %+v at generation %d/%d", c, vm.Status.ObservedGeneration, vm.Generation)
		}
		return nil
	}
	waitVM("drift reported (Manual)", time.Minute, drifted)
	if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePlacementValid); !strings.Contains(c.Message, "banlieue.io/migrate=true") ||
		vm.Status.Scheduled.Provider != ns+"/mig-libvirt" || vm.Status.Migration != nil {
		t.Errorf("Manual: %q, scheduled %+v, migration %+v", c.Message, vm.Status.Scheduled, vm.Status.Migration)
	}
	patch = client.MergeFrom(vm.DeepCopy())
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, "banlieue.io/migrate", "true")
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	waitVM("migrated back to vSphere on request", 4*time.Minute, func(vm *v1alpha1.VirtualMachine) error {
		if err := ready(ns + "/mig-vsphere")(vm); err != nil {
			return err
		}
		if _, still := vm.Annotations["banlieue.io/migrate"]; still {
			return fmt.Errorf("the annotation is still there")
		}
		return nil
	})
	if _, err := lv(t).DomainLookupByName(tenant + "." + ref.Name); err == nil {
		t.Errorf("the libvirt domain %s survived the migration back", ref.Name)
	}
	ref = vm.Status.InfrastructureRef

	// Never: the drift is reported, the VM stays.
	patch = client.MergeFrom(vm.DeepCopy())
	vm.Spec.MigrationPolicy = v1alpha1.MigrationNever
	vm.Spec.Placement.ProviderSelector.MatchLabels["backend"] = "libvirt"
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	waitVM("drift reported (Never)", time.Minute, drifted)
	if vm.Status.Scheduled.Provider != ns+"/mig-vsphere" || vm.Status.Migration != nil {
		t.Errorf("a Never VM moved: scheduled %+v, migration %+v", vm.Status.Scheduled, vm.Status.Migration)
	}
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there: %v", err)
		}
		if m, err := vcsim.ReadVM(ctx, sim.Endpoint, "admin@vsphere.local", "mig", "DC0", providers.BackendName(tenant, ref.Name)); err != nil || m != nil {
			return fmt.Errorf("vcsim still has %s (%v)", ref.Name, err)
		}
		return nil
	})
}
