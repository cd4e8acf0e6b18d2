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
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

func TestReadiness(t *testing.T) {
	ip := []v1alpha1.MachineAddress{{Type: v1alpha1.MachineHostName, Address: "vm"}, {Type: v1alpha1.MachineInternalIP, Address: "192.0.2.7"}}
	hostOnly := []v1alpha1.MachineAddress{{Type: v1alpha1.MachineHostName, Address: "vm"}}
	ready := &metav1.Condition{Status: metav1.ConditionTrue, Reason: "PoweredOn", Message: "VM is PoweredOn"}
	for _, tc := range []struct {
		name      string
		o         infrastructure.Observed
		status    metav1.ConditionStatus
		infra, vm string
	}{
		{"not reported", infrastructure.Observed{}, metav1.ConditionFalse, reasonWaitingForInfrastructure, reasonWaitingForInfrastructure},
		{"backend reason passes through", infrastructure.Observed{Ready: &metav1.Condition{Status: metav1.ConditionFalse, Reason: "UserDataForbidden"}},
			metav1.ConditionFalse, "UserDataForbidden", "UserDataForbidden"},
		{"no reason given", infrastructure.Observed{Ready: &metav1.Condition{Status: metav1.ConditionFalse}},
			metav1.ConditionFalse, reasonInfrastructureNotReady, reasonInfrastructureNotReady},
		{"not provisioned", infrastructure.Observed{Ready: ready, PowerState: "PoweredOn", Addresses: ip},
			metav1.ConditionFalse, "PoweredOn", reasonNotProvisioned},
		{"powered off as desired", infrastructure.Observed{Ready: ready, Provisioned: ptr.To(true), PowerState: "PoweredOff"},
			metav1.ConditionFalse, "PoweredOn", reasonPoweredOff},
		{"suspended as desired", infrastructure.Observed{Ready: ready, Provisioned: ptr.To(true), PowerState: "Suspended", Addresses: ip},
			metav1.ConditionFalse, "PoweredOn", reasonSuspended},
		{"on, hostname only", infrastructure.Observed{Ready: ready, Provisioned: ptr.To(true), PowerState: "PoweredOn", Addresses: hostOnly},
			metav1.ConditionFalse, "PoweredOn", reasonWaitingForAddress},
		{"unknown power state", infrastructure.Observed{Ready: ready, Provisioned: ptr.To(true), PowerState: "Weird", Addresses: ip},
			metav1.ConditionFalse, "PoweredOn", reasonInfrastructureNotReady},
		{"reachable", infrastructure.Observed{Ready: ready, Provisioned: ptr.To(true), PowerState: "PoweredOn", Addresses: ip},
			metav1.ConditionTrue, "PoweredOn", reasonReachable},
	} {
		t.Run(tc.name, func(t *testing.T) {
			infra := infrastructureReady("XMachine", "vm", tc.o)
			got := readiness(infra, tc.o, true)
			if infra.Reason != tc.infra || got.Reason != tc.vm || got.Status != tc.status {
				t.Errorf("InfrastructureReady %s, Ready %s/%s; want %s, %s/%s", infra.Reason, got.Status, got.Reason, tc.infra, tc.status, tc.vm)
			}
			if got.Message == "" {
				t.Error("Ready has no message")
			}
		})
	}
	// A class without interfaces has no address to wait for.
	o := infrastructure.Observed{Ready: ready, Provisioned: ptr.To(true), PowerState: "PoweredOn", Addresses: hostOnly}
	if got := readiness(infrastructureReady("XMachine", "vm", o), o, false); got.Status != metav1.ConditionTrue {
		t.Errorf("no interface: Ready %s/%s, want True", got.Status, got.Reason)
	}
}

// TestRetryWait (issue 32): after a migration timed out, a drift starts
// the next one migrationTimeoutSeconds (default 1800) after the timeout,
// not at once; any other state of Migrating waits for nothing.
func TestRetryWait(t *testing.T) {
	at := time.Date(2026, 12, 4, 20, 0, 0, 0, time.UTC)
	migrating := func(status metav1.ConditionStatus, reason string, timeout *int32) *v1alpha1.VirtualMachine {
		return &v1alpha1.VirtualMachine{Spec: v1alpha1.VirtualMachineSpec{MigrationTimeoutSeconds: timeout},
			Status: v1alpha1.VirtualMachineStatus{Conditions: []metav1.Condition{{Type: v1alpha1.VirtualMachineMigrating,
				Status: status, Reason: reason, LastTransitionTime: metav1.NewTime(at)}}}}
	}
	for _, tc := range []struct {
		name string
		vm   *v1alpha1.VirtualMachine
		now  time.Time
		want time.Duration
	}{
		{"never migrated", &v1alpha1.VirtualMachine{}, at, 0},
		{"timed out just now", migrating(metav1.ConditionFalse, reasonMigrationTimedOut, ptr.To[int32](60)), at.Add(10 * time.Second), 50 * time.Second},
		{"timed out, default timeout", migrating(metav1.ConditionFalse, reasonMigrationTimedOut, nil), at, 30 * time.Minute},
		{"the wait is over", migrating(metav1.ConditionFalse, reasonMigrationTimedOut, ptr.To[int32](60)), at.Add(2 * time.Minute), 0},
		{"migrated", migrating(metav1.ConditionFalse, reasonMigrated, ptr.To[int32](60)), at, 0},
		{"drift reverted", migrating(metav1.ConditionFalse, reasonDriftReverted, ptr.To[int32](60)), at, 0},
		{"migrating", migrating(metav1.ConditionTrue, reasonPlacementDrifted, ptr.To[int32](60)), at, 0},
	} {
		if got := retryWait(tc.vm, tc.now); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
