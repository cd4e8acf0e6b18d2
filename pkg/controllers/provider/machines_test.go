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

package provider

import (
	"slices"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	libvirtmachines "github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// TestWaitingForAddress: only a machine whose VM is built, converged to
// its generation, outside Cluster API, with no task in flight, powered on
// as asked, Ready and without an address is polled for its address alone.
func TestWaitingForAddress(t *testing.T) {
	waiting := func() *infrav1.VSphereMachine {
		m := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
		m.Spec.PowerState = infrav1.PowerStatePoweredOn
		m.Status.Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
		m.Status.ObservedGeneration, m.Status.PowerState = 2, infrav1.PowerStatePoweredOn
		m.Status.Addresses = []infrav1.MachineAddress{{Type: "Hostname", Address: "web-0"}}
		m.Status.Conditions = []metav1.Condition{{Type: infrav1.ReadyCondition, Status: metav1.ConditionTrue, Reason: "PoweredOn"}}
		return m
	}
	for name, c := range map[string]struct {
		change func(*infrav1.VSphereMachine)
		want   bool
	}{
		"waiting":         {func(*infrav1.VSphereMachine) {}, true},
		"not provisioned": {func(m *infrav1.VSphereMachine) { m.Status.Initialization = nil }, false},
		"new generation":  {func(m *infrav1.VSphereMachine) { m.Generation = 3 }, false},
		"task in flight":  {func(m *infrav1.VSphereMachine) { m.Status.TaskRef = "task-7" }, false},
		"not Ready":       {func(m *infrav1.VSphereMachine) { m.Status.Conditions[0].Status = metav1.ConditionFalse }, false},
		"asked off":       {func(m *infrav1.VSphereMachine) { m.Spec.PowerState = infrav1.PowerStatePoweredOff }, false},
		"still off":       {func(m *infrav1.VSphereMachine) { m.Status.PowerState = infrav1.PowerStatePoweredOff }, false},
		"has an address": {func(m *infrav1.VSphereMachine) {
			m.Status.Addresses = append(m.Status.Addresses, infrav1.MachineAddress{Type: "InternalIP", Address: "10.0.0.9"})
		}, false},
		"no Ready condition": {func(m *infrav1.VSphereMachine) { m.Status.Conditions = nil }, false},
		"a CAPI Machine's": {func(m *infrav1.VSphereMachine) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m3"}}
		}, false},
	} {
		m := waiting()
		c.change(m)
		if got := waitingForAddress(m); got != c.want {
			t.Errorf("%s: waitingForAddress = %v, want %v", name, got, c.want)
		}
	}
}

// TestUserDataSettled: the user data is read again unless the VM was built
// from the spec as it is and Cluster API has no part in the machine.
func TestUserDataSettled(t *testing.T) {
	built := func() *infrav1.VSphereMachine {
		m := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Generation: 1}}
		m.Status.Initialization = &infrav1.MachineInitialization{Provisioned: ptr.To(true)}
		m.Status.ObservedGeneration = 1
		return m
	}
	for name, c := range map[string]struct {
		change func(*infrav1.VSphereMachine)
		want   bool
	}{
		"built":         {func(*infrav1.VSphereMachine) {}, true},
		"not built yet": {func(m *infrav1.VSphereMachine) { m.Status.Initialization = nil }, false},
		"spec changed":  {func(m *infrav1.VSphereMachine) { m.Generation = 2 }, false},
		"a CAPI Machine's": {func(m *infrav1.VSphereMachine) {
			m.OwnerReferences = []metav1.OwnerReference{{APIVersion: "cluster.x-k8s.io/v1beta2", Kind: "Machine", Name: "m3"}}
		}, false},
		"a CAPI cluster's": {func(m *infrav1.VSphereMachine) { m.Labels = map[string]string{"cluster.x-k8s.io/cluster-name": "c3"} }, false},
	} {
		m := built()
		c.change(m)
		if got := userDataSettled(m); got != c.want {
			t.Errorf("%s: userDataSettled = %v, want %v", name, got, c.want)
		}
	}
}

// TestDeletionWhereBuilt (issue 31): a machine whose spec.failureDomain
// was edited after its VM was built is deleted where its status recorded
// the VM (a libvirt domain is looked up on that host only): the edit no
// longer lets the finalizer go with the domain left running elsewhere.
func TestDeletionWhereBuilt(t *testing.T) {
	p := &v1alpha1.Provider{Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{
		{Name: "kvm-01", Host: "kvm-01.lab"}, {Name: "kvm-02", Host: "kvm-02.lab"}}}}
	r := &MachineReconciler{Kind: libvirtmachines.MachineKind()}
	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
		Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "kvm-02"}}}
	if spec, _ := r.machineSpec(builtIn(m), p); spec.Location.Host != "kvm-02.lab" {
		t.Errorf("never built: deleted on %q, want the spec's kvm-02.lab", spec.Location.Host)
	}
	m.Status.FailureDomain = "kvm-01"
	if spec, _ := r.machineSpec(builtIn(m), p); spec.Location.Host != "kvm-01.lab" {
		t.Errorf("built on kvm-01, spec edited to kvm-02: deleted on %q, want kvm-01.lab", spec.Location.Host)
	}
	if m.Spec.FailureDomain != "kvm-02" {
		t.Errorf("the object itself was changed: %q", m.Spec.FailureDomain)
	}
}

// TestMachineSpecPower: how to power off comes from the machine's spec,
// and the time of a soft request in flight from its status, so the grace
// period runs from the recorded request across provider restarts. No
// grace leaves the backend's default; a grace of 0 still asks the guest
// first.
func TestMachineSpecPower(t *testing.T) {
	p := &v1alpha1.Provider{Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "kvm-01", Host: "kvm-01.lab"}}}}
	r := &MachineReconciler{Kind: libvirtmachines.MachineKind()}
	asked := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		name      string
		grace     *int32
		requested *metav1.Time
		wantGrace time.Duration
		wantAsked time.Time
	}{
		{"defaults", nil, nil, 0, time.Time{}},
		{"a grace and a request in flight", ptr.To[int32](30), &metav1.Time{Time: asked}, 30 * time.Second, asked},
		{"no grace", ptr.To[int32](0), nil, time.Nanosecond, time.Time{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
				Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "kvm-01",
					PowerState: infrav1.PowerStatePoweredOff, PowerOffMode: infrav1.PowerOffModeSoft, PowerOffGraceSeconds: tc.grace}},
				Status: infrav1.LibvirtMachineStatus{CommonMachineStatus: infrav1.CommonMachineStatus{SoftPowerOffTime: tc.requested}}}
			spec, _ := r.machineSpec(m, p)
			if spec.PowerState != infrav1.PowerStatePoweredOff || spec.PowerOffMode != infrav1.PowerOffModeSoft ||
				spec.PowerOffGrace != tc.wantGrace || !spec.SoftPowerOffTime.Equal(tc.wantAsked) {
				t.Errorf("power %s, mode %s, grace %s, asked %v; want PoweredOff, Soft, %s, %v", spec.PowerState, spec.PowerOffMode, spec.PowerOffGrace, spec.SoftPowerOffTime, tc.wantGrace, tc.wantAsked)
			}
		})
	}
}

// TestMachineSpecHostName (issue 32): the guest's host name is the
// machine's spec.hostName (a VirtualMachine's name, which its migration
// target keeps under another object name); without one it is made from
// the object's name, as for a machine written by hand or by Cluster API.
func TestMachineSpecHostName(t *testing.T) {
	p := &v1alpha1.Provider{Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "kvm-01", Host: "kvm-01.lab"}}}}
	r := &MachineReconciler{Kind: libvirtmachines.MachineKind()}
	for _, tc := range []struct{ name, hostName, want string }{
		{"web-0-1a2b3c4d", "web-0", "web-0"},
		{"web-0", "", "web-0"},
		{strings.Repeat("a", 62) + "-b", "", strings.Repeat("a", 62)},
	} {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: tc.name, Namespace: "team-a"},
			Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "kvm-01", HostName: tc.hostName}}}
		if spec, _ := r.machineSpec(m, p); spec.HostName != tc.want {
			t.Errorf("machine %s, spec.hostName %q: host name %q, want %q", tc.name, tc.hostName, spec.HostName, tc.want)
		}
	}
}

// TestBuiltSpec (issue 31): once status.location records where a VM is
// built, every call builds, converges and deletes it there, whatever its
// spec's location fields say since; each field edited since is named
// (LocationChanged), and a machine without a record is built where its
// spec says.
func TestBuiltSpec(t *testing.T) {
	p := &v1alpha1.Provider{Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{
		{Name: "kvm-01", Host: "kvm-01.lab"}, {Name: "kvm-02", Host: "kvm-02.lab"},
		{Name: "dc0-c0", Datacenter: "DC0", Cluster: "C0"}, {Name: "dc1-c1", Datacenter: "DC1", Cluster: "C1"}}}}
	libvirt := func(fd string, rec *infrav1.BuiltLocation) infrav1.Machine {
		m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: fd}}}
		m.Status.Location = rec
		return m
	}
	vsphere := func(fd, dc, cluster, folder string, rec *infrav1.BuiltLocation) infrav1.Machine {
		m := &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
			Spec: infrav1.VSphereMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: fd},
				Datacenter: dc, Cluster: cluster, Folder: folder}}
		m.Status.Location = rec
		return m
	}
	dc0 := &infrav1.BuiltLocation{FailureDomain: "dc0-c0", Datacenter: "DC0", Cluster: "C0", Options: map[string]string{"folder": "team-a"}}
	for name, c := range map[string]struct {
		kind       providers.MachineKind
		m          infrav1.Machine
		want       failuredomain.Location
		wantFolder string
		moved      []string
	}{
		"libvirt, not recorded": {libvirtmachines.MachineKind(), libvirt("kvm-02", nil), failuredomain.Location{Host: "kvm-02.lab"}, "", nil},
		"libvirt, recorded where the spec says": {libvirtmachines.MachineKind(),
			libvirt("kvm-01", &infrav1.BuiltLocation{FailureDomain: "kvm-01", Host: "kvm-01.lab"}), failuredomain.Location{Host: "kvm-01.lab"}, "", nil},
		"libvirt, failureDomain edited": {libvirtmachines.MachineKind(),
			libvirt("kvm-02", &infrav1.BuiltLocation{FailureDomain: "kvm-01", Host: "kvm-01.lab"}), failuredomain.Location{Host: "kvm-01.lab"}, "",
			[]string{"spec.failureDomain"}},
		"vsphere, recorded where the spec says": {vspheremachines.MachineKind(), vsphere("dc0-c0", "DC0", "C0", "team-a", dc0),
			failuredomain.Location{Datacenter: "DC0", Cluster: "C0"}, "team-a", nil},
		"vsphere, folder edited": {vspheremachines.MachineKind(), vsphere("dc0-c0", "DC0", "C0", "team-b", dc0),
			failuredomain.Location{Datacenter: "DC0", Cluster: "C0"}, "team-a", []string{"spec.folder"}},
		"vsphere, moved to another failure domain": {vspheremachines.MachineKind(), vsphere("dc1-c1", "DC1", "C1", "", dc0),
			failuredomain.Location{Datacenter: "DC0", Cluster: "C0"}, "team-a",
			[]string{"spec.datacenter, spec.cluster", "spec.failureDomain", "spec.folder"}},
		"vsphere, datacenter edited alone": {vspheremachines.MachineKind(), vsphere("dc0-c0", "DC1", "C0", "team-a", dc0),
			failuredomain.Location{Datacenter: "DC0", Cluster: "C0"}, "team-a", []string{"spec.datacenter, spec.cluster"}},
	} {
		r := &MachineReconciler{Kind: c.kind}
		before := c.m.DeepCopyObject()
		spec, _, moved := r.builtSpec(c.m, p)
		if spec.Location != c.want {
			t.Errorf("%s: built in %v, want %v", name, spec.Location, c.want)
		}
		if got := spec.Options[vspheremachines.OptionFolder]; got != c.wantFolder {
			t.Errorf("%s: built in folder %q, want %q", name, got, c.wantFolder)
		}
		if !slices.Equal(moved, c.moved) {
			t.Errorf("%s: moved %q, want %q", name, moved, c.moved)
		}
		if !apiequality.Semantic.DeepEqual(before, c.m) {
			t.Errorf("%s: the object itself was changed", name)
		}
	}
}

// TestBuiltLocation: the record holds the failure domain, the place and
// the location options the backend names (and no empty ones).
func TestBuiltLocation(t *testing.T) {
	fields := providers.Fields{LocationOptions: map[string]string{"folder": "spec.folder", "resourcePool": "spec.resourcePool"}}
	spec := providers.MachineSpec{Location: failuredomain.Location{Datacenter: "DC0", Cluster: "C0"},
		Options: map[string]string{"folder": "team-a", "resourcePool": "", "cpuHotAdd": "true"}}
	got := builtLocation("dc0-c0", spec, fields)
	want := &infrav1.BuiltLocation{FailureDomain: "dc0-c0", Datacenter: "DC0", Cluster: "C0", Options: map[string]string{"folder": "team-a"}}
	if !apiequality.Semantic.DeepEqual(got, want) {
		t.Errorf("builtLocation = %+v, want %+v", got, want)
	}
}

// TestMachineSpecGuestOS (issue 32): the machine's guest OS and
// architecture reach the backend's spec, whatever the kind.
func TestMachineSpecGuestOS(t *testing.T) {
	p := &v1alpha1.Provider{Status: v1alpha1.ProviderStatus{FailureDomains: []v1alpha1.FailureDomain{{Name: "kvm-01", Host: "kvm-01.lab"}}}}
	r := &MachineReconciler{Kind: libvirtmachines.MachineKind()}
	os := &infrav1.GuestOS{Family: infrav1.GuestOSFamilyLinux, Distribution: "debian", Version: "12"}
	m := &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a"},
		Spec: infrav1.LibvirtMachineSpec{CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: "kvm-01", GuestOS: os, Architecture: infrav1.ArchitectureAMD64}}}
	if spec, _ := r.machineSpec(m, p); spec.GuestOS == nil || *spec.GuestOS != *os || spec.Architecture != infrav1.ArchitectureAMD64 {
		t.Errorf("guest OS %+v, architecture %q; want %+v, amd64", spec.GuestOS, spec.Architecture, os)
	}
}

// TestNextRestart: a restart is sent once; one recorded as Sending and
// found again was interrupted and is not sent again; a VM not running is
// not reset.
func TestNextRestart(t *testing.T) {
	on, off := infrav1.PowerStatePoweredOn, infrav1.PowerStatePoweredOff
	rec := func(id string, phase infrav1.RestartPhase) *infrav1.RestartStatus {
		return &infrav1.RestartStatus{ID: id, Phase: phase}
	}
	for _, tc := range []struct {
		name  string
		want  string
		rec   *infrav1.RestartStatus
		power infrav1.PowerState
		step  restartStep
	}{
		{"none asked", "", nil, on, restartNothing},
		{"first restart", "a", nil, on, restartSend},
		{"a new one after a done one", "b", rec("a", infrav1.RestartDone), on, restartSend},
		{"done", "a", rec("a", infrav1.RestartDone), on, restartNothing},
		{"failed stays failed", "a", rec("a", infrav1.RestartFailed), on, restartNothing},
		{"interrupted while sending", "a", rec("a", infrav1.RestartSending), on, restartInterrupted},
		{"unknown stays unknown", "a", rec("a", infrav1.RestartUnknown), on, restartNothing},
		{"not running", "a", nil, off, restartNotRunning},
		{"interrupted, then powered off", "a", rec("a", infrav1.RestartSending), off, restartInterrupted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := nextRestart(tc.want, tc.rec, tc.power); got != tc.step {
				t.Errorf("nextRestart = %d, want %d", got, tc.step)
			}
		})
	}
}

// TestPlannedProviderID: a machine that never reached its backend gets the
// providerID its VM will have (SCHEME://UID) with its finalizer; one that
// has an ID, or was built before (its location recorded), keeps its own;
// a backend without a scheme plans none.
func TestPlannedProviderID(t *testing.T) {
	fresh := func() *infrav1.VSphereMachine {
		return &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: "m", Namespace: "team-a", UID: "6f1c0e2a-8b7d-4c55-9a0e-1d2c3b4a5f60"}}
	}
	withID, built := fresh(), fresh()
	withID.Spec.ProviderID = "vsphere://4210aa"
	built.Status.Location = &infrav1.BuiltLocation{FailureDomain: "dc0"}
	noScheme := vspheremachines.MachineKind()
	noScheme.ProviderIDScheme = ""
	for _, tc := range []struct {
		name string
		kind providers.MachineKind
		m    infrav1.Machine
		want string
		plan bool
	}{
		{"never built", vspheremachines.MachineKind(), fresh(), "vsphere://6f1c0e2a-8b7d-4c55-9a0e-1d2c3b4a5f60", true},
		{"libvirt", libvirtmachines.MachineKind(), &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{UID: "u-1"}}, "libvirt://u-1", true},
		{"has an ID", vspheremachines.MachineKind(), withID, "", false},
		{"built before", vspheremachines.MachineKind(), built, "", false},
		{"no scheme", noScheme, fresh(), "", false},
	} {
		if got, plan := plannedProviderID(tc.kind, tc.m); got != tc.want || plan != tc.plan {
			t.Errorf("%s: %q, %t; want %q, %t", tc.name, got, plan, tc.want, tc.plan)
		}
	}
}
