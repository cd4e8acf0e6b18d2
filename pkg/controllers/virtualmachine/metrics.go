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
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/placement"
)

// Phases of a VirtualMachine as banlieue_virtualmachines counts them,
// computed from its spec, metadata and conditions (Phase).
const (
	// PhasePending: not scheduled and never tried (no Scheduled condition).
	PhasePending = "Pending"
	// PhaseUnschedulable: not scheduled, Scheduled False (no Provider fits,
	// or its class or image does not resolve).
	PhaseUnschedulable = "Unschedulable"
	// PhaseProvisioning: scheduled on a Provider, not Ready yet.
	PhaseProvisioning = "Provisioning"
	// PhaseReady: Ready True (provisioned, powered on, reachable).
	PhaseReady = "Ready"
	// PhaseStopped: scheduled, Ready False because it is powered off or
	// suspended as its spec asks.
	PhaseStopped = "Stopped"
	// PhasePaused: spec.paused (the controller leaves it alone, even
	// deleted).
	PhasePaused = "Paused"
	// PhaseDeleting: deletionTimestamp set.
	PhaseDeleting = "Deleting"
)

// Phases lists every phase, in the order of the VM's life.
var Phases = []string{PhasePending, PhaseUnschedulable, PhaseProvisioning, PhaseReady, PhaseStopped, PhasePaused, PhaseDeleting}

// Phase is vm's phase for banlieue_virtualmachines.
func Phase(vm *v1alpha1.VirtualMachine) string {
	switch {
	case vm.Spec.Paused:
		return PhasePaused
	case !vm.DeletionTimestamp.IsZero():
		return PhaseDeleting
	case vm.Status.Scheduled == nil:
		if meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled) == nil {
			return PhasePending
		}
		return PhaseUnschedulable
	}
	ready := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady)
	switch {
	case ready != nil && ready.Status == metav1.ConditionTrue:
		return PhaseReady
	case ready != nil && (ready.Reason == reasonPoweredOff || ready.Reason == reasonSuspended):
		return PhaseStopped
	}
	return PhaseProvisioning
}

// provider is the label of vm's Provider: namespace/name, "" unscheduled.
func provider(vm *v1alpha1.VirtualMachine) string {
	if vm.Status.Scheduled == nil {
		return ""
	}
	return placement.QualifiedProvider(vm.Namespace, vm.Status.Scheduled.Provider)
}

// durationBuckets: seconds to an hour, for creation → Scheduled and
// creation → Ready.
var durationBuckets = []float64{0.5, 1, 2, 5, 10, 20, 30, 60, 120, 180, 300, 600, 900, 1200, 1800, 3600}

var (
	schedulingSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "banlieue_virtualmachine_scheduling_seconds",
		Help:    "Time from a VirtualMachine's creation to its Scheduled condition first True, per Provider (namespace/name).",
		Buckets: durationBuckets,
	}, []string{"provider"})
	readySeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "banlieue_virtualmachine_ready_seconds",
		Help:    "Time from a VirtualMachine's creation to its Ready condition first True, per Provider (namespace/name).",
		Buckets: durationBuckets,
	}, []string{"provider"})
	schedulingFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_scheduling_failures_total",
		Help: "Scheduling attempts of VirtualMachines that failed, by the Scheduled condition's reason.",
	}, []string{"reason"})
	vmsDesc = prometheus.NewDesc("banlieue_virtualmachines",
		"VirtualMachines by phase and Provider (namespace/name, empty when unscheduled), from the leader's cache at scrape time; a standby reports none.",
		[]string{"phase", "provider"}, nil)
	// collected is the source banlieue_virtualmachines reads, set by
	// SetupWithManager (nil: none).
	collected atomic.Pointer[vmSource]
)

func init() {
	metrics.Registry.MustRegister(schedulingSeconds, readySeconds, schedulingFailures, vmCollector{})
}

// vmSource is where the collector lists VMs, once elected is closed.
type vmSource struct {
	reader  client.Reader
	elected <-chan struct{}
}

// vmCollector computes banlieue_virtualmachines at each scrape from the
// manager's cache: nothing is kept per VM, so the figure is right after a
// restart or a leader change. Only the leader reports (a standby's scrape
// has no series), so sum() over replicas counts each VM once.
type vmCollector struct{}

func (vmCollector) Describe(ch chan<- *prometheus.Desc) { ch <- vmsDesc }

func (vmCollector) Collect(ch chan<- prometheus.Metric) {
	src := collected.Load()
	if src == nil {
		return
	}
	select {
	case <-src.elected:
	default:
		return // standby
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var vms v1alpha1.VirtualMachineList
	if err := src.reader.List(ctx, &vms, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.Log.WithName("metrics").Error(err, "Listing VirtualMachines for banlieue_virtualmachines")
		return
	}
	for k, n := range countPhases(vms.Items) {
		ch <- prometheus.MustNewConstMetric(vmsDesc, prometheus.GaugeValue, float64(n), k.phase, k.provider)
	}
}

type phaseKey struct{ phase, provider string }

func countPhases(vms []v1alpha1.VirtualMachine) map[phaseKey]int {
	out := map[phaseKey]int{}
	for i := range vms {
		out[phaseKey{Phase(&vms[i]), provider(&vms[i])}]++
	}
	return out
}

// observe records what one reconcile of a VM neither paused nor deleted
// did, once its status is stored: a failed scheduling attempt (tried: the
// reconcile got as far as resolving and placing the VM), the first
// Scheduled, the first Ready.
func observe(before *v1alpha1.VirtualMachineStatus, vm *v1alpha1.VirtualMachine, tried bool) {
	if vm.Status.Scheduled == nil {
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled); tried && c != nil && c.Status == metav1.ConditionFalse {
			schedulingFailures.WithLabelValues(c.Reason).Inc()
		}
		return
	}
	p := provider(vm)
	// status.scheduled is set once (a migration moves it, without a new
	// Scheduled transition): its first appearance is the first Scheduled.
	if before.Scheduled == nil {
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled); c != nil && c.Status == metav1.ConditionTrue {
			schedulingSeconds.WithLabelValues(p).Observe(since(vm, c))
		}
	}
	if firstReady(before, vm) {
		c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady)
		readySeconds.WithLabelValues(p).Observe(since(vm, c))
	}
}

// firstReady: this reconcile turned Ready True, from a state a VM is in
// before it is first Ready. Coming back from powered off or suspended (as
// its spec asked) is not provisioning and is not observed; a VM whose
// infrastructure became unready and Ready again is (see docs/metrics.md).
func firstReady(before *v1alpha1.VirtualMachineStatus, vm *v1alpha1.VirtualMachine) bool {
	now := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineReady)
	if now == nil || now.Status != metav1.ConditionTrue {
		return false
	}
	was := meta.FindStatusCondition(before.Conditions, v1alpha1.VirtualMachineReady)
	if was == nil {
		return true
	}
	return was.Status != metav1.ConditionTrue && was.Reason != reasonPoweredOff && was.Reason != reasonSuspended
}

// since is the seconds from vm's creation to c's last transition.
func since(vm *v1alpha1.VirtualMachine, c *metav1.Condition) float64 {
	d := c.LastTransitionTime.Sub(vm.CreationTimestamp.Time).Seconds()
	if d < 0 {
		return 0
	}
	return d
}
