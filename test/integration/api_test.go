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
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	applyv1alpha1 "github.com/firestoned/banlieue/pkg/generated/applyconfiguration/banlieue/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
)

const ns = "banlieue-system"

// seed creates the seed guide's objects and returns them as stored.
func seed(t *testing.T, ctx context.Context, c clientset.Interface) (*v1alpha1.Provider, *v1alpha1.VMClass, *v1alpha1.VMImage) {
	t.Helper()
	var (
		p   v1alpha1.Provider
		cl  v1alpha1.VMClass
		img v1alpha1.VMImage
	)
	readExample(t, "provider.yaml", &p)
	readExample(t, "vmclass.yaml", &cl)
	readExample(t, "vmimage.yaml", &img)
	gotP, err := c.BanlieueV1alpha1().Providers(ns).Create(ctx, &p, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create provider: %v", err)
	}
	gotC, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, &cl, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create class: %v", err)
	}
	gotI, err := c.BanlieueV1alpha1().VMImages().Create(ctx, &img, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create image: %v", err)
	}
	return gotP, gotC, gotI
}

func TestAPI(t *testing.T) {
	s := startServer(t, t.TempDir())
	c := s.Client
	ctx := context.Background()
	provider, class, image := seed(t, ctx, c)

	t.Run("examples are accepted with defaults applied", func(t *testing.T) {
		if class.Spec.Hardware.Disks[0].Provisioning != v1alpha1.DiskProvisioningThin {
			t.Errorf("disk provisioning = %q, want thin", class.Spec.Hardware.Disks[0].Provisioning)
		}
		if class.Generation != 1 || image.Generation != 1 || provider.Generation != 1 {
			t.Errorf("generations = %d/%d/%d, want 1", class.Generation, image.Generation, provider.Generation)
		}
		for _, f := range []string{"vmclass-tpm-encrypted.yaml", "vmimage-kairos-deferred-install-tpm.yaml"} {
			if strings.HasPrefix(f, "vmclass") {
				var o v1alpha1.VMClass
				readExample(t, f, &o)
				if _, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, &o, metav1.CreateOptions{}); err != nil {
					t.Errorf("%s: %v", f, err)
				}
			} else {
				var o v1alpha1.VMImage
				readExample(t, f, &o)
				got, err := c.BanlieueV1alpha1().VMImages().Create(ctx, &o, metav1.CreateOptions{})
				if err != nil {
					t.Errorf("%s: %v", f, err)
				} else if got.Spec.Template.InstallMode != v1alpha1.InstallModeDeferred {
					t.Errorf("installMode = %q", got.Spec.Template.InstallMode)
				}
			}
		}
		var vm v1alpha1.VirtualMachine
		readExample(t, "virtualmachine.yaml", &vm)
		got, err := c.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, &vm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create vm: %v", err)
		}
		if got.Spec.DesiredPowerState != v1alpha1.PowerStatePoweredOn || got.Generation != 1 {
			t.Errorf("vm: power %q generation %d", got.Spec.DesiredPowerState, got.Generation)
		}
	})

	t.Run("override example defaults and resolves", func(t *testing.T) {
		var vm v1alpha1.VirtualMachine
		readExample(t, "virtualmachine-overrides.yaml", &vm)
		got, err := c.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, &vm, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("create: %v", err)
		}
		if got.Spec.UserData.SecretRef.Key != "user-data" {
			t.Errorf("userData key = %q, want user-data", got.Spec.UserData.SecretRef.Key)
		}
		if got.Spec.HardwareOverride.CPUs != nil {
			t.Errorf("cpus override was filled in: %v", *got.Spec.HardwareOverride.CPUs)
		}
		r, err := c.BanlieueV1alpha1().VirtualMachines(ns).GetResolved(ctx, "db-prod-02", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("resolved: %v", err)
		}
		if r.Kind != "ResolvedVirtualMachine" && r.Kind != "" {
			t.Errorf("kind = %q", r.Kind)
		}
		want := []struct {
			what string
			got  interface{}
			want interface{}
		}{
			{"cpus", r.Spec.CPUs, v1alpha1.ResolvedInt32{Value: 8, From: v1alpha1.ProvenanceClass}},
			{"memory", r.Spec.MemoryMiB, v1alpha1.ResolvedInt64{Value: 65536, From: v1alpha1.ProvenanceOverride}},
			{"root", r.Spec.Disks[0].SizeGiB, v1alpha1.ResolvedInt64{Value: 80, From: v1alpha1.ProvenanceClass}},
			{"data", r.Spec.Disks[1].SizeGiB, v1alpha1.ResolvedInt64{Value: 2000, From: v1alpha1.ProvenanceOverride}},
			{"data provisioning", r.Spec.Disks[1].Provisioning, v1alpha1.DiskProvisioningEagerZeroed},
			{"eth0 mode", r.Spec.Interfaces[0].Mode, v1alpha1.IPAMStatic},
			{"eth0 from", r.Spec.Interfaces[0].From, v1alpha1.ProvenanceOverride},
			{"eth0 address", r.Spec.Interfaces[0].Static.Address, "192.0.2.90"},
			{"firmware", r.Spec.Firmware, v1alpha1.FirmwareEFISecure},
			{"image source", r.Spec.Image.Sources[0].Ref, "ubuntu-22.04-cloudinit"},
			{"power", r.Spec.PowerState, v1alpha1.PowerStatePoweredOn},
		}
		for _, w := range want {
			if fmt.Sprint(w.got) != fmt.Sprint(w.want) {
				t.Errorf("%s = %v, want %v", w.what, w.got, w.want)
			}
		}
	})

	t.Run("resolved names a missing class", func(t *testing.T) {
		vm := newVM("orphan", "no-such-class", "ubuntu-22.04-cloudinit")
		if _, err := c.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		_, err := c.BanlieueV1alpha1().VirtualMachines(ns).GetResolved(ctx, "orphan", metav1.GetOptions{})
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), `vmclasses.banlieue.io "no-such-class" not found`) {
			t.Errorf("err = %v, want NotFound naming the class", err)
		}
	})

	t.Run("admission warns on missing references", func(t *testing.T) {
		cfg := restclient.CopyConfig(s.Config)
		handler := &collectWarnings{}
		cfg.WarningHandler = handler
		wc := clientset.NewForConfigOrDie(cfg)
		if _, err := wc.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, newVM("early", "later-class", "later-image"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		joined := strings.Join(handler.warnings, "\n")
		if !strings.Contains(joined, `spec.classRef.name: VMClass "later-class" does not exist yet`) ||
			!strings.Contains(joined, `spec.imageRef.name: VMImage "later-image" does not exist yet`) {
			t.Errorf("warnings = %q", handler.warnings)
		}
	})

	t.Run("admission rejects overrides absent from the class", func(t *testing.T) {
		vm := newVM("bad-override", "db-prod-large", "ubuntu-22.04-cloudinit")
		vm.Spec.HardwareOverride = &v1alpha1.HardwareOverride{DiskOverrides: []v1alpha1.DiskOverride{{Name: "scratch", SizeGiB: ptr.To[int64](10)}}}
		vm.Spec.NetworkOverrides = []v1alpha1.NetworkOverride{{Name: "eth9", Static: &v1alpha1.StaticIPConfig{Address: "10.0.0.2/24"}}}
		_, err := c.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
		assertInvalid(t, err, "spec.hardwareOverride.diskOverrides[0].name", "spec.networkOverrides[0].name")
		assertAbsent(t, c, "bad-override")
	})

	t.Run("invalid object is 422 naming the field and not stored", func(t *testing.T) {
		vm := newVM("bad-power", "db-prod-large", "ubuntu-22.04-cloudinit")
		vm.Spec.DesiredPowerState = "Hibernating"
		vm.Spec.HardwareOverride = &v1alpha1.HardwareOverride{CPUs: ptr.To[int32](0)}
		_, err := c.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
		var status apierrors.APIStatus
		if !asStatus(err, &status) || status.Status().Code != http.StatusUnprocessableEntity {
			t.Fatalf("err = %v, want 422", err)
		}
		assertInvalid(t, err, "spec.desiredPowerState", "spec.hardwareOverride.cpus")
		assertAbsent(t, c, "bad-power")
	})

	t.Run("CIDR static address is split by defaulting", func(t *testing.T) {
		vm := newVM("cidr", "db-prod-large", "ubuntu-22.04-cloudinit")
		vm.Spec.NetworkOverrides = []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{Address: "192.0.2.90/24", Gateway: "192.0.2.1"}}, {Name: "empty"}}
		vm.Spec.HardwareOverride = &v1alpha1.HardwareOverride{}
		got, err := c.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(got.Spec.NetworkOverrides) != 1 || got.Spec.NetworkOverrides[0].Static.Address != "192.0.2.90" || *got.Spec.NetworkOverrides[0].Static.Prefix != 24 {
			t.Errorf("networkOverrides = %+v", got.Spec.NetworkOverrides)
		}
		if got.Spec.HardwareOverride != nil {
			t.Errorf("empty hardwareOverride kept: %+v", got.Spec.HardwareOverride)
		}
	})

	t.Run("status and spec endpoints do not overwrite each other", func(t *testing.T) {
		vms := c.BanlieueV1alpha1().VirtualMachines(ns)
		vm, err := vms.Get(ctx, "db-prod-01", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// A status write that also tries to change spec: spec must not change.
		vm.Status.PowerState = v1alpha1.PowerStatePoweredOn
		vm.Status.ObservedGeneration = vm.Generation
		vm.Status.Scheduled = &v1alpha1.ScheduledPlacement{Provider: "prod-vsphere", FailureDomain: "fd-a"}
		meta.SetStatusCondition(&vm.Status.Conditions, metav1.Condition{Type: v1alpha1.VirtualMachineScheduled, Status: metav1.ConditionTrue, Reason: "Scheduled"})
		vm.Spec.DesiredPowerState = v1alpha1.PowerStatePoweredOff
		after, err := vms.UpdateStatus(ctx, vm, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if after.Spec.DesiredPowerState != v1alpha1.PowerStatePoweredOn {
			t.Errorf("status update changed spec: %q", after.Spec.DesiredPowerState)
		}
		if after.Generation != 1 {
			t.Errorf("status update bumped generation to %d", after.Generation)
		}
		// A spec write that also tries to clear status: status must stay.
		after.Status = v1alpha1.VirtualMachineStatus{}
		after.Spec.DesiredPowerState = v1alpha1.PowerStateSuspended
		updated, err := vms.Update(ctx, after, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if updated.Status.PowerState != v1alpha1.PowerStatePoweredOn || updated.Status.Scheduled == nil {
			t.Errorf("spec update changed status: %+v", updated.Status)
		}
		if updated.Generation != 2 || updated.Status.ObservedGeneration != 1 {
			t.Errorf("generation %d observedGeneration %d, want 2 and 1", updated.Generation, updated.Status.ObservedGeneration)
		}
		// A metadata-only change does not bump generation.
		updated.Labels["tier"] = "gold"
		relabelled, err := vms.Update(ctx, updated, metav1.UpdateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if relabelled.Generation != 2 {
			t.Errorf("label change bumped generation to %d", relabelled.Generation)
		}
		// Once scheduled, network overrides are frozen (placement may
		// change: that is a migration).
		relabelled.Spec.NetworkOverrides = []v1alpha1.NetworkOverride{{Name: "eth0", DHCP: true}}
		_, err = vms.Update(ctx, relabelled, metav1.UpdateOptions{})
		assertInvalid(t, err, "spec.networkOverrides")
	})

	t.Run("list with label and field selectors", func(t *testing.T) {
		vms := c.BanlieueV1alpha1().VirtualMachines(ns)
		l, err := vms.List(ctx, metav1.ListOptions{LabelSelector: "app=db-prod"})
		if err != nil {
			t.Fatal(err)
		}
		if names(l.Items) != "db-prod-01,db-prod-02" {
			t.Errorf("label selector: %s", names(l.Items))
		}
		for sel, want := range map[string]string{
			"spec.classRef.name=no-such-class":                       "orphan",
			"spec.imageRef.name=later-image":                         "early",
			"status.scheduled.provider=prod-vsphere":                 "db-prod-01",
			"metadata.name=cidr":                                     "cidr",
			"spec.classRef.name!=db-prod-large,metadata.name!=early": "orphan",
		} {
			l, err := vms.List(ctx, metav1.ListOptions{FieldSelector: sel})
			if err != nil {
				t.Errorf("%s: %v", sel, err)
				continue
			}
			if names(l.Items) != want {
				t.Errorf("%s: got %s, want %s", sel, names(l.Items), want)
			}
		}
		pl, err := c.BanlieueV1alpha1().Providers(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.providerClassRef.name=vsphere", LabelSelector: "env=prod"})
		if err != nil || len(pl.Items) != 1 {
			t.Errorf("providers by class: %v %v", pl, err)
		}
		if _, err := vms.List(ctx, metav1.ListOptions{FieldSelector: "spec.hardwareOverride.cpus=3"}); !apierrors.IsBadRequest(err) {
			t.Errorf("unsupported field selector: err = %v, want BadRequest", err)
		}
		cl, err := c.BanlieueV1alpha1().VMClasses().List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=db-prod-large"})
		if err != nil || len(cl.Items) != 1 {
			t.Errorf("classes by name: %v", err)
		}
	})

	t.Run("table output has the columns", func(t *testing.T) {
		for path, want := range map[string][]string{
			"/apis/banlieue.io/v1alpha1/namespaces/" + ns + "/virtualmachines": {"Name", "Class", "Image", "Provider", "Power", "Ready", "IP", "Age"},
			"/apis/banlieue.io/v1alpha1/namespaces/" + ns + "/providers":       {"Name", "Class", "Ready", "Age"},
			"/apis/banlieue.io/v1alpha1/vmclasses":                             {"Name", "CPUs", "Memory", "Firmware", "Age"},
			"/apis/banlieue.io/v1alpha1/vmimages":                              {"Name", "OS", "Version", "Arch", "Ready", "Progress", "Age"},
		} {
			tbl := getTable(t, c, path)
			var cols []string
			for _, col := range tbl.ColumnDefinitions {
				if col.Priority == 0 {
					cols = append(cols, col.Name)
				}
			}
			if strings.Join(cols, ",") != strings.Join(want, ",") {
				t.Errorf("%s: columns %v, want %v", path, cols, want)
			}
			if len(tbl.Rows) == 0 {
				t.Errorf("%s: no rows", path)
			}
		}
		tbl := getTable(t, c, "/apis/banlieue.io/v1alpha1/namespaces/"+ns+"/virtualmachines/db-prod-01")
		got := fmt.Sprint(tbl.Rows[0].Cells[:6])
		if got != "[db-prod-01 db-prod-large ubuntu-22.04-cloudinit prod-vsphere PoweredOn Unknown]" {
			t.Errorf("row = %s", got)
		}
	})

	t.Run("watch sees create, update and delete", func(t *testing.T) {
		classes := c.BanlieueV1alpha1().VMClasses()
		l, err := classes.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := classes.Watch(ctx, metav1.ListOptions{ResourceVersion: l.ResourceVersion, LabelSelector: "watched=yes"})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		cl := class.DeepCopy()
		cl.ObjectMeta = metav1.ObjectMeta{Name: "watched", Labels: map[string]string{"watched": "yes"}}
		if _, err := classes.Create(ctx, cl, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		got, err := classes.Get(ctx, "watched", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got.Spec.Hardware.CPUs = 2
		if _, err := classes.Update(ctx, got, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := classes.Delete(ctx, "watched", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var seen []watch.EventType
		timeout := time.After(30 * time.Second)
		for len(seen) < 3 {
			select {
			case ev := <-w.ResultChan():
				seen = append(seen, ev.Type)
			case <-timeout:
				t.Fatalf("watch saw only %v", seen)
			}
		}
		if fmt.Sprint(seen) != "[ADDED MODIFIED DELETED]" {
			t.Errorf("events = %v", seen)
		}
	})

	t.Run("delete and deletecollection", func(t *testing.T) {
		vms := c.BanlieueV1alpha1().VirtualMachines(ns)
		if err := vms.Delete(ctx, "orphan", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		assertAbsent(t, c, "orphan")
		if err := vms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{FieldSelector: "spec.imageRef.name=later-image"}); err != nil {
			t.Fatal(err)
		}
		assertAbsent(t, c, "early")
		if _, err := vms.Get(ctx, "db-prod-01", metav1.GetOptions{}); err != nil {
			t.Errorf("deletecollection removed too much: %v", err)
		}
	})

	t.Run("status validation names the field", func(t *testing.T) {
		imgs := c.BanlieueV1alpha1().VMImages()
		img, err := imgs.Get(ctx, "ubuntu-22.04-cloudinit", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		img.Status.PerProvider = []v1alpha1.ImageProviderStatus{{Provider: ns + "/prod-vsphere", Ready: false}}
		_, err = imgs.UpdateStatus(ctx, img, metav1.UpdateOptions{})
		assertInvalid(t, err, "status.perProvider[0].reason")
		img.Status.PerProvider[0].Ready = true
		got, err := imgs.UpdateStatus(ctx, img, metav1.UpdateOptions{})
		if err != nil || len(got.Status.PerProvider) != 1 || !got.Status.PerProvider[0].Ready {
			t.Errorf("status update: %v %+v", err, got)
		}
	})
}

// ---------------------------------------------------------------------------
// server-side apply

func TestServerSideApply(t *testing.T) {
	s := startServer(t, t.TempDir())
	c := s.Client
	ctx := context.Background()
	seed(t, ctx, c)
	vms := c.BanlieueV1alpha1().VirtualMachines(ns)

	// The user's manager owns class, image and power state.
	user := applyv1alpha1.VirtualMachine("ssa-vm", ns).WithLabels(map[string]string{"app": "db"}).WithSpec(
		applyv1alpha1.VirtualMachineSpec().
			WithClassRef(applyv1alpha1.LocalObjectReference().WithName("db-prod-large")).
			WithImageRef(applyv1alpha1.LocalObjectReference().WithName("ubuntu-22.04-cloudinit")).
			WithDesiredPowerState(v1alpha1.PowerStatePoweredOn))
	if _, err := vms.Apply(ctx, user, metav1.ApplyOptions{FieldManager: "user"}); err != nil {
		t.Fatalf("user apply: %v", err)
	}
	// A second manager owns one disk override and one network override; list
	// maps merge per entry, so a third manager can own another disk.
	sizing := applyv1alpha1.VirtualMachine("ssa-vm", ns).WithSpec(applyv1alpha1.VirtualMachineSpec().
		WithHardwareOverride(applyv1alpha1.HardwareOverride().WithMemoryMiB(65536).
			WithDiskOverrides(applyv1alpha1.DiskOverride().WithName("data").WithSizeGiB(2000))))
	if _, err := vms.Apply(ctx, sizing, metav1.ApplyOptions{FieldManager: "sizing"}); err != nil {
		t.Fatalf("sizing apply: %v", err)
	}
	root := applyv1alpha1.VirtualMachine("ssa-vm", ns).WithSpec(applyv1alpha1.VirtualMachineSpec().
		WithHardwareOverride(applyv1alpha1.HardwareOverride().
			WithDiskOverrides(applyv1alpha1.DiskOverride().WithName("root").WithSizeGiB(100))))
	got, err := vms.Apply(ctx, root, metav1.ApplyOptions{FieldManager: "root-disk"})
	if err != nil {
		t.Fatalf("root apply: %v", err)
	}
	if len(got.Spec.HardwareOverride.DiskOverrides) != 2 || *got.Spec.HardwareOverride.MemoryMiB != 65536 {
		t.Errorf("list-map merge lost entries: %+v", got.Spec.HardwareOverride)
	}
	if got.Spec.ClassRef.Name != "db-prod-large" {
		t.Errorf("class lost: %+v", got.Spec.ClassRef)
	}
	managers := map[string]bool{}
	for _, mf := range got.ManagedFields {
		managers[mf.Manager] = true
	}
	for _, m := range []string{"user", "sizing", "root-disk"} {
		if !managers[m] {
			t.Errorf("manager %q missing from managedFields", m)
		}
	}

	// The sizing manager changing memory owned by itself is fine; the user
	// manager changing it conflicts.
	conflicting := applyv1alpha1.VirtualMachine("ssa-vm", ns).WithSpec(applyv1alpha1.VirtualMachineSpec().
		WithClassRef(applyv1alpha1.LocalObjectReference().WithName("db-prod-large")).
		WithImageRef(applyv1alpha1.LocalObjectReference().WithName("ubuntu-22.04-cloudinit")).
		WithHardwareOverride(applyv1alpha1.HardwareOverride().WithMemoryMiB(1024)))
	_, err = vms.Apply(ctx, conflicting, metav1.ApplyOptions{FieldManager: "user"})
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "sizing") {
		t.Errorf("err = %v, want a conflict with manager sizing", err)
	}

	// Status is not claimed through the main endpoint.
	withStatus := applyv1alpha1.VirtualMachine("ssa-vm", ns).WithStatus(applyv1alpha1.VirtualMachineStatus().WithPowerState(v1alpha1.PowerStatePoweredOff))
	if got, err := vms.Apply(ctx, withStatus, metav1.ApplyOptions{FieldManager: "sneaky", Force: true}); err != nil {
		t.Errorf("apply: %v", err)
	} else if got.Status.PowerState != "" {
		t.Errorf("main endpoint wrote status: %q", got.Status.PowerState)
	}
	// ...but through the status subresource.
	got, err = vms.ApplyStatus(ctx, withStatus, metav1.ApplyOptions{FieldManager: "controller", Force: true})
	if err != nil || got.Status.PowerState != v1alpha1.PowerStatePoweredOff {
		t.Errorf("apply status: %v %q", err, got.Status.PowerState)
	}

	// Apply of the seed examples with a second manager taking over power state.
	var vm v1alpha1.VirtualMachine
	readExample(t, "virtualmachine.yaml", &vm)
	body, _ := json.Marshal(vm)
	if _, err := vms.Patch(ctx, vm.Name, "application/apply-patch+yaml", body, metav1.PatchOptions{FieldManager: "kubectl"}); err != nil {
		t.Fatalf("apply example: %v", err)
	}
	power := applyv1alpha1.VirtualMachine(vm.Name, ns).WithSpec(applyv1alpha1.VirtualMachineSpec().WithDesiredPowerState(v1alpha1.PowerStatePoweredOff))
	if _, err := vms.Apply(ctx, power, metav1.ApplyOptions{FieldManager: "ops"}); !apierrors.IsConflict(err) {
		t.Errorf("second manager changing a field the first owns: err = %v, want conflict", err)
	}
	if got, err := vms.Apply(ctx, power, metav1.ApplyOptions{FieldManager: "ops", Force: true}); err != nil || got.Spec.DesiredPowerState != v1alpha1.PowerStatePoweredOff {
		t.Errorf("forced apply: %v", err)
	}
}

// ---------------------------------------------------------------------------
// OpenAPI, restart

func TestOpenAPIV3(t *testing.T) {
	s := startServer(t, t.TempDir())
	raw, err := s.Client.Discovery().RESTClient().Get().AbsPath("/openapi/v3/apis/banlieue.io/v1alpha1").DoRaw(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Components struct {
			Schemas map[string]map[string]interface{} `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	spec := doc.Components.Schemas["com.github.firestoned.banlieue.pkg.apis.banlieue.v1alpha1.VirtualMachineSpec"]
	if spec == nil {
		t.Fatalf("VirtualMachineSpec schema missing; have %d schemas", len(doc.Components.Schemas))
	}
	props := spec["properties"].(map[string]interface{})
	no := props["networkOverrides"].(map[string]interface{})
	if no["x-kubernetes-list-type"] != "map" || fmt.Sprint(no["x-kubernetes-list-map-keys"]) != "[name]" {
		t.Errorf("networkOverrides extensions: %v", no)
	}
	if !strings.Contains(fmt.Sprint(props["desiredPowerState"]), "Defaults to PoweredOn") {
		t.Errorf("desiredPowerState doc does not state its default: %v", props["desiredPowerState"])
	}
	vm := doc.Components.Schemas["com.github.firestoned.banlieue.pkg.apis.banlieue.v1alpha1.VirtualMachine"]
	if !strings.Contains(fmt.Sprint(vm["x-kubernetes-group-version-kind"]), "VirtualMachine") {
		t.Errorf("VirtualMachine lacks its GVK extension: %v", vm["x-kubernetes-group-version-kind"])
	}
	// OpenAPI v2 as well (older kubectl explain, and kube-apiserver's aggregation).
	if _, err := s.Client.Discovery().RESTClient().Get().AbsPath("/openapi/v2").DoRaw(context.Background()); err != nil {
		t.Errorf("openapi v2: %v", err)
	}
}

func TestDataSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	s := startServer(t, dir)
	ctx := context.Background()
	seed(t, ctx, s.Client)
	vm := newVM("persistent", "db-prod-large", "ubuntu-22.04-cloudinit")
	created, err := s.Client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, vm, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s.stop()

	s2 := startServer(t, dir)
	got, err := s2.Client.BanlieueV1alpha1().VirtualMachines(ns).Get(ctx, "persistent", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("after restart: %v", err)
	}
	if got.UID != created.UID || got.ResourceVersion != created.ResourceVersion {
		t.Errorf("object changed across restart: uid %s/%s rv %s/%s", got.UID, created.UID, got.ResourceVersion, created.ResourceVersion)
	}
	if _, err := s2.Client.BanlieueV1alpha1().VMClasses().Get(ctx, "db-prod-large", metav1.GetOptions{}); err != nil {
		t.Errorf("class after restart: %v", err)
	}
}

// ---------------------------------------------------------------------------
// helpers

func newVM(name, class, image string) *v1alpha1.VirtualMachine {
	return &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: class},
			ImageRef: v1alpha1.LocalObjectReference{Name: image},
		},
	}
}

func names(vms []v1alpha1.VirtualMachine) string {
	var out []string
	for _, vm := range vms {
		out = append(out, vm.Name)
	}
	return strings.Join(out, ",")
}

func asStatus(err error, out *apierrors.APIStatus) bool {
	s, ok := err.(apierrors.APIStatus)
	if ok {
		*out = s
	}
	return ok
}

// assertInvalid checks err is 422 Invalid and names every given field.
func assertInvalid(t *testing.T, err error, fields ...string) {
	t.Helper()
	if !apierrors.IsInvalid(err) {
		t.Fatalf("err = %v, want Invalid", err)
	}
	status := err.(apierrors.APIStatus).Status()
	var got []string
	for _, cause := range status.Details.Causes {
		got = append(got, cause.Field)
	}
	for _, f := range fields {
		found := false
		for _, g := range got {
			if g == f {
				found = true
			}
		}
		if !found {
			t.Errorf("error does not name %s; causes name %v (%v)", f, got, err)
		}
	}
}

func assertAbsent(t *testing.T, c clientset.Interface, name string) {
	t.Helper()
	if _, err := c.BanlieueV1alpha1().VirtualMachines(ns).Get(context.Background(), name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("VirtualMachine %s: err = %v, want NotFound", name, err)
	}
}

func getTable(t *testing.T, c clientset.Interface, path string) *metav1.Table {
	t.Helper()
	raw, err := c.Discovery().RESTClient().Get().AbsPath(path).
		SetHeader("Accept", "application/json;as=Table;v=v1;g=meta.k8s.io").DoRaw(context.Background())
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	tbl := &metav1.Table{}
	if err := json.Unmarshal(raw, tbl); err != nil {
		t.Fatal(err)
	}
	if tbl.Kind != "Table" {
		t.Fatalf("%s: kind %q", path, tbl.Kind)
	}
	return tbl
}

type collectWarnings struct{ warnings []string }

func (c *collectWarnings) HandleWarningHeader(_ int, _ string, text string) {
	c.warnings = append(c.warnings, text)
}
