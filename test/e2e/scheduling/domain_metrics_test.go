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
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/metricstest"
)

// leader is the controller Deployment's leading replica and all of its
// replicas (env.WaitLeadership).
func leader(t *testing.T) (devenv.Replica, []devenv.Replica) {
	t.Helper()
	lead, all, err := env.WaitLeadership(context.Background(), ns, deployment, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	return lead, all
}

// TestStandbyReady: of the controller Deployment's pods, the one waiting
// for the lease is live and ready (it can take over): its verbose /readyz
// says standby, the leader's says leading, each answers /healthz, and the
// kubelet's readiness probe marks each pod Ready.
func TestStandbyReady(t *testing.T) {
	ctx := context.Background()
	_, all := leader(t)
	for _, r := range all {
		if err := env.LiveAndReady(ctx, ns, r, time.Minute); err != nil {
			t.Error(err)
		}
	}
}

// TestDomainMetrics: VMs scheduled on a Provider and made Ready show on
// the leader's metrics endpoint: banlieue_virtualmachines by phase on that
// Provider (namespace/name) equal to the VMs in each phase, a creation →
// Scheduled and creation → Ready observation per VM, and an unresolvable
// VM counted under its reason.
func TestDomainMetrics(t *testing.T) {
	ctx := context.Background()
	const space, provider = "domain-metrics", "metrics-vsphere"
	qualified := ns + "/" + provider
	kc(t, "apply", "-f", "artifacts/examples/vmclass.yaml", "-f", "artifacts/examples/vmimage.yaml")
	labels := map[string]string{"pool": "domain-metrics"}
	readyProvider(t, provider, labels, []string{"hotAddCPU", "hotAddMemory", "efiSecureBoot"}, "m-1")
	imageReadyOn(t, "ubuntu-22.04-cloudinit", provider)
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: space}}); err != nil {
		t.Fatal(err)
	}
	// Other tests' VMs may pick this Provider while it exists: gone at the end.
	t.Cleanup(func() {
		_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: space}})
		eventually(t, 3*time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKey{Name: space}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
				return fmt.Errorf("namespace %s still there: %v", space, err)
			}
			return nil
		})
		_ = c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: provider}})
	})
	token, remove, err := env.MetricsReaderToken(space, "scraper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)

	const n, ready = 3, 2
	for i := 0; i < n; i++ {
		vm := &v1alpha1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("vm-%d", i), Namespace: space},
			Spec: v1alpha1.VirtualMachineSpec{
				ClassRef: v1alpha1.LocalObjectReference{Name: "db-prod-large"}, ImageRef: v1alpha1.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
				Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: labels}},
			},
		}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
	}
	// A VM whose class does not exist: a scheduling failure.
	if err := c.Create(ctx, &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "no-class", Namespace: space},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "no-such-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
		},
	}); err != nil {
		t.Fatal(err)
	}
	waitScheduled(t, space, "no-class", "ClassNotFound")
	// The provider's part: the first two machines provisioned, on, addressed.
	for i := 0; i < ready; i++ {
		name := fmt.Sprintf("vm-%d", i)
		vsm := &infrav1.VSphereMachine{}
		eventually(t, time.Minute, func() error { return c.Get(ctx, client.ObjectKey{Namespace: space, Name: name}, vsm) })
		vsm.Status.Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
		vsm.Status.Addresses = []infrav1.MachineAddress{{Type: "InternalIP", Address: fmt.Sprintf("192.0.2.%d", 10+i)}}
		vsm.Status.PowerState = "PoweredOn"
		meta.SetStatusCondition(&vsm.Status.Conditions, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "PoweredOn", Message: "up"})
		if err := c.Status().Update(ctx, vsm); err != nil {
			t.Fatal(err)
		}
	}
	// Each Ready VM's creation to Ready, from its own object: what the
	// histogram's sum must add up to (both times have a second's
	// resolution, so a VM Ready within its first second adds 0).
	var wantReadySum float64
	eventually(t, time.Minute, func() error {
		var vms v1alpha1.VirtualMachineList
		if err := c.List(ctx, &vms, client.InNamespace(space)); err != nil {
			return err
		}
		got, sum := 0, 0.0
		for _, vm := range vms.Items {
			if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady); c != nil && c.Status == metav1.ConditionTrue {
				got++
				sum += c.LastTransitionTime.Sub(vm.CreationTimestamp.Time).Seconds()
			}
		}
		wantReadySum = sum
		if got != ready {
			return fmt.Errorf("%d VMs Ready, want %d", got, ready)
		}
		return nil
	})

	lead, all := leader(t)
	eventually(t, time.Minute, func() error {
		families, err := metricstest.Scrape(lead.Metrics, token)
		if err != nil {
			return err
		}
		for _, want := range []struct {
			family string
			labels map[string]string
			ok     func(float64) bool
			says   string
		}{
			{"banlieue_virtualmachines", map[string]string{"phase": "Ready", "provider": qualified}, eq(ready), fmt.Sprint(ready)},
			{"banlieue_virtualmachines", map[string]string{"phase": "Provisioning", "provider": qualified}, eq(n - ready), fmt.Sprint(n - ready)},
			{"banlieue_virtualmachines", map[string]string{"phase": "Unschedulable", "provider": ""}, atLeast(1), ">= 1"},
			{"banlieue_virtualmachine_scheduling_seconds", map[string]string{"provider": qualified}, eq(n), fmt.Sprint(n)},
			{"banlieue_virtualmachine_ready_seconds", map[string]string{"provider": qualified}, eq(ready), fmt.Sprint(ready)},
			{"banlieue_scheduling_failures_total", map[string]string{"reason": "ClassNotFound"}, atLeast(1), ">= 1"},
		} {
			m := families.Find(want.family, want.labels)
			if m == nil {
				return fmt.Errorf("no %s%v on the leader", want.family, want.labels)
			}
			// A gauge's or counter's value, a histogram's count.
			if v, _ := metricstest.Value(m); !want.ok(v) {
				return fmt.Errorf("%s%v = %v, want %s", want.family, want.labels, v, want.says)
			}
		}
		h := families.Find("banlieue_virtualmachine_ready_seconds", map[string]string{"provider": qualified}).GetHistogram()
		if s := h.GetSampleSum(); s != wantReadySum {
			return fmt.Errorf("ready_seconds sum %v for %d VMs, their objects say %v", s, ready, wantReadySum)
		}
		return nil
	})
	// A standby reports no VM counts (sum() over replicas counts each VM
	// once), though its cache holds them.
	for _, r := range all {
		if r == lead {
			continue
		}
		families, err := metricstest.Scrape(r.Metrics, token)
		if err != nil {
			t.Fatalf("standby pod %s: %v", r.Pod, err)
		}
		if f := families["banlieue_virtualmachines"]; len(f.GetMetric()) > 0 {
			t.Errorf("standby pod %s reports %d banlieue_virtualmachines series", r.Pod, len(f.GetMetric()))
		}
	}
}

func eq(want int) func(float64) bool      { return func(v float64) bool { return v == float64(want) } }
func atLeast(want int) func(float64) bool { return func(v float64) bool { return v >= float64(want) } }
