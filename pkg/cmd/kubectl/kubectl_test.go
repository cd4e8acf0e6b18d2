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

package kubectl

import (
	"bytes"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers/virtualmachine"
)

func TestResolvedRows(t *testing.T) {
	spec := v1alpha1.ResolvedVirtualMachineSpec{
		Class: "db-prod-large", ClassGeneration: 3,
		CPUs:      v1alpha1.ResolvedInt32{Value: 8, From: v1alpha1.ProvenanceClass},
		MemoryMiB: v1alpha1.ResolvedInt64{Value: 65536, From: v1alpha1.ProvenanceOverride},
		Disks: []v1alpha1.ResolvedDisk{
			{Name: "root", SizeGiB: v1alpha1.ResolvedInt64{Value: 100, From: v1alpha1.ProvenanceClass}, StorageClass: "gold", Provisioning: "Thin"},
			{Name: "data", SizeGiB: v1alpha1.ResolvedInt64{Value: 2000, From: v1alpha1.ProvenanceOverride}},
		},
		Interfaces: []v1alpha1.ResolvedInterface{
			{Name: "eth0", NetworkClass: "prod", Mode: v1alpha1.IPAMStatic, Static: &v1alpha1.StaticIPConfig{Address: "192.0.2.10", Prefix: ptr.To[int32](24)}, From: v1alpha1.ProvenanceOverride},
			{Name: "eth1", Mode: v1alpha1.IPAMDHCP, From: v1alpha1.ProvenanceDefault},
		},
		FirmwareFrom: v1alpha1.ProvenanceDefault,
		Image:        v1alpha1.ResolvedImage{Name: "ubuntu", OSDistribution: "ubuntu", OSVersion: "22.04", Imported: &v1alpha1.ResolvedImport{Revision: "r1"}},
		PowerState:   v1alpha1.PowerStatePoweredOn,
		UserData:     &v1alpha1.UserData{SecretRef: &v1alpha1.KeySelector{Name: "cloudinit"}},
	}
	want := [][]string{
		{"FIELD", "VALUE", "FROM"},
		{"cpus", "8", "class"},
		{"memoryMiB", "65536", "override"},
		{"disks[root]", "100GiB (storageClass gold, Thin)", "class"},
		{"disks[data]", "2000GiB", "override"},
		{"interfaces[eth0]", "Static 192.0.2.10/24 (networkClass prod)", "override"},
		{"interfaces[eth1]", "DHCP", "default"},
		{"firmware", "-", "default"},
		{"tpmEnabled", "false", "-"},
		{"features", "-", "-"},
		{"image", "ubuntu (ubuntu 22.04) revision r1", "-"},
		{"powerState", "PoweredOn", "-"},
		{"userData", "Secret cloudinit", "-"},
	}
	assertRows(t, resolvedRows(&spec), want)

	// A class edited since: both configurations, the current one after
	// saying what it is.
	var out bytes.Buffer
	r := &v1alpha1.ResolvedVirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}, Spec: spec}
	cur := spec
	cur.ClassGeneration, cur.CPUs = 4, v1alpha1.ResolvedInt32{Value: 16, From: v1alpha1.ProvenanceClass}
	r.Current = &cur
	if err := printResolved(&out, r); err != nil {
		t.Fatal(err)
	}
	text := out.String()
	for _, want := range []string{"VirtualMachine prod/db: class db-prod-large (generation 3)", "banlieue.io/update-class=true", "(generation 4)"} {
		if !strings.Contains(text, want) {
			t.Errorf("printResolved lacks %q:\n%s", want, text)
		}
	}
	pinned, current := regexp.MustCompile(`cpus\s+8\s+class`).FindStringIndex(text), regexp.MustCompile(`cpus\s+16\s+class`).FindStringIndex(text)
	if pinned == nil || current == nil || pinned[0] > current[0] {
		t.Errorf("printResolved: pinned then current rows not as expected:\n%s", text)
	}
}

func TestPlacementRows(t *testing.T) {
	got := placementRows([]v1alpha1.ProviderPlacement{
		{Provider: "lab", Fits: true, FailureDomains: []v1alpha1.FailureDomainPlacement{
			{Name: "host-a", Fits: true, Load: 3},
			{Name: "host-b", Fits: false, Message: "zone=b does not match zone=a"},
		}},
		{Provider: "other/prod", Fits: false, Reason: "NoProviderMatched", Message: "label role=db missing"},
	})
	assertRows(t, got, [][]string{
		{"PROVIDER", "FAILURE-DOMAIN", "FITS", "LOAD", "REASON", "MESSAGE"},
		{"lab", "-", "yes", "-", "-", "-"},
		{"lab", "host-a", "yes", "3", "-", "-"},
		{"lab", "host-b", "no", "0", "-", "zone=b does not match zone=a"},
		{"other/prod", "-", "no", "-", "NoProviderMatched", "label role=db missing"},
	})

	var out bytes.Buffer
	if err := printPlacement(&out, &v1alpha1.VirtualMachinePlacement{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"},
		Result: v1alpha1.PlacementResult{Fits: false, Reason: "ImageNotReady", Message: "not imported on lab",
			Current: &v1alpha1.ScheduledPlacement{Provider: "lab", FailureDomain: "host-a"}}}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VirtualMachine prod/db does not fit: ImageNotReady: not imported on lab\n",
		"Current: Provider lab, failure domain host-a\n", "Choice:  <none>\n", "PROVIDER   FAILURE-DOMAIN"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("printPlacement lacks %q:\n%s", want, out.String())
		}
	}
}

func TestImageRows(t *testing.T) {
	got := imageRows([]v1alpha1.VMImage{
		{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu"}, Status: v1alpha1.VMImageStatus{Revision: "r2", PerProvider: []v1alpha1.ImageProviderStatus{
			{Provider: "ns/lab", FailureDomains: []v1alpha1.ImageFailureDomainStatus{
				{Name: "host-a", Phase: v1alpha1.ImagePhaseImporting, Revision: "r2", BytesDone: 512 << 20, BytesTotal: 2 << 30, Reason: "Importing"},
				{Name: "host-b", Phase: v1alpha1.ImagePhaseFailed, Revision: "r2", BytesDone: 1000, Reason: "ChecksumMismatch", Message: "sha256 abc, want def"},
				{Name: "host-c", Phase: v1alpha1.ImagePhaseReady, Revision: "r1"},
			}},
			{Provider: "ns/vc", Ready: false, Reason: "TemplateNotFound", Message: "no template ubuntu"},
			{Provider: "ns/pve", Ready: true},
		}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "fresh"}},
	})
	assertRows(t, got, [][]string{
		{"IMAGE", "PROVIDER", "FAILURE-DOMAIN", "PHASE", "PROGRESS", "REVISION", "REASON"},
		{"ubuntu", "ns/lab", "host-a", "Importing", "512.0MiB/2.0GiB (25%)", "r2", "Importing"},
		{"ubuntu", "ns/lab", "host-b", "Failed", "1000B", "r2", "ChecksumMismatch: sha256 abc, want def"},
		{"ubuntu", "ns/lab", "host-c", "Ready", "-", "r1", "-"},
		{"ubuntu", "ns/vc", "-", "NotReady", "-", "-", "TemplateNotFound: no template ubuntu"},
		{"ubuntu", "ns/pve", "-", "Ready", "-", "-", "-"},
		{"fresh", "<none>", "-", "-", "-", "-", "no Provider reports it yet"},
	})
}

func TestBytesText(t *testing.T) {
	for n, want := range map[int64]string{0: "0B", 1023: "1023B", 1024: "1.0KiB", 1536: "1.5KiB", 5 << 30: "5.0GiB", 3 << 40: "3.0TiB"} {
		if got := bytesText(n); got != want {
			t.Errorf("bytesText(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestTableAligns(t *testing.T) {
	var out bytes.Buffer
	if err := table(&out, [][]string{{"A", "B"}, {"long value", "x\ty\nz"}}); err != nil {
		t.Fatal(err)
	}
	// kubectl's spacing (3 spaces at least between columns); a tab or
	// newline in a cell does not break the row.
	if want := "A            B\nlong value   x y z\n"; out.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", out.String(), want)
	}
}

func TestMigrationFollower(t *testing.T) {
	at := func(sec int64) metav1.Time { return metav1.NewTime(time.Unix(sec, 0)) }
	cond := func(status metav1.ConditionStatus, reason, msg string, sec int64) metav1.Condition {
		return metav1.Condition{Type: v1alpha1.VirtualMachineMigrating, Status: status, Reason: reason, Message: msg, LastTransitionTime: at(sec)}
	}
	vm := func(c *metav1.Condition, m *v1alpha1.MigrationStatus) *v1alpha1.VirtualMachine {
		v := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "db"}}
		if c != nil {
			v.Status.Conditions = []metav1.Condition{*c}
		}
		v.Status.Migration = m
		return v
	}
	old := cond(metav1.ConditionFalse, "Migrated", "moved from a to b", 100)
	mig := &v1alpha1.MigrationStatus{Target: v1alpha1.ScheduledPlacement{Provider: "c", FailureDomain: "fd"},
		InfrastructureRef: v1alpha1.InfrastructureReference{Kind: "LibvirtMachine", Name: "db-1234"}}

	type step struct {
		vm       *v1alpha1.VirtualMachine
		line     string
		done     bool
		errMatch string
	}
	for _, tc := range []struct {
		name   string
		before *metav1.Condition
		steps  []step
	}{{
		name:   "an earlier migration's Migrated is not this one's end",
		before: &old,
		steps: []step{
			{vm: vm(&old, nil)},
			{vm: vm(ptr.To(cond(metav1.ConditionTrue, "Requested", "recreating", 200)), mig),
				line: "Migrating=True Requested: recreating [target c/fd, machine LibvirtMachine db-1234]"},
			{vm: vm(ptr.To(cond(metav1.ConditionTrue, "Provisioning", "waiting", 200)), mig), line: "Migrating=True Provisioning: waiting [target c/fd, machine LibvirtMachine db-1234]"},
			{vm: vm(ptr.To(cond(metav1.ConditionTrue, "Provisioning", "waiting", 200)), mig)},
			{vm: vm(ptr.To(cond(metav1.ConditionFalse, "Migrated", "moved from b to c", 300)), nil), line: "Migrating=False Migrated: moved from b to c", done: true},
		},
	}, {
		name: "no other placement fits",
		steps: []step{
			{vm: vm(nil, nil)},
			{vm: vm(ptr.To(cond(metav1.ConditionFalse, "NoTarget", "no other placement fits", 200)), nil),
				line: "Migrating=False NoTarget: no other placement fits", done: true, errMatch: "was not migrated: NoTarget: no other placement fits"},
		},
	}, {
		name:   "the same failure again, told by its transition time",
		before: ptr.To(cond(metav1.ConditionFalse, "MigrationTimedOut", "not Ready", 100)),
		steps: []step{
			{vm: vm(ptr.To(cond(metav1.ConditionFalse, "MigrationTimedOut", "not Ready", 100)), nil)},
			{vm: vm(ptr.To(cond(metav1.ConditionFalse, "MigrationTimedOut", "not Ready", 400)), nil),
				line: "Migrating=False MigrationTimedOut: not Ready", done: true, errMatch: "MigrationTimedOut"},
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			f := &migrationFollower{before: tc.before}
			for i, s := range tc.steps {
				if line := f.progress(s.vm); line != s.line {
					t.Errorf("step %d: line %q, want %q", i, line, s.line)
				}
				done, err := f.done(s.vm)
				if done != s.done {
					t.Errorf("step %d: done %v, want %v", i, done, s.done)
				}
				if (err == nil) != (s.errMatch == "") || err != nil && !strings.Contains(err.Error(), s.errMatch) {
					t.Errorf("step %d: error %v, want one with %q", i, err, s.errMatch)
				}
			}
		})
	}
}

// The plugin names the controller's annotation and reason without
// linking the controllers.
func TestMigrateAnnotationIsTheControllers(t *testing.T) {
	if migrateAnnotation != virtualmachine.MigrateAnnotation {
		t.Errorf("plugin annotation %q, controller's %q", migrateAnnotation, virtualmachine.MigrateAnnotation)
	}
}

func TestDetacher(t *testing.T) {
	cancelled := make(chan struct{})
	d := &detacher{in: strings.NewReader("ls\r\x1dafter"), cancel: func() { close(cancelled) }}
	got, err := io.ReadAll(d)
	if err != nil {
		t.Fatal(err)
	}
	// What precedes Ctrl+] reaches the guest, nothing after it does.
	if string(got) != "ls\r" || !d.done() {
		t.Errorf("read %q (detached %v), want %q and detached", got, d.done(), "ls\r")
	}
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Error("the stream was not cancelled after the detach")
	}
	plain := &detacher{in: strings.NewReader("echo hi\n")}
	if got, _ := io.ReadAll(plain); string(got) != "echo hi\n" || plain.done() {
		t.Errorf("plain input: %q (detached %v)", got, plain.done())
	}
}

func TestConsoleURL(t *testing.T) {
	for _, tc := range []struct {
		host     string
		takeover bool
		want     string
	}{
		{"https://10.0.0.1:6443", false, "https://10.0.0.1:6443/apis/banlieue.io/v1alpha1/namespaces/prod/virtualmachines/db/console"},
		{"https://lb.example/k8s/", true, "https://lb.example/k8s/apis/banlieue.io/v1alpha1/namespaces/prod/virtualmachines/db/console?takeover=true"},
		// Without a scheme, as client-go itself would reach it (no TLS settings: http).
		{"10.0.0.1:6443", false, "http://10.0.0.1:6443/apis/banlieue.io/v1alpha1/namespaces/prod/virtualmachines/db/console"},
	} {
		cfg := &rest.Config{Host: tc.host}
		if strings.HasPrefix(tc.host, "https") {
			cfg.Insecure = true
		}
		got, err := consoleURL(cfg, "prod", "db", tc.takeover)
		if err != nil || got != tc.want {
			t.Errorf("consoleURL(%q): %q, %v; want %q", tc.host, got, err, tc.want)
		}
	}
}

func TestConsoleErrorSaysTheServersReason(t *testing.T) {
	// The server ended an established session: its reason.
	err := consoleError(errors.New("the console was taken over by alice"))
	if err.Error() != "console session ended: the console was taken over by alice" {
		t.Errorf("consoleError: %v", err)
	}
	// The server refused the attach: its Status, as kubectl prints one,
	// not the websocket upgrade that carried it.
	busy := apierrors.NewConflict(schema.GroupResource{Resource: "console"}, "db", errors.New("in use by alice"))
	err = consoleError(&httpstream.UpgradeFailureError{Cause: busy})
	if err.Error() != busy.Error() || !apierrors.IsConflict(err) {
		t.Errorf("consoleError of a refused attach: %v", err)
	}
	err = consoleError(&httpstream.UpgradeFailureError{Cause: errors.New("bad handshake (502 Bad Gateway)")})
	if err.Error() != "could not attach to the console: bad handshake (502 Bad Gateway)" {
		t.Errorf("consoleError of a failed upgrade: %v", err)
	}
}

func assertRows(t *testing.T, got, want [][]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d rows, want %d:\n%q", len(got), len(want), got)
	}
	for i := range min(len(got), len(want)) {
		if strings.Join(got[i], "|") != strings.Join(want[i], "|") {
			t.Errorf("row %d:\n got %q\nwant %q", i, got[i], want[i])
		}
	}
}
