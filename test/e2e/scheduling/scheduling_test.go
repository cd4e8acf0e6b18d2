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

package scheduling

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/capispread"
	"github.com/firestoned/banlieue/pkg/devenv/logscan"
)

func kc(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig=" + env.AdminKubeconfig}, args...)...)
	cmd.Dir = root
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("kubectl %v: %v\n%s%s", args, err, out.String(), errOut.String())
	}
	return out.String()
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("not within %s: %v", timeout, last)
	}
}

// scheduledCondition waits until the VM's Scheduled condition has reason.
func waitScheduled(t *testing.T, namespace, name, reason string) *v1alpha1.VirtualMachine {
	t.Helper()
	vm := &v1alpha1.VirtualMachine{}
	eventually(t, time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, vm); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled)
		if cond == nil || cond.Reason != reason {
			return fmt.Errorf("%s/%s Scheduled condition %+v, want reason %s", namespace, name, cond, reason)
		}
		return nil
	})
	return vm
}

// readyProvider plays the vSphere provider: Ready with the given failure domains.
func readyProvider(t *testing.T, name string, labels map[string]string, features []string, fds ...string) {
	t.Helper()
	readyProviderOf(t, "vsphere", name, labels, features, fds...)
}

// readyProviderOf is readyProvider for a Provider of class (vsphere,
// libvirt or proxmox), its connection and targets in that class's shape.
func readyProviderOf(t *testing.T, class, name string, labels map[string]string, features []string, fds ...string) {
	t.Helper()
	ctx := context.Background()
	p := &v1alpha1.Provider{}
	err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p)
	if apierrors.IsNotFound(err) {
		p = &v1alpha1.Provider{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
			Spec: v1alpha1.ProviderSpec{
				ProviderClassRef: v1alpha1.LocalObjectReference{Name: class},
				Connection:       v1alpha1.ProviderConnection{Endpoint: "https://" + name + ".example.com/sdk", CredentialsRef: v1alpha1.LocalObjectReference{Name: "creds"}},
				Capabilities: v1alpha1.ProviderCapabilities{
					StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: name + "-ds"}}},
					NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: name + "-pg"}}},
					Features:       features,
				},
			},
		}
		switch class {
		case "libvirt":
			p.Spec.Connection = v1alpha1.ProviderConnection{Endpoint: "qemu+unix:///system?socket=/run/" + name}
			p.Spec.Capabilities.StorageClasses[0].Target = v1alpha1.StorageTarget{Pool: name + "-pool"}
			p.Spec.Capabilities.NetworkClasses[0].Target = v1alpha1.NetworkTarget{Network: name + "-net"}
		case "proxmox":
			p.Spec.Connection.Endpoint = "https://" + name + ".example.com:8006/api2/json"
			p.Spec.Capabilities.StorageClasses[0].Target = v1alpha1.StorageTarget{Storage: name + "-lvm"}
			p.Spec.Capabilities.NetworkClasses[0].Target = v1alpha1.NetworkTarget{Bridge: "vmbr0"}
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InventoryWalked", LastTransitionTime: metav1.Now()}}
	p.Status.FailureDomains = nil
	for _, fd := range fds {
		p.Status.FailureDomains = append(p.Status.FailureDomains, v1alpha1.FailureDomain{
			Name: fd, Datacenter: "DC-" + fd, Cluster: "C-" + fd, Labels: map[string]string{"name": fd},
		})
	}
	if err := c.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
}

func imageReadyOn(t *testing.T, image string, providers ...string) {
	t.Helper()
	img := &v1alpha1.VMImage{}
	if err := c.Get(context.Background(), client.ObjectKey{Name: image}, img); err != nil {
		t.Fatal(err)
	}
	img.Status.PerProvider = nil
	for _, p := range providers {
		img.Status.PerProvider = append(img.Status.PerProvider, v1alpha1.ImageProviderStatus{Provider: ns + "/" + p, Ready: true})
	}
	if err := c.Status().Update(context.Background(), img); err != nil {
		t.Fatal(err)
	}
}

func TestSeedGuideSchedules(t *testing.T) {
	ctx := context.Background()
	kc(t, "apply", "-f", "artifacts/examples/")

	// Provider not reported in yet, then image not checked yet.
	waitScheduled(t, ns, "db-prod-01", "NoProviderMatched")
	readyProvider(t, "prod-vsphere", nil, nil, "prod-vsphere-dc1-c1", "prod-vsphere-dc1-c2", "prod-vsphere-dc1-c3")
	vm := waitScheduled(t, ns, "db-prod-01", "ImageNotReady")
	if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePlacementValid); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("PlacementValid: %+v", c)
	}
	imageReadyOn(t, "ubuntu-22.04-cloudinit", "prod-vsphere")
	vm = waitScheduled(t, ns, "db-prod-01", "Scheduled")
	s := vm.Status.Scheduled
	if s == nil || s.Provider != "prod-vsphere" || !strings.HasPrefix(s.FailureDomain, "prod-vsphere-dc1-") ||
		s.Storage[0].Target != "ds-fast-01" || s.Network[0].Target != "vmnet-prod" {
		t.Fatalf("status.scheduled = %+v", s)
	}
	out := kc(t, "get", "vm", "db-prod-01", "-n", ns)
	if !strings.Contains(out, "prod-vsphere") {
		t.Errorf("PROVIDER column: %s", out)
	}

	// The VSphereMachines: owned by their VMs, labelled, built from the resolve merge.
	for name, want := range map[string]struct {
		memory int64
		data   int64
		static bool
	}{"db-prod-01": {32768, 500, false}, "db-prod-02": {65536, 2000, true}} {
		vsm := &infrav1.VSphereMachine{}
		eventually(t, time.Minute, func() error { return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vsm) })
		owner := metav1.GetControllerOf(vsm)
		if owner == nil || owner.Kind != "VirtualMachine" || owner.Name != name {
			t.Errorf("%s owner: %+v", name, owner)
		}
		if vsm.Labels["app.kubernetes.io/name"] != "banlieue" {
			t.Errorf("%s labels: %v", name, vsm.Labels)
		}
		sp := vsm.Spec
		if sp.CPUs != 8 || sp.MemoryMiB != want.memory || sp.Disks[1].SizeGiB != want.data || sp.Disks[1].Datastore != "ds-fast-01" ||
			sp.Template != "ubuntu-22.04-cloudinit" || sp.Firmware != "efi-secure" || sp.Network[0].PortGroup != "vmnet-prod" ||
			(sp.Network[0].Static != nil) != want.static || sp.Datacenter == "" || sp.PowerState != "PoweredOn" {
			t.Errorf("%s spec: %+v", name, sp)
		}
	}

	// Status mirroring: the provider's report shows on the VM.
	vsm := &infrav1.VSphereMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-prod-01"}, vsm); err != nil {
		t.Fatal(err)
	}
	vsm.Status.Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
	vsm.Status.Addresses = []infrav1.MachineAddress{{Type: "InternalIP", Address: "192.0.2.44"}}
	vsm.Status.PowerState = "PoweredOn"
	meta.SetStatusCondition(&vsm.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "PoweredOn", Message: "up"})
	if err := c.Status().Update(ctx, vsm); err != nil {
		t.Fatal(err)
	}
	kc(t, "wait", "--for=condition=Ready", "vm/db-prod-01", "-n", ns, "--timeout=60s")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-prod-01"}, vm); err != nil {
		t.Fatal(err)
	}
	if !ptr.Deref(vm.Status.Initialization.Provisioned, false) || len(vm.Status.Addresses) != 1 || vm.Status.PowerState != "PoweredOn" ||
		vm.Status.InfrastructureRef == nil || vm.Status.InfrastructureRef.Kind != "VSphereMachine" ||
		!meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineInfrastructureReady) {
		t.Errorf("mirrored status: %+v", vm.Status)
	}

	// Power-state changes flow to the VSphereMachine.
	kc(t, "patch", "vm", "db-prod-01", "-n", ns, "--type=merge", "-p", `{"spec":{"desiredPowerState":"PoweredOff"}}`)
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vsm), vsm); err != nil {
			return err
		}
		if vsm.Spec.PowerState != "PoweredOff" {
			return fmt.Errorf("power state %s", vsm.Spec.PowerState)
		}
		return nil
	})

	// Deleting a VM deletes its VSphereMachine first.
	kc(t, "delete", "vm", "db-prod-02", "-n", ns, "--wait=true", "--timeout=60s")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "db-prod-02"}, &infrav1.VSphereMachine{}); !apierrors.IsNotFound(err) {
		t.Errorf("VSphereMachine outlived its VM: %v", err)
	}
}

func TestTroubleshootingReasons(t *testing.T) {
	ctx := context.Background()
	kc(t, "apply", "-f", "artifacts/examples/vmclass.yaml", "-f", "artifacts/examples/vmimage.yaml", "-f", "artifacts/examples/vmclass-tpm-encrypted.yaml",
		"-f", "artifacts/examples/vmimage-kairos-deferred-install-tpm.yaml")
	readyProvider(t, "prod-vsphere", nil, nil, "prod-vsphere-dc1-c1", "prod-vsphere-dc1-c2", "prod-vsphere-dc1-c3")
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod-vsphere"}, &v1alpha1.Provider{}); err != nil {
		t.Fatal(err)
	}
	imageReadyOn(t, "ubuntu-22.04-cloudinit", "prod-vsphere")
	imageReadyOn(t, "kairos-deferred-tpm", "prod-vsphere")
	for _, cl := range []*v1alpha1.VMClass{
		{ObjectMeta: metav1.ObjectMeta{Name: "platinum-disks"}, Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 1024, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "platinum"}}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "needs-gpu"}, Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 1024}, Features: []string{"gpuPassthrough"}}},
	} {
		if err := c.Create(ctx, cl); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	newVM := func(name, class, image string, selector map[string]string) {
		vm := &v1alpha1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
			Spec: v1alpha1.VirtualMachineSpec{
				ClassRef: v1alpha1.LocalObjectReference{Name: class}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
			},
		}
		if selector != nil {
			vm.Spec.Placement = &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: selector}}
		}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	cases := []struct {
		vm, class, image string
		selector         map[string]string
		reason, explain  string
	}{
		{"r-labels", "db-prod-large", "ubuntu-22.04-cloudinit", map[string]string{"dc": "dc9"}, "NoProviderMatched", "do not match providerSelector"},
		{"r-storage", "platinum-disks", "ubuntu-22.04-cloudinit", nil, "NoProviderMatched", `storage class "platinum"`},
		{"r-feature", "needs-gpu", "ubuntu-22.04-cloudinit", nil, "NoProviderMatched", `feature "gpuPassthrough"`},
		{"r-tpm", "kairos-tpm-encrypted", "kairos-deferred-tpm", nil, "TpmUnsupported", `"vtpm"`},
		{"r-mismatch", "kairos-tpm-encrypted", "ubuntu-22.04-cloudinit", nil, "ImageClassMismatch", "template.installMode deferred"},
		{"r-class", "no-such-class", "ubuntu-22.04-cloudinit", nil, "ClassNotFound", "VMClass no-such-class does not exist"},
		{"r-image", "db-prod-large", "no-such-image", nil, "ImageNotFound", "VMImage no-such-image does not exist"},
	}
	for _, tc := range cases {
		newVM(tc.vm, tc.class, tc.image, tc.selector)
	}
	for _, tc := range cases {
		t.Run(tc.reason+"/"+tc.vm, func(t *testing.T) {
			vm := waitScheduled(t, ns, tc.vm, tc.reason)
			if tc.reason == "ClassNotFound" || tc.reason == "ImageNotFound" || tc.reason == "ImageClassMismatch" {
				if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachinePlacementValid); c == nil || c.Status != metav1.ConditionFalse || c.Reason != tc.reason {
					t.Errorf("PlacementValid: %+v", c)
				}
			}
			raw := kc(t, "get", "--raw", "/apis/banlieue.io/v1alpha1/namespaces/"+ns+"/virtualmachines/"+tc.vm+"/placement")
			if !strings.Contains(raw, `"reason":"`+tc.reason+`"`) || !strings.Contains(raw, strings.ReplaceAll(tc.explain, `"`, `\"`)) {
				t.Errorf("placement explain lacks %s / %s:\n%s", tc.reason, tc.explain, raw)
			}
		})
	}
	// An event tells the user too.
	events := kc(t, "get", "events.events.k8s.io", "-n", ns, "--field-selector=regarding.name=r-tpm", "-o", "jsonpath={.items[*].reason}")
	if !strings.Contains(events, "TpmUnsupported") {
		t.Errorf("events: %q", events)
	}
	// Advertising vtpm schedules the TPM VM.
	readyProvider(t, "prod-vsphere", nil, nil, "prod-vsphere-dc1-c1")
	p := &v1alpha1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "prod-vsphere"}, p); err != nil {
		t.Fatal(err)
	}
	p.Spec.Capabilities.Features = append(p.Spec.Capabilities.Features, "vtpm")
	if err := c.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitScheduled(t, ns, "r-tpm", "Scheduled")
}

// TestSpreadAndCleanup: 100 VMs over 2 Providers x 3 failure domains spread
// evenly with the controller Deployment's replicas running; one
// VSphereMachine per VM; deleting the namespace removes everything.
func TestSpreadAndCleanup(t *testing.T) {
	ctx := context.Background()
	kc(t, "apply", "-f", "artifacts/examples/vmclass.yaml", "-f", "artifacts/examples/vmimage.yaml")
	labels := map[string]string{"pool": "spread"}
	readyProvider(t, "spread-a", labels, []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"}, "a-1", "a-2", "a-3")
	readyProvider(t, "spread-b", labels, []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"}, "b-1", "b-2", "b-3")
	imageReadyOn(t, "ubuntu-22.04-cloudinit", "prod-vsphere", "spread-a", "spread-b")
	space := "spread"
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: space}}); err != nil {
		t.Fatal(err)
	}
	const n = 100
	for i := 0; i < n; i++ {
		vm := &v1alpha1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vm-%03d", i), Namespace: space},
			Spec: v1alpha1.VirtualMachineSpec{
				ClassRef: v1alpha1.LocalObjectReference{Name: "db-prod-large"}, ImageRef: v1alpha1.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
				Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: labels}},
			},
		}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	var vms v1alpha1.VirtualMachineList
	eventually(t, 3*time.Minute, func() error {
		if err := c.List(ctx, &vms, client.InNamespace(space)); err != nil {
			return err
		}
		scheduled := 0
		for _, vm := range vms.Items {
			if vm.Status.Scheduled != nil {
				scheduled++
			}
		}
		if scheduled != n {
			return fmt.Errorf("%d of %d scheduled", scheduled, n)
		}
		return nil
	})
	load := map[string]int{}
	for _, vm := range vms.Items {
		load[vm.Status.Scheduled.Provider+"/"+vm.Status.Scheduled.FailureDomain]++
	}
	lo, hi := n, 0
	for _, v := range load {
		lo, hi = min(lo, v), max(hi, v)
	}
	if len(load) != 6 || hi-lo > 1 {
		t.Errorf("spread %v", load)
	}
	eventually(t, 2*time.Minute, func() error {
		var vsms infrav1.VSphereMachineList
		if err := c.List(ctx, &vsms, client.InNamespace(space)); err != nil {
			return err
		}
		owners := map[string]int{}
		for _, m := range vsms.Items {
			if o := metav1.GetControllerOf(&m); o != nil {
				owners[o.Name]++
			}
		}
		if len(vsms.Items) != n || len(owners) != n {
			return fmt.Errorf("%d VSphereMachines for %d VMs (%d distinct owners)", len(vsms.Items), n, len(owners))
		}
		return nil
	})

	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: space}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		err := c.Get(ctx, client.ObjectKey{Name: space}, &corev1.Namespace{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		var left v1alpha1.VirtualMachineList
		_ = c.List(ctx, &left, client.InNamespace(space))
		return fmt.Errorf("namespace still there (%d VMs left): %v", len(left.Items), err)
	})
	// The namespace going away (its VSphereMachines deleted before their
	// VMs, maybe) is no error of the controller's: it recreates nothing
	// and logs no reconcile errors for it.
	if lines := controllerErrors(t, "unable to create new content in namespace "+space); len(lines) > 0 {
		t.Errorf("%d reconcile errors while the namespace was deleted, first: %s", len(lines), lines[0])
	}
}

// controllerErrors returns the "Reconciler error" lines that contain
// substr in the controller pods' logs (every container run so far).
func controllerErrors(t *testing.T, substr string) []string {
	t.Helper()
	lines, err := logscan.ReconcileErrors(env.PodLogs(), "controller-*", substr)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestInfraClusterAggregation: every backend's InfraCluster, served by the
// one generic controller, follows the Ready Providers of its own class that
// its selector picks, as they come and go; another class's Providers with
// the same labels are left out.
func TestInfraClusterAggregation(t *testing.T) {
	for _, tc := range []struct {
		class string
		new   func(name string) infrav1.Cluster
	}{
		{"vsphere", func(name string) infrav1.Cluster {
			return &infrav1.VSphereCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		}},
		{"libvirt", func(name string) infrav1.Cluster {
			return &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		}},
		{"proxmox", func(name string) infrav1.Cluster {
			return &infrav1.ProxmoxCluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
		}},
	} {
		t.Run(tc.class, func(t *testing.T) {
			ctx := context.Background()
			sel := map[string]string{"aggregate": "yes"}
			p1, p2 := "agg-"+tc.class+"-1", "agg-"+tc.class+"-2"
			readyProviderOf(t, tc.class, p1, sel, nil, p1+"-a", p1+"-b")
			ic := tc.new("agg-" + tc.class)
			ic.CommonSpec().ProviderSelector = &metav1.LabelSelector{MatchLabels: sel}
			if err := c.Create(ctx, ic); err != nil {
				t.Fatal(err)
			}
			expect := func(want string) {
				t.Helper()
				eventually(t, time.Minute, func() error {
					if err := c.Get(ctx, client.ObjectKeyFromObject(ic), ic); err != nil {
						return err
					}
					st := ic.CommonStatus()
					var names []string
					for _, fd := range st.FailureDomains {
						names = append(names, fd.Name)
					}
					if strings.Join(names, ",") != want {
						return fmt.Errorf("failure domains %v, want %s", names, want)
					}
					if st.Initialization == nil || !ptr.Deref(st.Initialization.Provisioned, false) {
						return fmt.Errorf("not provisioned")
					}
					if !meta.IsStatusConditionTrue(st.Conditions, infrav1.ReadyCondition) {
						return fmt.Errorf("not Ready: %+v", st.Conditions)
					}
					return nil
				})
			}
			// Each subtest's Providers carry the same labels: a cluster
			// aggregates its own class's only.
			expect(p1 + "-a," + p1 + "-b")
			readyProviderOf(t, tc.class, p2, sel, nil, p2+"-a")
			expect(p1 + "-a," + p1 + "-b," + p2 + "-a")
			if err := c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: p1, Namespace: ns}}); err != nil {
				t.Fatal(err)
			}
			expect(p2 + "-a")
			if fd := ic.CommonStatus().FailureDomains[0]; fd.Attributes["provider"] != p2 {
				t.Errorf("attributes %v", fd.Attributes)
			}
		})
	}
}

// TestUnplacedMachineReported: an infrastructure machine with no failure
// domain, no Provider annotation and no Cluster API Machine is served by
// no provider; the core says so on its Ready condition, naming
// spec.failureDomain, instead of leaving it silent.
func TestUnplacedMachineReported(t *testing.T) {
	ctx := context.Background()
	lm := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "unplaced", Namespace: ns},
		Spec: infrav1.LibvirtMachineSpec{Image: "default/guest.qcow2", CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 1, MemoryMiB: 256}}}
	if err := c.Create(ctx, lm); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(ctx, lm) }()
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(lm), lm); err != nil {
			return err
		}
		ready := meta.FindStatusCondition(lm.Status.Conditions, infrav1.ReadyCondition)
		if ready == nil || ready.Status != metav1.ConditionFalse || ready.Reason != capispread.ReasonFailureDomainRequired ||
			!strings.Contains(ready.Message, "spec.failureDomain") {
			return fmt.Errorf("Ready %+v", ready)
		}
		return nil
	})
}
