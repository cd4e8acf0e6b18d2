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

package virtualmachine

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

var created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func metricsVM(name string, scheduled string, conds ...metav1.Condition) *v1alpha1.VirtualMachine {
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns", CreationTimestamp: metav1.NewTime(created)}}
	if scheduled != "" {
		vm.Status.Scheduled = &v1alpha1.ScheduledPlacement{Provider: scheduled}
	}
	vm.Status.Conditions = conds
	return vm
}

func cond(t, s, reason string, after time.Duration) metav1.Condition {
	return metav1.Condition{Type: t, Status: metav1.ConditionStatus(s), Reason: reason, LastTransitionTime: metav1.NewTime(created.Add(after))}
}

func TestPhase(t *testing.T) {
	now := metav1.Now()
	paused := metricsVM("p", "prov")
	paused.Spec.Paused = true
	paused.DeletionTimestamp = &now
	deleting := metricsVM("d", "prov", cond(v1alpha1.VirtualMachineReady, "True", reasonReachable, 0))
	deleting.DeletionTimestamp = &now
	for _, tc := range []struct {
		vm   *v1alpha1.VirtualMachine
		want string
	}{
		{metricsVM("new", ""), PhasePending},
		{metricsVM("nofit", "", cond(v1alpha1.VirtualMachineScheduled, "False", "NoProviderMatched", 0)), PhaseUnschedulable},
		{metricsVM("noclass", "", cond(v1alpha1.VirtualMachineScheduled, "False", "ClassNotFound", 0)), PhaseUnschedulable},
		{metricsVM("placed", "prov"), PhaseProvisioning},
		{metricsVM("building", "prov", cond(v1alpha1.VirtualMachineReady, "False", reasonWaitingForAddress, 0)), PhaseProvisioning},
		{metricsVM("ready", "prov", cond(v1alpha1.VirtualMachineReady, "True", reasonReachable, 0)), PhaseReady},
		{metricsVM("off", "prov", cond(v1alpha1.VirtualMachineReady, "False", reasonPoweredOff, 0)), PhaseStopped},
		{metricsVM("suspended", "prov", cond(v1alpha1.VirtualMachineReady, "False", reasonSuspended, 0)), PhaseStopped},
		{paused, PhasePaused},
		{deleting, PhaseDeleting},
	} {
		if got := Phase(tc.vm); got != tc.want {
			t.Errorf("%s: phase %s, want %s", tc.vm.Name, got, tc.want)
		}
	}
}

// TestVirtualMachinesCollector: the gauge counts the cache's VMs by phase
// and Provider (namespace/name, "" unscheduled) once elected, and reports
// nothing on a standby.
func TestVirtualMachinesCollector(t *testing.T) {
	scheme := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	shared := metricsVM("shared", "banlieue-system/p2", cond(v1alpha1.VirtualMachineReady, "True", reasonReachable, 0))
	c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(
		metricsVM("a", "p1", cond(v1alpha1.VirtualMachineReady, "True", reasonReachable, 0)),
		metricsVM("b", "p1", cond(v1alpha1.VirtualMachineReady, "True", reasonReachable, 0)),
		metricsVM("c", "p1"),
		metricsVM("d", "", cond(v1alpha1.VirtualMachineScheduled, "False", "NoProviderMatched", 0)),
		shared,
	).Build()
	elected := make(chan struct{})
	collected.Store(&vmSource{reader: c, elected: elected})
	t.Cleanup(func() { collected.Store(nil) })

	if n := testutil.CollectAndCount(vmCollector{}); n != 0 {
		t.Fatalf("standby reports %d series, want none", n)
	}
	close(elected)
	want := `
# HELP banlieue_virtualmachines VirtualMachines by phase and Provider (namespace/name, empty when unscheduled), from the leader's cache at scrape time; a standby reports none.
# TYPE banlieue_virtualmachines gauge
banlieue_virtualmachines{phase="Provisioning",provider="ns/p1"} 1
banlieue_virtualmachines{phase="Ready",provider="banlieue-system/p2"} 1
banlieue_virtualmachines{phase="Ready",provider="ns/p1"} 2
banlieue_virtualmachines{phase="Unschedulable",provider=""} 1
`
	if err := testutil.CollectAndCompare(vmCollector{}, strings.NewReader(want)); err != nil {
		t.Fatal(err)
	}
}

// TestObserve: a failed attempt counts its reason; the reconcile that
// schedules observes creation → Scheduled once, the one that turns Ready
// True creation → Ready once; a VM powered on again is not observed.
func TestObserve(t *testing.T) {
	schedulingSeconds.Reset()
	readySeconds.Reset()
	schedulingFailures.Reset()

	// A failed attempt, and a reconcile that failed before trying.
	nofit := metricsVM("nofit", "", cond(v1alpha1.VirtualMachineScheduled, "False", "NoProviderMatched", 0))
	observe(&v1alpha1.VirtualMachineStatus{}, nofit, true)
	observe(&v1alpha1.VirtualMachineStatus{}, nofit, true)
	observe(&v1alpha1.VirtualMachineStatus{}, nofit, false)
	if got := testutil.ToFloat64(schedulingFailures.WithLabelValues("NoProviderMatched")); got != 2 {
		t.Errorf("failures{NoProviderMatched} = %v, want 2", got)
	}

	// Scheduled 3s after creation.
	before := metricsVM("vm", "", cond(v1alpha1.VirtualMachineScheduled, "False", "NoProviderMatched", time.Second)).Status
	placed := metricsVM("vm", "p1", cond(v1alpha1.VirtualMachineScheduled, "True", "Scheduled", 3*time.Second))
	observe(&before, placed, true)
	// Its next reconciles do not observe it again.
	observe(placed.Status.DeepCopy(), placed, true)
	// Ready 90s after creation, then reconciled again.
	ready := placed.DeepCopy()
	ready.Status.Conditions = append(ready.Status.Conditions, cond(v1alpha1.VirtualMachineReady, "True", reasonReachable, 90*time.Second))
	observe(placed.Status.DeepCopy(), ready, true)
	observe(ready.Status.DeepCopy(), ready, true)
	// Powered off and on again: not provisioning.
	off := placed.DeepCopy()
	off.Status.Conditions = append(off.Status.Conditions, cond(v1alpha1.VirtualMachineReady, "False", reasonPoweredOff, time.Hour))
	observe(off.Status.DeepCopy(), ready, true)

	want := `
# HELP banlieue_virtualmachine_scheduling_seconds Time from a VirtualMachine's creation to its Scheduled condition first True, per Provider (namespace/name).
# TYPE banlieue_virtualmachine_scheduling_seconds histogram
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="0.5"} 0
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="1"} 0
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="2"} 0
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="5"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="10"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="20"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="30"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="60"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="120"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="180"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="300"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="600"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="900"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="1200"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="1800"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="3600"} 1
banlieue_virtualmachine_scheduling_seconds_bucket{provider="ns/p1",le="+Inf"} 1
banlieue_virtualmachine_scheduling_seconds_sum{provider="ns/p1"} 3
banlieue_virtualmachine_scheduling_seconds_count{provider="ns/p1"} 1
`
	if err := testutil.CollectAndCompare(schedulingSeconds, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	if n := testutil.CollectAndCount(readySeconds); n != 1 {
		t.Fatalf("ready_seconds has %d series, want 1", n)
	}
	wantReady := `
# HELP banlieue_virtualmachine_ready_seconds Time from a VirtualMachine's creation to its Ready condition first True, per Provider (namespace/name).
# TYPE banlieue_virtualmachine_ready_seconds histogram
`
	var b strings.Builder
	b.WriteString(wantReady)
	cum := 0
	for _, le := range []string{"0.5", "1", "2", "5", "10", "20", "30", "60", "120", "180", "300", "600", "900", "1200", "1800", "3600", "+Inf"} {
		if le == "120" {
			cum = 1
		}
		b.WriteString(`banlieue_virtualmachine_ready_seconds_bucket{provider="ns/p1",le="` + le + `"} ` + map[int]string{0: "0", 1: "1"}[cum] + "\n")
	}
	b.WriteString("banlieue_virtualmachine_ready_seconds_sum{provider=\"ns/p1\"} 90\nbanlieue_virtualmachine_ready_seconds_count{provider=\"ns/p1\"} 1\n")
	if err := testutil.CollectAndCompare(readySeconds, strings.NewReader(b.String())); err != nil {
		t.Error(err)
	}
}
