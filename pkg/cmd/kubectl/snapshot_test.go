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
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	clienttesting "k8s.io/client-go/testing"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/generated/clientset/versioned/fake"
	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
)

func readyCond(reason, msg string) []metav1.Condition {
	status := metav1.ConditionFalse
	if reason == v1alpha1.SnapshotReasonReady {
		status = metav1.ConditionTrue
	}
	return []metav1.Condition{{Type: v1alpha1.SnapshotReady, Status: status, Reason: reason, Message: msg}}
}

func TestSnapshotRows(t *testing.T) {
	taken := metav1.NewTime(time.Date(2026, 12, 5, 6, 17, 1, 0, time.FixedZone("CET", 3600)))
	got := snapshotRows([]v1alpha1.VirtualMachineSnapshot{
		{ObjectMeta: metav1.ObjectMeta{Name: "db-01-20261205-051700"}, Status: v1alpha1.VirtualMachineSnapshotStatus{
			ReadyToUse: true, CreationTime: &taken, Memory: true, Conditions: readyCond("Ready", "the backend holds snapshot banlieue-1")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "disk-only"}, Status: v1alpha1.VirtualMachineSnapshotStatus{
			ReadyToUse: true, CreationTime: &taken, Conditions: readyCond("Ready", "the backend holds snapshot banlieue-2")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "taking"}, Spec: v1alpha1.VirtualMachineSnapshotSpec{IncludeMemory: true},
			Status: v1alpha1.VirtualMachineSnapshotStatus{Conditions: readyCond("Creating", "the backend is taking it")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "moved"}, Status: v1alpha1.VirtualMachineSnapshotStatus{
			CreationTime: &taken, Conditions: readyCond("Stale", "the VM was recreated")}},
		{ObjectMeta: metav1.ObjectMeta{Name: "new"}},
	})
	assertRows(t, got, [][]string{
		{"NAME", "READY", "REASON", "CREATED", "MEMORY"},
		{"db-01-20261205-051700", "yes", "Ready", "2026-12-05T05:17:01Z", "yes"},
		{"disk-only", "yes", "Ready", "2026-12-05T05:17:01Z", "no"},
		{"taking", "no", "Creating: the backend is taking it", "-", "-"},
		{"moved", "no", "Stale: the VM was recreated", "2026-12-05T05:17:01Z", "no"},
		{"new", "no", "-", "-", "-"},
	})
}

func TestDefaultName(t *testing.T) {
	at := time.Date(2026, 12, 5, 7, 3, 9, 0, time.FixedZone("CET", 3600))
	if name, gen := defaultName("db-01", at); name != "db-01-20261205-060309" || gen != "" {
		t.Errorf("defaultName(db-01) = %q, %q", name, gen)
	}
	long := strings.Repeat("a", 240)
	if name, gen := defaultName(long, at); name != "" || gen != long+"-" {
		t.Errorf("defaultName of a long VM name = %q, %q; want a generateName", name, gen)
	}
}

func TestSnapshotFollower(t *testing.T) {
	snap := func(ready bool, reason, msg string) *v1alpha1.VirtualMachineSnapshot {
		s := &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "s"}, Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: "db"}}
		s.Status.ReadyToUse = ready
		if reason != "" {
			s.Status.Conditions = readyCond(reason, msg)
		}
		return s
	}
	f := &snapshotFollower{}
	for i, step := range []struct {
		s        *v1alpha1.VirtualMachineSnapshot
		line     string
		done     bool
		errMatch string
	}{
		{s: snap(false, "", "")},
		{s: snap(false, "Pending", "the VM has no machine yet"), line: "Pending: the VM has no machine yet"},
		{s: snap(false, "Creating", "asked of the provider"), line: "Creating: asked of the provider"},
		{s: snap(false, "Creating", "asked of the provider")},
		{s: snap(false, "Creating", "the backend is taking it"), line: "Creating: the backend is taking it"},
		{s: snap(true, "Ready", "the backend holds snapshot x"), done: true},
	} {
		if line := f.progress(step.s); line != step.line {
			t.Errorf("step %d: line %q, want %q", i, line, step.line)
		}
		done, err := snapshotSettled(step.s)
		if done != step.done || err != nil {
			t.Errorf("step %d: settled %v, %v; want %v", i, done, err, step.done)
		}
	}
	for _, reason := range []string{"Failed", "Stale", "LimitReached", "Unsupported"} {
		s := snap(false, reason, "why")
		if line := (&snapshotFollower{}).progress(s); line != "" {
			t.Errorf("%s: progress %q, want none (the error says it)", reason, line)
		}
		done, err := snapshotSettled(s)
		if want := "snapshot s of virtualmachine db is " + reason + ": why"; !done || err == nil || err.Error() != want {
			t.Errorf("%s: settled %v, %v; want the error %q", reason, done, err, want)
		}
	}
	if done, err := snapshotSettled(snap(false, "Deleting", "removing")); done || err != nil {
		t.Errorf("Deleting: settled %v, %v; want to wait (the deletion itself ends the wait)", done, err)
	}
}

func TestRestoreFollower(t *testing.T) {
	rs := func(phase v1alpha1.RestorePhase, msg string) *v1alpha1.VirtualMachineRestore {
		return &v1alpha1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "r"},
			Spec:   v1alpha1.VirtualMachineRestoreSpec{VMName: "db", SnapshotName: "s"},
			Status: v1alpha1.VirtualMachineRestoreStatus{Phase: phase, Message: msg}}
	}
	f := &restoreFollower{}
	for i, step := range []struct {
		r    *v1alpha1.VirtualMachineRestore
		line string
		done bool
	}{
		{r: rs("Pending", "")},
		{r: rs("Pending", "asked of the provider"), line: "Pending: asked of the provider"},
		{r: rs("PoweringOff", "the backend reverts a stopped VM"), line: "PoweringOff: the backend reverts a stopped VM"},
		{r: rs("Restoring", ""), line: "Restoring"},
		{r: rs("Restoring", "")},
		{r: rs("Done", "rolled back"), done: true},
	} {
		if line := f.progress(step.r); line != step.line {
			t.Errorf("step %d: line %q, want %q", i, line, step.line)
		}
		if done, err := restoreSettled(step.r); done != step.done || err != nil {
			t.Errorf("step %d: settled %v, %v; want %v", i, done, err, step.done)
		}
	}
	for _, phase := range []v1alpha1.RestorePhase{"Failed", "Unknown"} {
		done, err := restoreSettled(rs(phase, "the backend said no"))
		if want := "restore r of virtualmachine db to snapshot s is " + string(phase) + ": the backend said no"; !done || err == nil || err.Error() != want {
			t.Errorf("%s: settled %v, %v; want the error %q", phase, done, err, want)
		}
	}
}

func TestRestorableNames(t *testing.T) {
	now := metav1.Now()
	snaps := []v1alpha1.VirtualMachineSnapshot{
		{ObjectMeta: metav1.ObjectMeta{Name: "db-a"}, Status: v1alpha1.VirtualMachineSnapshotStatus{ReadyToUse: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db-b"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "db-c", DeletionTimestamp: &now}, Status: v1alpha1.VirtualMachineSnapshotStatus{ReadyToUse: true}},
		{ObjectMeta: metav1.ObjectMeta{Name: "other"}, Status: v1alpha1.VirtualMachineSnapshotStatus{ReadyToUse: true}},
	}
	if got := strings.Join(restorableNames(snaps, "db-"), ","); got != "db-a" {
		t.Errorf("restorableNames(db-) = %q, want db-a (ready, not being deleted)", got)
	}
	if got := strings.Join(restorableNames(snaps, ""), ","); got != "db-a,other" {
		t.Errorf("restorableNames() = %q", got)
	}
}

// playController stands in for the snapshot controller on a fake
// clientset: it writes the object's status, again every few
// milliseconds (so that a watch started after the first write sees it),
// until stop.
func playController(t *testing.T, cs *fake.Clientset, gvr schema.GroupVersionResource, ns, name string, set func(runtime.Object)) (stop func()) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		tick := time.NewTicker(20 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			obj, err := cs.Tracker().Get(gvr, ns, name)
			if err != nil {
				continue
			}
			obj = obj.DeepCopyObject()
			set(obj)
			_ = cs.Tracker().Update(gvr, obj, ns)
		}
	}()
	return func() { close(done) }
}

// The fake's watch sends no initial events: its typed clients say so,
// as its Clientset does, and are listed first.
type fakeSnapshots struct {
	banlieuev1alpha1.VirtualMachineSnapshotInterface
}

func (fakeSnapshots) IsWatchListSemanticsUnSupported() bool { return true }

type fakeRestores struct {
	banlieuev1alpha1.VirtualMachineRestoreInterface
}

func (fakeRestores) IsWatchListSemanticsUnSupported() bool { return true }

var (
	snapshotsGVR = v1alpha1.SchemeGroupVersion.WithResource("virtualmachinesnapshots")
	restoresGVR  = v1alpha1.SchemeGroupVersion.WithResource("virtualmachinerestores")
)

func TestTakeSnapshotWaits(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 17, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		status  v1alpha1.VirtualMachineSnapshotStatus
		out     string
		errText string
	}{{
		name:   "ready with memory",
		status: v1alpha1.VirtualMachineSnapshotStatus{ReadyToUse: true, Memory: true, Conditions: readyCond("Ready", "taken")},
		out:    "virtualmachinesnapshot.banlieue.io/db-20261205-061700 created\nvirtualmachinesnapshot.banlieue.io/db-20261205-061700 is Ready (with memory)\n",
	}, {
		name:    "failed",
		status:  v1alpha1.VirtualMachineSnapshotStatus{Conditions: readyCond("Failed", "snapshot feature is not available")},
		out:     "virtualmachinesnapshot.banlieue.io/db-20261205-061700 created\n",
		errText: "snapshot db-20261205-061700 of virtualmachine db is Failed: snapshot feature is not available",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			cs := fake.NewSimpleClientset()
			stop := playController(t, cs, snapshotsGVR, "prod", "db-20261205-061700", func(obj runtime.Object) {
				obj.(*v1alpha1.VirtualMachineSnapshot).Status = tc.status
			})
			defer stop()
			var out bytes.Buffer
			err := takeSnapshot(context.Background(), fakeSnapshots{cs.BanlieueV1alpha1().VirtualMachineSnapshots("prod")}, Streams{Out: &out},
				"db", &snapshotOptions{memory: true, wait: true, timeout: 30 * time.Second}, at)
			if (err == nil) != (tc.errText == "") || err != nil && err.Error() != tc.errText {
				t.Errorf("error %v, want %q", err, tc.errText)
			}
			if out.String() != tc.out {
				t.Errorf("printed %q, want %q", out.String(), tc.out)
			}
			s, err := cs.BanlieueV1alpha1().VirtualMachineSnapshots("prod").Get(context.Background(), "db-20261205-061700", metav1.GetOptions{})
			if err != nil || s.Spec.VMName != "db" || !s.Spec.IncludeMemory {
				t.Errorf("created %+v, %v; want a snapshot of db with memory", s, err)
			}
		})
	}

	// Nothing takes it: --wait gives up, saying what it is.
	cs := fake.NewSimpleClientset()
	err := takeSnapshot(context.Background(), fakeSnapshots{cs.BanlieueV1alpha1().VirtualMachineSnapshots("prod")}, Streams{Out: &bytes.Buffer{}},
		"db", &snapshotOptions{name: "mine", wait: true, timeout: 300 * time.Millisecond}, at)
	if err == nil || err.Error() != "timed out after 300ms waiting for snapshot mine of virtualmachine db to be ready: it is not taken up yet (no Ready condition)" {
		t.Errorf("a wait nothing ends: %v", err)
	}
}

func TestRestoreWaits(t *testing.T) {
	at := time.Date(2026, 12, 5, 6, 20, 0, 0, time.UTC)
	const name = "db-restore-20261205-062000"
	for _, tc := range []struct {
		phase   v1alpha1.RestorePhase
		out     string
		errText string
	}{
		{phase: "Done", out: "virtualmachinerestore.banlieue.io/" + name + " created\nvirtualmachinerestore.banlieue.io/" + name + " is Done: virtualmachine db is at snapshot s1\n"},
		{phase: "Unknown", out: "virtualmachinerestore.banlieue.io/" + name + " created\n",
			errText: "restore " + name + " of virtualmachine db to snapshot s1 is Unknown: the provider stopped while asking"},
	} {
		t.Run(string(tc.phase), func(t *testing.T) {
			cs := fake.NewSimpleClientset()
			stop := playController(t, cs, restoresGVR, "prod", name, func(obj runtime.Object) {
				r := obj.(*v1alpha1.VirtualMachineRestore)
				r.Status.Phase = tc.phase
				if tc.phase != "Done" {
					r.Status.Message = "the provider stopped while asking"
				}
			})
			defer stop()
			var out bytes.Buffer
			err := restore(context.Background(), fakeRestores{cs.BanlieueV1alpha1().VirtualMachineRestores("prod")}, Streams{Out: &out},
				"db", "s1", &restoreOptions{wait: true, timeout: 30 * time.Second}, at)
			if (err == nil) != (tc.errText == "") || err != nil && err.Error() != tc.errText {
				t.Errorf("error %v, want %q", err, tc.errText)
			}
			if out.String() != tc.out {
				t.Errorf("printed %q, want %q", out.String(), tc.out)
			}
		})
	}
}

// A refusal is the server's error, untouched: Execute prints it as
// kubectl does, and nothing claims a restore was created.
func TestRestoreRefusedIsTheServersError(t *testing.T) {
	cs := fake.NewSimpleClientset()
	refusal := apierrors.NewInvalid(v1alpha1.SchemeGroupVersion.WithKind("VirtualMachineRestore").GroupKind(), "r",
		field.ErrorList{field.NotFound(field.NewPath("spec", "snapshotName"), "nope")})
	cs.PrependReactor("create", "virtualmachinerestores", func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, refusal
	})
	var out bytes.Buffer
	err := restore(context.Background(), fakeRestores{cs.BanlieueV1alpha1().VirtualMachineRestores("prod")}, Streams{Out: &out},
		"db", "nope", &restoreOptions{name: "r", wait: true, timeout: time.Second}, time.Now())
	if err != refusal || out.Len() != 0 {
		t.Errorf("restore refused: %v, printed %q; want the server's error alone", err, out.String())
	}
	if want := `VirtualMachineRestore.banlieue.io "r" is invalid: spec.snapshotName: Not found: "nope"`; err.Error() != want {
		t.Errorf("the refusal reads %q, want %q", err.Error(), want)
	}
}

func TestSnapshotsOfOneVMOldestFirst(t *testing.T) {
	mk := func(name, vm string, sec int64) *v1alpha1.VirtualMachineSnapshot {
		return &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "prod", CreationTimestamp: metav1.Unix(sec, 0)},
			Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: vm}}
	}
	cs := fake.NewSimpleClientset(mk("a-late", "db", 300), mk("b-early", "db", 100), mk("c-other", "web", 50), mk("d-early", "db", 100),
		&v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: "prod"}},
		&v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "prod"}})
	var out, errOut bytes.Buffer
	if err := listSnapshots(context.Background(), cs.BanlieueV1alpha1(), "prod", Streams{Out: &out, ErrOut: &errOut}, "db"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n")[1:] {
		names = append(names, strings.Fields(line)[0])
	}
	if got := strings.Join(names, ","); got != "b-early,d-early,a-late" {
		t.Errorf("snapshots of db: %s, want b-early,d-early,a-late\n%s", got, out.String())
	}
	out.Reset()
	if err := listSnapshots(context.Background(), cs.BanlieueV1alpha1(), "prod", Streams{Out: &out, ErrOut: &errOut}, "empty"); err != nil ||
		out.Len() != 0 || errOut.String() != "No snapshots of virtualmachine empty found in prod namespace.\n" {
		t.Errorf("no snapshots: %v, stdout %q, stderr %q", err, out.String(), errOut.String())
	}
	if err := listSnapshots(context.Background(), cs.BanlieueV1alpha1(), "prod", Streams{Out: &out, ErrOut: &errOut}, "nope"); !apierrors.IsNotFound(err) {
		t.Errorf("snapshots of a VM that does not exist: %v, want NotFound", err)
	}
}

// What the command line gets wrong is said before the cluster is asked,
// as kubectl says it, with exit code 1.
func TestSnapshotCommandLine(t *testing.T) {
	for _, tc := range []struct {
		args []string
		err  string
	}{
		{[]string{"snapshot", "db", "--list", "--memory"}, "error: --list shows the VM's snapshots: --memory does not go with it\n"},
		{[]string{"snapshot"}, "error: accepts 1 arg(s), received 0\n"},
		{[]string{"restore", "db"}, "error: accepts 2 arg(s), received 1\n"},
		{[]string{"snapshots", "db", "web"}, "error: accepts 1 arg(s), received 2\n"},
	} {
		var out, errOut bytes.Buffer
		code := Execute(context.Background(), tc.args, Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut})
		if code != 1 || errOut.String() != tc.err || out.Len() != 0 {
			t.Errorf("%s: exit %d, stdout %q, stderr %q; want 1 and %q", strings.Join(tc.args, " "), code, out.String(), errOut.String(), tc.err)
		}
	}
}
