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
	"encoding/base64"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/diff"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
	"libvirt.org/go/libvirtxml"
)

// TestOneManifestThreeBackends: one VirtualMachine manifest, its image
// having a vSphere template, a libvirt volume and a Proxmox VE template,
// lands on a simulated vCenter, on the real libvirtd or on the Proxmox VE
// simulator by placement.providerSelector alone. All become Ready;
// /resolved is the same for all; /placement explains every Provider for
// each.
func TestOneManifestThreeBackends(t *testing.T) {
	ctx := context.Background()
	sim, vcEndpoint := vsphereSite(t, "two-backends")
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "two-vsphere-creds", Namespace: ns},
		StringData: map[string]string{"username": "admin@vsphere.local", "password": "two-backends"}}
	if err := c.Create(ctx, creds); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", creds.Name); err != nil {
		t.Fatal(err)
	}
	vp := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "two-vsphere", Namespace: ns, Labels: map[string]string{"two": "yes", "backend": "vsphere"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: vcEndpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: creds.Name},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
			},
		},
	}
	lp := libvirtProvider("two-libvirt", map[string]string{"two": "yes", "backend": "libvirt"})
	pve, pveEndpoint := proxmoxSite(t)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "two-proxmox-token", Namespace: ns},
		StringData: map[string]string{"tokenID": pve.TokenID, "tokenSecret": pve.Secret}}); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	if err := env.GrantCredentials(ctx, "proxmox", "secrets", "two-proxmox-token"); err != nil {
		t.Fatal(err)
	}
	pp := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "two-proxmox", Namespace: ns, Labels: map[string]string{"two": "yes", "backend": "proxmox"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
			Connection: v1alpha1.ProviderConnection{Endpoint: pveEndpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: "two-proxmox-token"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(pve.CA)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr0"}}},
			},
		},
	}
	if err := c.Create(ctx, lp); err != nil {
		t.Fatal(err)
	}
	for _, p := range []*v1alpha1.Provider{vp, pp} {
		createProvider(t, p)
	}
	for _, p := range []*v1alpha1.Provider{vp, lp, pp} {
		waitProviderReady(t, p.Name)
	}
	// The image's cloud config, in the Providers' namespace, reaches both guests.
	cc := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "two-cloud-config", Namespace: ns},
		StringData: map[string]string{"cloud-config": "#cloud-config\n# marker-two-cloud-config\n"}}
	if err := c.Create(ctx, cc); err != nil {
		t.Fatal(err)
	}
	// The image's cloud config is a Secret of the Providers' namespace
	// that each static provider reads by name, as the administrator
	// publishing the image names it in their credentials Roles.
	for _, class := range []string{"vsphere", "libvirt", "proxmox"} {
		if err := env.GrantCredentials(ctx, class, "secrets", cc.Name); err != nil {
			t.Fatal(err)
		}
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "two-image"}, Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{
		{ProviderClass: "vsphere", Kind: v1alpha1.ImageSourceTemplate, Ref: "banlieue-guest"},
		{ProviderClass: "libvirt", Kind: v1alpha1.ImageSourceVolume, Ref: image},
		{ProviderClass: "proxmox", Kind: v1alpha1.ImageSourceTemplate, Ref: "debian-12-cloud"},
	}, CloudConfigs: []v1alpha1.CloudConfigSource{{SecretRef: v1alpha1.LocalObjectReference{Name: cc.Name}}}}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "two-class"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold", Provisioning: "thin"}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
		Firmware: "bios",
	}}
	for _, o := range []client.Object{img, class} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// The one manifest; only the selector's backend label differs.
	manifest := func(name, backend string) *v1alpha1.VirtualMachine {
		return &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "two-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "two-image"},
			Placement:         &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"two": "yes", "backend": backend}}},
			DesiredPowerState: v1alpha1.PowerStatePoweredOn,
		}}
	}
	vms := map[string]*v1alpha1.VirtualMachine{"vsphere": manifest("two-on-vsphere", "vsphere"), "libvirt": manifest("two-on-libvirt", "libvirt"),
		"proxmox": manifest("two-on-proxmox", "proxmox")}
	for _, vm := range vms {
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	wantKind := map[string]string{"vsphere": "VSphereMachine", "libvirt": "LibvirtMachine", "proxmox": "ProxmoxMachine"}
	for backend, vm := range vms {
		eventually(t, 3*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) {
				return fmt.Errorf("%s not Ready: %+v", vm.Name, vm.Status.Conditions)
			}
			return nil
		})
		if vm.Status.Scheduled.Provider != "two-"+backend || vm.Status.InfrastructureRef == nil || vm.Status.InfrastructureRef.Kind != wantKind[backend] {
			t.Errorf("%s: scheduled %+v, infrastructure %+v", vm.Name, vm.Status.Scheduled, vm.Status.InfrastructureRef)
		}
	}
	// The backends hold them: a vcsim VM and a libvirt domain, each guest
	// given the image's cloud config.
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "two-on-vsphere"}, &infrav1.VSphereMachine{}); err != nil {
		t.Error(err)
	}
	m, err := vcsim.ReadVM(ctx, sim.Endpoint, "admin@vsphere.local", "two-backends", "DC0", providers.BackendName(ns, "two-on-vsphere"))
	if err != nil || m == nil {
		t.Fatalf("vcsim VM: %v", err)
	}
	var userData string
	for _, o := range m.Config.ExtraConfig {
		if v := o.GetOptionValue(); v.Key == "guestinfo.userdata" {
			raw, _ := base64.StdEncoding.DecodeString(fmt.Sprint(v.Value))
			userData = string(raw)
		}
	}
	if !strings.Contains(userData, "# marker-two-cloud-config") {
		t.Errorf("vcsim guestinfo.userdata lacks the image's cloud config: %q", userData)
	}
	if _, err := lv(t).DomainLookupByName(ns + ".two-on-libvirt"); err != nil {
		t.Errorf("no libvirt domain: %v", err)
	}
	waitSerial(t, ns+".two-on-libvirt", "BANLIEUE-USERDATA # marker-two-cloud-config")

	cs, err := clientset.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	api := cs.BanlieueV1alpha1().VirtualMachines(ns)
	ra, err := api.GetResolved(ctx, "two-on-vsphere", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The selector is the one difference the manifests have.
	ra.Spec.Placement = nil
	for _, other := range []string{"two-on-libvirt", "two-on-proxmox"} {
		rb, err := api.GetResolved(ctx, other, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rb.Spec.Placement = nil
		if !apiequality.Semantic.DeepEqual(ra.Spec, rb.Spec) {
			t.Errorf("/resolved differs between vsphere and %s:\n%s", other, diff.Diff(ra.Spec, rb.Spec))
		}
	}
	// The Proxmox VM: a full clone of the template on the simulator, with
	// the cloud-init seed attached.
	var pveVM *pvesim.VM
	for _, v := range pve.VMs() {
		if v.Name == providers.BackendName(ns, "two-on-proxmox") {
			pveVM = &v
		}
	}
	if pveVM == nil || !strings.Contains(fmt.Sprint(pveVM.Config["ide2"]), "media=cdrom") {
		t.Errorf("Proxmox VM %+v", pveVM)
	}
	for backend, vm := range vms {
		pl, err := api.GetPlacement(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		verdicts := map[string]v1alpha1.ProviderPlacement{}
		for _, p := range pl.Result.Providers {
			verdicts[p.Provider] = p
		}
		if !verdicts["two-"+backend].Fits {
			t.Errorf("%s: /placement on two-%s %+v", vm.Name, backend, verdicts["two-"+backend])
		}
		for other := range vms {
			if other != backend && (verdicts["two-"+other].Fits || verdicts["two-"+other].Message == "") {
				t.Errorf("%s: /placement on two-%s %+v", vm.Name, other, verdicts["two-"+other])
			}
		}
	}
	classPinning(t, api, vms, wantKind, func(backend, name string) int { return cpus(t, sim, pve, backend, name) })
	for backend, vm := range vms {
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady); c.Reason != "Reachable" {
			t.Errorf("%s: Ready reason %s, want Reachable", vm.Name, c.Reason)
		}
		pauseAndResume(t, vm, wantKind[backend], power(t, sim, pve, backend, vm.Name))
	}
}

// cpus reads the CPU count the VM named name runs with on its backend;
// 0 when it is not running.
func cpus(t *testing.T, sim *vcsim.Simulator, pve *pvesim.Simulator, backend, name string) int {
	t.Helper()
	if backend == "proxmox" {
		for _, v := range pve.VMs() {
			if v.Name == providers.BackendName(ns, name) && v.Status == "running" {
				n, _ := strconv.Atoi(fmt.Sprint(v.Config["cores"]))
				return n
			}
		}
		return 0
	}
	if backend == "vsphere" {
		m, err := vcsim.ReadVM(context.Background(), sim.Endpoint, "admin@vsphere.local", "two-backends", "DC0", providers.BackendName(ns, name))
		if err != nil || m == nil {
			t.Fatalf("vcsim VM %s: %v", name, err)
		}
		if m.Runtime.PowerState != "poweredOn" {
			return 0
		}
		return int(m.Config.Hardware.NumCPU)
	}
	d, err := lv(t).DomainLookupByName(ns + "." + name)
	if err != nil {
		t.Fatal(err)
	}
	if active, err := lv(t).DomainIsActive(d); err != nil || active == 0 {
		return 0 // an inactive domain's XML is its definition
	}
	doc, err := lv(t).DomainGetXMLDesc(d, 0) // the running domain's, not its definition
	if err != nil {
		t.Fatal(err)
	}
	x := &libvirtxml.Domain{}
	if err := x.Unmarshal(doc); err != nil {
		t.Fatal(err)
	}
	return int(x.VCPU.Value)
}

// classPinning: editing the class changes neither backend's VM, only says
// ClassOutOfDate (and /resolved shows both shapes); annotating each VM
// banlieue.io/update-class=true applies the new class on its backend.
func classPinning(t *testing.T, api banlieuev1alpha1.VirtualMachineInterface, vms map[string]*v1alpha1.VirtualMachine, kinds map[string]string, backendCPUs func(backend, name string) int) {
	ctx := context.Background()
	class := &v1alpha1.VMClass{}
	if err := c.Get(ctx, client.ObjectKey{Name: "two-class"}, class); err != nil {
		t.Fatal(err)
	}
	class.Spec.Hardware.CPUs = 2
	if err := c.Update(ctx, class); err != nil {
		t.Fatal(err)
	}
	machineCPUs := func(backend string, vm *v1alpha1.VirtualMachine) int64 {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(infrav1.GroupVersion.String())
		u.SetKind(kinds[backend])
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), u); err != nil {
			t.Fatal(err)
		}
		n, _, _ := unstructured.NestedInt64(u.Object, "spec", "cpus")
		return n
	}
	for backend, vm := range vms {
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineClassOutOfDate); cond == nil || cond.Reason != "ClassChanged" {
				return fmt.Errorf("ClassOutOfDate %+v", cond)
			}
			return nil
		})
		if m, b := machineCPUs(backend, vm), backendCPUs(backend, vm.Name); m != 1 || b != 1 {
			t.Errorf("%s after the class edit: machine %d CPUs, backend %d; want both 1", vm.Name, m, b)
		}
		r, err := api.GetResolved(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if r.Spec.CPUs.Value != 1 || r.Current == nil || r.Current.CPUs.Value != 2 || r.Current.ClassGeneration != class.Generation {
			t.Errorf("%s /resolved: pinned %d CPUs, current %+v", vm.Name, r.Spec.CPUs.Value, r.Current)
		}
	}
	for _, vm := range vms {
		patch := client.MergeFrom(vm.DeepCopy())
		metav1.SetMetaDataAnnotation(&vm.ObjectMeta, "banlieue.io/update-class", "true")
		if err := c.Patch(ctx, vm, patch); err != nil {
			t.Fatal(err)
		}
	}
	for backend, vm := range vms {
		eventually(t, 3*time.Minute, func() error {
			if got := backendCPUs(backend, vm.Name); got != 2 {
				return fmt.Errorf("%s: backend runs %d CPUs", vm.Name, got)
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) ||
				meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineClassOutOfDate) {
				return fmt.Errorf("%s: %+v", vm.Name, vm.Status.Conditions)
			}
			if _, still := vm.Annotations["banlieue.io/update-class"]; still {
				return fmt.Errorf("%s still annotated", vm.Name)
			}
			return nil
		})
		if m := machineCPUs(backend, vm); m != 2 {
			t.Errorf("%s: machine %d CPUs after the update, want 2", vm.Name, m)
		}
	}
}

// power reads the backend's power state of the VM named name, as
// PoweredOn / PoweredOff / Suspended, or "" when it does not exist.
func power(t *testing.T, sim *vcsim.Simulator, pve *pvesim.Simulator, backend, name string) func() string {
	return func() string {
		t.Helper()
		if backend == "proxmox" {
			for _, v := range pve.VMs() {
				switch {
				case v.Name != providers.BackendName(ns, name):
				case v.Status == "stopped" && v.Lock == "suspended":
					return "Suspended" // hibernated
				case v.Status == "running":
					return "PoweredOn"
				default:
					return "PoweredOff"
				}
			}
			return ""
		}
		if backend == "vsphere" {
			m, err := vcsim.ReadVM(context.Background(), sim.Endpoint, "admin@vsphere.local", "two-backends", "DC0", providers.BackendName(ns, name))
			if err != nil {
				t.Fatal(err)
			}
			if m == nil {
				return ""
			}
			return map[string]string{"poweredOn": "PoweredOn", "poweredOff": "PoweredOff", "suspended": "Suspended"}[string(m.Runtime.PowerState)]
		}
		d, err := lv(t).DomainLookupByName(ns + "." + name)
		if err != nil {
			return ""
		}
		state, _, err := lv(t).DomainGetState(d, 0)
		if err != nil {
			t.Fatal(err)
		}
		if saved, err := lv(t).DomainHasManagedSaveImage(d, 0); err == nil && saved == 1 && state == 5 {
			return "Suspended" // shut off with a managed save
		}
		return map[int32]string{1: "PoweredOn", 5: "PoweredOff"}[state]
	}
}

// pauseAndResume: a paused VM's edits (a power change, its deletion)
// reach neither its machine nor the backend; resuming carries them out,
// and a VM powered off on purpose is not Ready (PoweredOff).
func pauseAndResume(t *testing.T, vm *v1alpha1.VirtualMachine, kind string, backendPower func() string) {
	ctx := context.Background()
	edit := func(f func(*v1alpha1.VirtualMachine)) {
		t.Helper()
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(vm.DeepCopy())
		f(vm)
		if err := c.Patch(ctx, vm, patch); err != nil {
			t.Fatal(err)
		}
	}
	machine := func() *unstructured.Unstructured {
		t.Helper()
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(infrav1.GroupVersion.String())
		u.SetKind(kind)
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), u); err != nil {
			t.Fatal(err)
		}
		return u
	}
	// paused waits until both the controller (on this generation) and the
	// machine's provider say Paused.
	paused := func() {
		t.Helper()
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePaused); cond == nil ||
				cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != vm.Generation {
				return fmt.Errorf("VM not Paused at generation %d: %+v", vm.Generation, cond)
			}
			conds, _, _ := unstructured.NestedSlice(machine().Object, "status", "conditions")
			for _, x := range conds {
				if m, _ := x.(map[string]interface{}); m["type"] == "Paused" && m["status"] == "True" {
					return nil
				}
			}
			return fmt.Errorf("%s %s not Paused: %v", kind, vm.Name, conds)
		})
	}

	edit(func(vm *v1alpha1.VirtualMachine) {
		vm.Spec.Paused, vm.Spec.DesiredPowerState = true, v1alpha1.PowerStatePoweredOff
	})
	paused()
	if got, _, _ := unstructured.NestedString(machine().Object, "spec", "powerState"); got != "PoweredOn" || backendPower() != "PoweredOn" {
		t.Errorf("%s paused: machine powerState %q, backend %q; want both PoweredOn", vm.Name, got, backendPower())
	}
	edit(func(vm *v1alpha1.VirtualMachine) { vm.Spec.Paused = false })
	eventually(t, 2*time.Minute, func() error {
		if got := backendPower(); got != "PoweredOff" {
			return fmt.Errorf("backend power %q after resuming", got)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady); cond.Status != metav1.ConditionFalse || cond.Reason != "PoweredOff" {
			return fmt.Errorf("Ready %s/%s, want False/PoweredOff", cond.Status, cond.Reason)
		}
		if meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachinePaused) {
			return fmt.Errorf("still Paused")
		}
		return nil
	})
	if _, ok := machine().GetAnnotations()["cluster.x-k8s.io/paused"]; ok {
		t.Errorf("%s %s still annotated paused", kind, vm.Name)
	}

	// Deleting a paused VM waits for it to resume.
	edit(func(vm *v1alpha1.VirtualMachine) { vm.Spec.Paused = true })
	paused()
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	// The controller has seen the deletion once it says the deletion waits.
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePaused); !strings.Contains(cond.Message, "deletion waits") {
			return fmt.Errorf("Paused: %s", cond.Message)
		}
		return nil
	})
	if m := machine(); !m.GetDeletionTimestamp().IsZero() || backendPower() == "" {
		t.Errorf("%s deleted while paused (deletionTimestamp %v, backend %q)", vm.Name, m.GetDeletionTimestamp(), backendPower())
	}
	edit(func(vm *v1alpha1.VirtualMachine) { vm.Spec.Paused = false })
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there: %v", err)
		}
		if p := backendPower(); p != "" {
			return fmt.Errorf("backend still has it (%s)", p)
		}
		return nil
	})
}
