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

package integration

import (
	"context"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestPlacementExplain: virtualmachines/NAME/placement runs the scheduler's
// logic over the server's storage and says why a VM does or does not fit.
func TestPlacementExplain(t *testing.T) {
	s := startServer(t, t.TempDir())
	c := s.Client
	ctx := context.Background()
	provider, class, image := seed(t, ctx, c)
	vms := c.BanlieueV1alpha1().VirtualMachines(ns)
	var vm v1alpha1.VirtualMachine
	readExample(t, "virtualmachine.yaml", &vm)
	if _, err := vms.Create(ctx, &vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	explain := func() v1alpha1.PlacementResult {
		t.Helper()
		p, err := vms.GetPlacement(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p.Result
	}
	// /placement reads the server's caches, which follow a write within
	// moments: after a write, ask until the answer reflects it.
	explainUntil := func(what string, ok func(r v1alpha1.PlacementResult) bool) v1alpha1.PlacementResult {
		t.Helper()
		var r v1alpha1.PlacementResult
		if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
			r = explain()
			return ok(r), nil
		}); err != nil {
			t.Errorf("%s: %+v", what, r)
		}
		return r
	}

	// The Provider has not reported in yet.
	if r := explain(); r.Fits || r.Reason != "NoProviderMatched" || !strings.Contains(r.Message, "not Ready") {
		t.Errorf("before the Provider is ready: %+v", r)
	}

	// Play the vSphere provider: Ready with two failure domains.
	provider.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InventoryWalked", LastTransitionTime: metav1.Now()}}
	provider.Status.FailureDomains = []v1alpha1.FailureDomain{
		{Name: "prod-vsphere-dc1-c1", Datacenter: "DC1", Cluster: "C1", Labels: map[string]string{"name": "prod-vsphere-dc1-c1"}},
		{Name: "prod-vsphere-dc1-c2", Datacenter: "DC1", Cluster: "C2", Labels: map[string]string{"name": "prod-vsphere-dc1-c2"}},
	}
	if _, err := c.BanlieueV1alpha1().Providers(ns).UpdateStatus(ctx, provider, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	explainUntil("before the image is checked", func(r v1alpha1.PlacementResult) bool {
		return r.Reason == "ImageNotReady" && strings.Contains(r.Message, "has not checked it yet")
	})

	image.Status.PerProvider = []v1alpha1.ImageProviderStatus{{Provider: ns + "/prod-vsphere", Ready: true}}
	if _, err := c.BanlieueV1alpha1().VMImages().UpdateStatus(ctx, image, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	r := explainUntil("when everything is ready", func(r v1alpha1.PlacementResult) bool {
		return r.Fits && r.Reason == "Scheduled" && r.Choice != nil && r.Choice.Provider == "prod-vsphere" && r.Choice.FailureDomain == "prod-vsphere-dc1-c1"
	})
	if t.Failed() {
		t.FailNow()
	}
	if r.Choice.Storage[0].Target != "ds-fast-01" || r.Choice.Network[0].Target != "vmnet-prod" {
		t.Errorf("resolutions: %+v", r.Choice)
	}
	if len(r.Providers) != 1 || len(r.Providers[0].FailureDomains) != 2 {
		t.Errorf("per-provider verdicts: %+v", r.Providers)
	}

	// A VM already placed in dc1-c1 moves the choice to the emptier domain.
	other := newVM("neighbour", "db-prod-large", "ubuntu-22.04-cloudinit")
	created, err := vms.Create(ctx, other, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	created.Status.Scheduled = &v1alpha1.ScheduledPlacement{Provider: "prod-vsphere", FailureDomain: "prod-vsphere-dc1-c1"}
	if _, err := vms.UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	explainUntil("with load", func(r v1alpha1.PlacementResult) bool {
		return r.Choice != nil && r.Choice.FailureDomain == "prod-vsphere-dc1-c2" && r.Providers[0].FailureDomains[0].Load == 1
	})

	// A VM whose class the Provider cannot serve: the feature is named.
	var deferred v1alpha1.VMImage
	readExample(t, "vmimage-kairos-deferred-install-tpm.yaml", &deferred)
	if _, err := c.BanlieueV1alpha1().VMImages().Create(ctx, &deferred, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tpm := newVM("tpm-vm", "kairos-tpm-encrypted", "kairos-deferred-tpm")
	tpm.Spec.Placement = vm.Spec.Placement
	var tpmClass v1alpha1.VMClass
	readExample(t, "vmclass-tpm-encrypted.yaml", &tpmClass)
	if _, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, &tpmClass, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := vms.Create(ctx, tpm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var p *v1alpha1.VirtualMachinePlacement
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = vms.GetPlacement(ctx, "tpm-vm", metav1.GetOptions{})
		return err == nil && p.Result.Reason == "TpmUnsupported", err
	}); err != nil || !strings.Contains(p.Result.Providers[0].Message, `"vtpm"`) {
		t.Errorf("tpm: %v %+v", err, p)
	}
	// The same class with an image installed into its template: the
	// image cannot serve it, whatever the Providers offer.
	mismatch := newVM("tpm-immediate", "kairos-tpm-encrypted", "ubuntu-22.04-cloudinit")
	mismatch.Spec.Placement = vm.Spec.Placement
	if _, err := vms.Create(ctx, mismatch, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if p, err = vms.GetPlacement(ctx, "tpm-immediate", metav1.GetOptions{}); err != nil || p.Result.Reason != "ImageClassMismatch" ||
		p.Result.Fits || !strings.Contains(p.Result.Message, "installMode deferred") {
		t.Errorf("tpm with an immediate image: %v %+v", err, p)
	}

	// A thick boot disk: the vSphere backend provisions it (the clone's
	// relocate disk locator), so its Admit lets the VM be placed.
	thick := class.DeepCopy()
	thick.ObjectMeta = metav1.ObjectMeta{Name: "thick-root"}
	thick.Spec.Hardware.Disks[0].Provisioning = v1alpha1.DiskProvisioningThick
	if _, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, thick, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	thickVM := newVM("thick-vm", "thick-root", "ubuntu-22.04-cloudinit")
	thickVM.Spec.Placement = vm.Spec.Placement
	if _, err := vms.Create(ctx, thickVM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = vms.GetPlacement(ctx, "thick-vm", metav1.GetOptions{})
		return err == nil && p.Result.Fits, err
	}); err != nil || p.Result.Reason != "Scheduled" {
		t.Errorf("thick boot disk on vSphere: %v %+v", err, p)
	}

	// More CPUs than the backend's machine CRD takes: refused by field
	// before placing, not by kube-apiserver once the machine is written.
	huge := class.DeepCopy()
	huge.ObjectMeta = metav1.ObjectMeta{Name: "huge"}
	huge.Spec.Hardware.CPUs = 769
	if _, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, huge, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hugeVM := newVM("huge-vm", "huge", "ubuntu-22.04-cloudinit")
	hugeVM.Spec.Placement = vm.Spec.Placement
	if _, err := vms.Create(ctx, hugeVM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = vms.GetPlacement(ctx, "huge-vm", metav1.GetOptions{})
		return err == nil && p.Result.Reason == "BackendUnsupported", err
	}); err != nil || p.Result.Fits || !strings.Contains(p.Result.Providers[0].Message, "spec.cpus") {
		t.Errorf("769 CPUs on vSphere: %v %+v", err, p)
	}

	// An image for an architecture the backend does not run (issue 32):
	// refused by field before anything is placed.
	arm := image.DeepCopy()
	arm.ObjectMeta = metav1.ObjectMeta{Name: "ubuntu-arm64"}
	arm.Spec.Architecture = "aarch64"
	if _, err := c.BanlieueV1alpha1().VMImages().Create(ctx, arm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	armVM := newVM("arm-vm", class.Name, "ubuntu-arm64")
	armVM.Spec.Placement = vm.Spec.Placement
	if _, err := vms.Create(ctx, armVM, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		p, err = vms.GetPlacement(ctx, "arm-vm", metav1.GetOptions{})
		return err == nil && p.Result.Reason == "BackendUnsupported", err
	}); err != nil || p.Result.Fits || !strings.Contains(p.Result.Providers[0].Message, "spec.image.architecture") {
		t.Errorf("an arm64 image on vSphere: %v %+v", err, p)
	}

	// A missing class is a reason, not an error.
	if _, err := vms.Create(ctx, newVM("classless", "no-such-class", "ubuntu-22.04-cloudinit"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	p, err = vms.GetPlacement(ctx, "classless", metav1.GetOptions{})
	if err != nil || p.Result.Reason != "ClassNotFound" {
		t.Errorf("missing class: %v %+v", err, p)
	}
}

// TestPlacementSharedNamespace: the server's --shared-provider-namespace
// decides which namespace's Providers /placement offers every VM: those of
// the configured one, beside the VM's own, and no longer banlieue-system's.
func TestPlacementSharedNamespace(t *testing.T) {
	s := startServer(t, t.TempDir(), "--shared-provider-namespace=ops")
	c := s.Client
	ctx := context.Background()
	inSystem, _, _ := seed(t, ctx, c) // a Provider of banlieue-system
	shared := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: inSystem.Name, Namespace: "ops", Labels: inSystem.Labels}, Spec: inSystem.Spec}
	if _, err := c.BanlieueV1alpha1().Providers("ops").Create(ctx, shared, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var vm v1alpha1.VirtualMachine
	readExample(t, "virtualmachine.yaml", &vm)
	vm.Namespace = "team-a"
	if _, err := c.BanlieueV1alpha1().VirtualMachines("team-a").Create(ctx, &vm, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	want := "ops/" + inSystem.Name
	var got []string
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := c.BanlieueV1alpha1().VirtualMachines("team-a").GetPlacement(ctx, vm.Name, metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		got = nil
		for _, f := range p.Result.Providers {
			got = append(got, f.Provider)
		}
		return len(got) == 1 && got[0] == want, nil
	}); err != nil {
		t.Errorf("candidate Providers of a team-a VM %v, want only %s: %v", got, want, err)
	}
}

// TestPlacementLoadWarmBeforeReady: /placement's scheduling load is
// listed before the server calls itself ready (a readyz check of its own),
// not by the first /placement request.
func TestPlacementLoadWarmBeforeReady(t *testing.T) {
	s := startServer(t, t.TempDir())
	body, err := s.Client.Discovery().RESTClient().Get().AbsPath("/readyz").Param("verbose", "1").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), "[+]banlieue-placement-load ok") || !strings.Contains(string(body), "[+]poststarthook/banlieue-placement-load ok") {
		t.Errorf("/readyz does not wait for the scheduling load:\n%s", body)
	}
}
