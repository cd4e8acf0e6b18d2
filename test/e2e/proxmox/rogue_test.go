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
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// TestRogueProxmoxMachines (issue 31): ProxmoxMachines written by hand
// that step outside what their Provider publishes. A VLAN with no bridge
// was accepted and powered on, the template's bridge tagged with it; now
// it is refused before any Proxmox call (BridgeNotPublished on
// spec.network[0].bridge, no finalizer, no clone), as is a VLAN the
// Provider does not publish on its bridge. A size beyond the CRD's bound
// is refused by kube-apiserver. A built machine's failureDomain cannot be
// edited any more (its delete would look on the wrong node), and deleting
// it leaves no VM.
func TestRogueProxmoxMachines(t *testing.T) {
	ctx := context.Background()
	p := proxmoxProvider(t, "rogue-proxmox", "proxmox-token", nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitProvider(t, "rogue-proxmox", "InventoryWalked")
	ensureImage(t)
	if len(p.Status.FailureDomains) < 2 {
		t.Fatalf("the simulator's Provider has failure domains %+v, the test wants 2", p.Status.FailureDomains)
	}
	fd, other := p.Status.FailureDomains[0].Name, p.Status.FailureDomains[1].Name
	machine := func(name string, nic infrav1.ProxmoxNetworkDevice) *infrav1.ProxmoxMachine {
		return &infrav1.ProxmoxMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Annotations: map[string]string{infrav1.ProviderAnnotation: ns + "/rogue-proxmox"}},
			Spec: infrav1.ProxmoxMachineSpec{Template: "debian-12-cloud",
				CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: fd, CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOn},
				Network:           []infrav1.ProxmoxNetworkDevice{nic}},
		}
	}
	clones := sim.Requests()["POST qemu clone"]
	rogue := []*infrav1.ProxmoxMachine{
		machine("rogue-vlan-no-bridge", infrav1.ProxmoxNetworkDevice{Name: "eth0", VLAN: 99, DHCP4: true}),
		machine("rogue-vlan-unpublished", infrav1.ProxmoxNetworkDevice{Name: "eth0", Bridge: "vmbr1", VLAN: 99, DHCP4: true}),
	}
	for _, m := range rogue {
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for _, m := range rogue {
		got := waitReady(t, m.Name, "BridgeNotPublished")
		if cond := meta.FindStatusCondition(got.Status.Conditions, infrav1.ReadyCondition); !strings.Contains(cond.Message, "spec.network[0].bridge") {
			t.Errorf("%s: the refusal does not name the field: %q", m.Name, cond.Message)
		}
		if len(got.Finalizers) > 0 {
			t.Errorf("%s: a refused machine holds finalizers %v", m.Name, got.Finalizers)
		}
		if vms := vmsNamed(providers.BackendName(ns, m.Name)); len(vms) > 0 {
			t.Errorf("%s: the simulator holds its VM %+v", m.Name, vms)
		}
	}
	if n := sim.Requests()["POST qemu clone"] - clones; n != 0 {
		t.Errorf("%d clones for refused machines", n)
	}

	// What the backend cannot build, asked of the machine as the
	// scheduler asks it of VMs: Ignition user data would sit unread on a
	// NoCloud drive.
	ignition := machine("rogue-ignition", infrav1.ProxmoxNetworkDevice{Name: "eth0", Bridge: "vmbr1", VLAN: 20, DHCP4: true})
	ignition.Spec.UserDataFormat = infrav1.UserDataIgnition
	clones = sim.Requests()["POST qemu clone"]
	if err := c.Create(ctx, ignition); err != nil {
		t.Fatal(err)
	}
	got := waitReady(t, ignition.Name, "BackendUnsupported")
	if cond := meta.FindStatusCondition(got.Status.Conditions, infrav1.ReadyCondition); !strings.Contains(cond.Message, "spec.userDataFormat") {
		t.Errorf("Ignition on Proxmox: the refusal does not name the field: %q", cond.Message)
	}
	if n := sim.Requests()["POST qemu clone"] - clones; n != 0 {
		t.Errorf("%d clones for an Ignition machine", n)
	}
	rogue = append(rogue, ignition)

	huge := machine("rogue-huge", infrav1.ProxmoxNetworkDevice{Name: "eth0", Bridge: "vmbr1", VLAN: 20, DHCP4: true})
	huge.Spec.MemoryMiB = 1 << 40
	if err := c.Create(ctx, huge); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.memoryMiB") {
		t.Errorf("a machine of 2^40 MiB: %v, want Invalid on spec.memoryMiB", err)
	}

	built := machine("rogue-moved", infrav1.ProxmoxNetworkDevice{Name: "eth0", Bridge: "vmbr1", VLAN: 20, DHCP4: true})
	if err := c.Create(ctx, built); err != nil {
		t.Fatal(err)
	}
	waitReady(t, built.Name, "PoweredOn")
	if err := c.Get(ctx, client.ObjectKeyFromObject(built), built); err != nil || built.Spec.ProviderID == "" {
		t.Fatalf("built machine: %v, providerID %q", err, built.Spec.ProviderID)
	}
	// A merge patch, without the resourceVersion: the provider may write
	// the machine meanwhile, and the answer must be the CRD's rule.
	moved := built.DeepCopy()
	moved.Spec.FailureDomain = other
	if err := c.Patch(ctx, moved, client.MergeFrom(built)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("moving a built machine to %s: %v, want Invalid: immutable", other, err)
	}
	for _, m := range append(rogue, built) {
		if err := c.Delete(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, func() error {
		for _, m := range append(rogue, built) {
			if err := c.Get(ctx, client.ObjectKeyFromObject(m), &infrav1.ProxmoxMachine{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there (%v)", m.Name, err)
			}
		}
		return nil
	})
	if vms := vmsNamed(providers.BackendName(ns, built.Name)); len(vms) > 0 {
		t.Errorf("the built machine's VM outlived it: %+v", vms)
	}
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
}

// waitReady waits for the ProxmoxMachine's Ready condition to have reason.
func waitReady(t *testing.T, name, reason string) *infrav1.ProxmoxMachine {
	t.Helper()
	m := &infrav1.ProxmoxMachine{}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(m.Status.Conditions, infrav1.ReadyCondition); cond == nil || cond.Reason != reason {
			return fmt.Errorf("%s Ready = %+v, want reason %s", name, cond, reason)
		}
		return nil
	})
	return m
}

// TestLocationEditedDuringFirstBuild (issue 31): the provider records
// where it builds a VM (status.location) and holds the machine with its
// planned providerID before its first Proxmox call, so the CRD's rule
// holds from then on: a failureDomain edited while that first clone runs
// is refused by the API server, naming the field; the VM is finished on
// the recorded node, and deleting the machine destroys it there.
func TestLocationEditedDuringFirstBuild(t *testing.T) {
	ctx := context.Background()
	p := proxmoxProvider(t, "moved-proxmox", "proxmox-token", nil)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitProvider(t, "moved-proxmox", "InventoryWalked")
	ensureImage(t)
	if len(p.Status.FailureDomains) < 2 {
		t.Fatalf("the simulator's Provider has failure domains %+v, the test wants 2", p.Status.FailureDomains)
	}
	fd, other := p.Status.FailureDomains[0], p.Status.FailureDomains[1]
	name := providers.BackendName(ns, "moved-0")
	before := len(vmsNamed(name))
	// A long clone: the first build is held while the spec is edited.
	sim.SetTaskDelay(6 * time.Second)
	defer sim.SetTaskDelay(100 * time.Millisecond)
	m := &infrav1.ProxmoxMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "moved-0", Namespace: ns, Annotations: map[string]string{infrav1.ProviderAnnotation: ns + "/moved-proxmox"}},
		Spec: infrav1.ProxmoxMachineSpec{Template: "debian-12-cloud",
			CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: fd.Name, CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOn}},
	}
	if err := c.Create(ctx, m); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), m); err != nil {
			return err
		}
		if m.Status.Location == nil || sim.RunningTasks("qmclone") == 0 {
			return fmt.Errorf("no clone running yet for a recorded location (status.location %+v)", m.Status.Location)
		}
		return nil
	})
	if want := "proxmox://" + string(m.UID); m.Spec.ProviderID != want {
		t.Fatalf("providerID %q while the first clone runs, want the planned %q", m.Spec.ProviderID, want)
	}
	if got := m.Status.Location; got.FailureDomain != fd.Name || got.Host != fd.Host {
		t.Errorf("status.location %+v, want failure domain %s on %s", got, fd.Name, fd.Host)
	}
	moved := m.DeepCopy()
	moved.Spec.FailureDomain = other.Name
	err := c.Patch(ctx, moved, client.MergeFrom(m))
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "failureDomain") {
		t.Fatalf("editing the failure domain during the first build: %v, want it refused naming failureDomain", err)
	}
	sim.SetTaskDelay(100 * time.Millisecond)
	got := waitReady(t, m.Name, "PoweredOn")
	if got.Spec.FailureDomain != fd.Name || got.Status.FailureDomain != fd.Name || got.Status.Location.FailureDomain != fd.Name {
		t.Errorf("status failureDomain %q, location %+v: want the recorded %s", got.Status.FailureDomain, got.Status.Location, fd.Name)
	}
	vms := vmsNamed(name)
	if len(vms) != before+1 {
		t.Fatalf("%d VMs named %s after the build, want %d: %+v", len(vms), name, before+1, vms)
	}
	if vms[0].Node != fd.Host {
		t.Errorf("the VM was built on %s, want the recorded %s", vms[0].Node, fd.Host)
	}
	if err := c.Delete(ctx, m); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(m), &infrav1.ProxmoxMachine{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%v)", m.Name, err)
		}
		return nil
	})
	if vms := vmsNamed(name); len(vms) != before {
		t.Errorf("the machine's VM outlived it: %+v", vms)
	}
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
}
