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

package vsphere

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

// The provider crash scenarios (after lifecycle_test.go, before the tenant
// machine test, in file order). make test runs them small (one kill);
// make test-long (-long) runs them with tens of machines and several kills.

// crashMachine is a powered-on VSphereMachine handled by provider.
func crashMachine(name, provider string) *infrav1.VSphereMachine {
	return &infrav1.VSphereMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Annotations: map[string]string{infrav1.ProviderAnnotation: ns + "/" + provider}},
		Spec: infrav1.VSphereMachineSpec{Template: "ubuntu-22.04-cloudinit", Datacenter: "DC0", Cluster: "DC0_C0",
			CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOn}},
	}
}

func getMachine(name string) (*infrav1.VSphereMachine, error) {
	vsm := &infrav1.VSphereMachine{}
	return vsm, c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vsm)
}

// listMachines reads every VSphereMachine of the test namespace in one
// request, by name: a scan of tens of machines must take less than the
// seconds a task is in flight.
func listMachines() (map[string]*infrav1.VSphereMachine, error) {
	var list infrav1.VSphereMachineList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		return nil, err
	}
	out := make(map[string]*infrav1.VSphereMachine, len(list.Items))
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out, nil
}

func isReady(vsm *infrav1.VSphereMachine) bool {
	return meta.IsStatusConditionTrue(vsm.Status.Conditions, infrav1.ReadyCondition)
}

// killProviderWhen SIGKILLs the leading provider pod's container once
// inFlight finds a vCenter task it has started and recorded, and waits
// until the kubelet has started it again and it is ready. The leader is
// looked for once the task is in flight: after a kill, no replica leads
// until the dead one's Lease expires.
func killProviderWhen(t *testing.T, inFlight func() error) {
	t.Helper()
	ctx := context.Background()
	eventually(t, time.Minute, inFlight)
	leader, err := env.LeadingPod(ctx, ns, providerSelector, providerDeployment, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	took, err := env.CrashContainer(ctx, leader, 0, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("pod %s: the killed provider container running and ready again after %s", leader.Name, took.Round(100*time.Millisecond))
}

// vcTasksRunning counts the tasks of kind (a vSphere description ID such
// as VirtualMachine.powerOff) that vcsim has queued or running on the VMs
// of these machines.
func vcTasksRunning(ctx context.Context, kind string, machines []string) (int, error) {
	gc, err := vcsim.Login(ctx, vcURL, user, password)
	if err != nil {
		return 0, err
	}
	defer func() { _ = gc.Logout(ctx) }()
	f := find.NewFinder(gc.Client, false)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		return 0, err
	}
	f.SetDatacenter(dc)
	var refs []types.ManagedObjectReference
	for _, m := range machines {
		vm, err := f.VirtualMachine(ctx, providers.BackendName(ns, m))
		if err != nil {
			continue // destroyed already
		}
		refs = append(refs, vm.Reference())
	}
	if len(refs) == 0 {
		return 0, nil
	}
	pc := property.DefaultCollector(gc.Client)
	var vms []mo.VirtualMachine
	if err := pc.Retrieve(ctx, refs, []string{"recentTask"}, &vms); err != nil {
		return 0, err
	}
	var taskRefs []types.ManagedObjectReference
	for _, vm := range vms {
		taskRefs = append(taskRefs, vm.RecentTask...)
	}
	if len(taskRefs) == 0 {
		return 0, nil
	}
	var tasks []mo.Task
	if err := pc.Retrieve(ctx, taskRefs, []string{"info"}, &tasks); err != nil {
		return 0, err
	}
	n := 0
	for _, task := range tasks {
		if task.Info.DescriptionId == kind && (task.Info.State == types.TaskInfoStateQueued || task.Info.State == types.TaskInfoStateRunning) {
			n++
		}
	}
	return n, nil
}

// batches splits names into n consecutive batches of (nearly) equal size.
func batches(names []string, n int) [][]string {
	out := make([][]string, n)
	for i, name := range names {
		out[i*n/len(names)] = append(out[i*n/len(names)], name)
	}
	return out
}

func sigkills(n int) string {
	if n == 1 {
		return "SIGKILL"
	}
	return fmt.Sprintf("%d SIGKILLs", n)
}

// wantVCVMs checks that vcsim holds exactly the VMs of these machines
// (named <namespace>-<machine>) among those whose names start with prefix.
func wantVCVMs(t *testing.T, prefix string, machines []string) {
	t.Helper()
	want := make([]string, 0, len(machines))
	for _, m := range machines {
		want = append(want, providers.BackendName(ns, m))
	}
	slices.Sort(want)
	if got := vcVMNames(t, "DC0", providers.BackendName(ns, prefix)); !slices.Equal(got, want) {
		t.Errorf("vcsim VMs after the crash: %v, want exactly %v", got, want)
	}
}

// destroyVM powers off and destroys the VM name in dc behind the
// provider's back.
func destroyVM(t *testing.T, dc, name string) {
	t.Helper()
	ctx := context.Background()
	gc := vcLogin(t)
	f := find.NewFinder(gc.Client)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(d)
	vm, err := f.VirtualMachine(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if task, err := vm.PowerOff(ctx); err == nil {
		_ = task.Wait(ctx)
	}
	task, err := vm.Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		t.Fatalf("destroying %s: %v", name, err)
	}
}

// vcInstances counts every VM in vcsim, in all datacenters, by instance
// UUID, before any de-duplication: a machine cloned twice shows as 2,
// whatever the two VMs are called.
func vcInstances(t *testing.T) map[string]int {
	t.Helper()
	ctx := context.Background()
	gc := vcLogin(t)
	v, err := view.NewManager(gc.Client).CreateContainerView(ctx, gc.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
	if err != nil {
		t.Fatal(err)
	}
	defer v.Destroy(ctx)
	var vms []mo.VirtualMachine
	if err := v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"config.instanceUuid"}, &vms); err != nil {
		t.Fatal(err)
	}
	var uuids []string
	for _, vm := range vms {
		if vm.Config != nil {
			uuids = append(uuids, vm.Config.InstanceUuid)
		}
	}
	return count.Sightings(uuids)
}

// machineUIDs is the UID of each named machine: the instance UUID the
// provider gives its VM.
func machineUIDs(t *testing.T, names []string) []string {
	t.Helper()
	var uids []string
	for _, name := range names {
		vsm, err := getMachine(name)
		if err != nil {
			t.Fatal(err)
		}
		uids = append(uids, string(vsm.UID))
	}
	return uids
}

// vcLostAndDuplicated measures, for machines that must each have one VM,
// how many have one in vcsim (found), how many have none (lost) and how
// many VMs are extra copies (dup).
func vcLostAndDuplicated(t *testing.T, names []string) (found, lost, dup int) {
	t.Helper()
	uids := machineUIDs(t, names)
	mine := count.Only(vcInstances(t), uids)
	dup, dupUIDs := count.Duplicated(mine)
	missing := count.Missing(uids, mine)
	if len(missing) > 0 || dup > 0 {
		t.Errorf("vcsim by instance UUID: %d machines without a VM (%v), %d extra VMs (%v)", len(missing), missing, dup, dupUIDs)
	}
	return len(mine), len(missing), dup
}

// deleteAndWaitGone deletes the machines and waits until vcsim holds no VM
// with the prefix.
func deleteAndWaitGone(t *testing.T, prefix string, machines []string) {
	t.Helper()
	for _, name := range machines {
		if err := c.Delete(context.Background(), &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, func() error {
		if got := vcVMNames(t, "DC0", providers.BackendName(ns, prefix)); len(got) > 0 {
			return fmt.Errorf("vcsim still has %v", got)
		}
		return nil
	})
}

// TestCrashMidClone: the leading provider pod's container is SIGKILLed
// while clones are in flight (vcsim holds each clone for 2 s), the kubelet
// starts it again, and vcsim ends with exactly one VM per VSphereMachine;
// deleting them leaves none.
func TestCrashMidClone(t *testing.T) {
	ctx := context.Background()
	servingProvider(t, "crash-vsphere", nil)

	simulator.TaskDelay.MethodDelay = map[string]int{"CloneVm": 2000, "LockHandoff": 0}
	defer func() { simulator.TaskDelay.MethodDelay = nil }()
	// Eight workers clone a batch in a few seconds, so each kill gets its
	// own batch of machines, created after the previous restart: the kill
	// lands while that batch's clones are in flight (task recorded, not
	// Ready yet).
	n, kills := table.Size(3, 42), table.Size(1, 3)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("crash-%d", i)
	}
	for k, batch := range batches(names, kills) {
		for _, name := range batch {
			if err := c.Create(ctx, crashMachine(name, "crash-vsphere")); err != nil {
				t.Fatal(err)
			}
		}
		killProviderWhen(t, func() error {
			machines, err := listMachines()
			if err != nil {
				return err
			}
			for _, name := range batch {
				if vsm := machines[name]; vsm != nil && vsm.Status.TaskRef != "" && !isReady(vsm) {
					return nil
				}
			}
			return fmt.Errorf("no clone of batch %d in flight", k)
		})
	}
	eventually(t, time.Duration(table.Size(3, 6))*time.Minute, func() error {
		for _, name := range names {
			vsm, err := getMachine(name)
			if err != nil {
				return err
			}
			if !isReady(vsm) {
				return fmt.Errorf("%s not Ready: %+v", vsm.Name, vsm.Status.Conditions)
			}
		}
		return nil
	})
	wantVCVMs(t, "crash-", names)
	for _, name := range names {
		vsm, err := getMachine(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := vcVM(t, "DC0", providers.BackendName(ns, vsm.Name)); m == nil || m.Config.InstanceUuid != string(vsm.UID) || vsm.Status.TaskRef != "" {
			t.Errorf("%s: vcsim VM %v, want instance UUID %s and no task left in status (%q)", vsm.Name, m != nil, vsm.UID, vsm.Status.TaskRef)
		}
	}
	cloned, lost, dup := vcLostAndDuplicated(t, names)
	reliability.Record(t, table.Row{Scenario: "vSphere provider container SIGKILLed mid-clone (task recorded in status.taskRef), restarted by the kubelet: exactly one VM per VSphereMachine (counted by instance UUID)",
		Operations: cloned, Faults: sigkills(kills) + " of the leading provider pod's container during clones", Lost: table.Counted(lost), Dup: table.Counted(dup)})
	simulator.TaskDelay.MethodDelay = nil
	deleteAndWaitGone(t, "crash-", names)
}

// TestCrashMidDeleteAndPowerChange: the leading provider pod's container
// is SIGKILLed while it destroys VMs and powers others off (vcsim holds a
// destroy 4 s, a power-off 2 s: the power-offs, asked for once a destroy
// runs, fit inside it). After the kubelet restarts it vcsim ends with
// exactly the VMs whose VSphereMachines exist, in the power state they ask
// for.
func TestCrashMidDeleteAndPowerChange(t *testing.T) {
	ctx := context.Background()
	servingProvider(t, "crash2-vsphere", nil)
	each, kills := table.Size(2, 21), table.Size(1, 3)
	var deleted, poweredOff []string
	for i := range each {
		deleted = append(deleted, fmt.Sprintf("crash2-del-%d", i))
		poweredOff = append(poweredOff, fmt.Sprintf("crash2-off-%d", i))
	}
	for _, name := range append(slices.Clone(deleted), poweredOff...) {
		if err := c.Create(ctx, crashMachine(name, "crash2-vsphere")); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Duration(table.Size(2, 5))*time.Minute, func() error {
		for _, name := range append(slices.Clone(deleted), poweredOff...) {
			vsm, err := getMachine(name)
			if err != nil {
				return err
			}
			if !isReady(vsm) {
				return fmt.Errorf("%s not Ready", name)
			}
		}
		return nil
	})
	deletedUIDs := machineUIDs(t, deleted)

	simulator.TaskDelay.MethodDelay = map[string]int{"Destroy": 4000, "PowerOff": 2000, "LockHandoff": 0}
	defer func() { simulator.TaskDelay.MethodDelay = nil }()
	// As with clones, each kill gets its own batch of destroys and
	// power-offs, asked for after the previous restart. The power-offs are
	// asked for once a destroy runs, so that the kill lands while vCenter
	// runs both.
	offBatches := batches(poweredOff, kills)
	for k, batch := range batches(deleted, kills) {
		destroying := func() (bool, error) {
			machines, err := listMachines()
			if err != nil {
				return false, err
			}
			return slices.ContainsFunc(batch, func(name string) bool {
				return machines[name] != nil && machines[name].Status.TaskRef != ""
			}), nil
		}
		for _, name := range batch {
			if err := c.Delete(ctx, &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, time.Minute, func() error {
			if ok, err := destroying(); err != nil || !ok {
				return fmt.Errorf("batch %d: no destroy in flight (%v)", k, err)
			}
			return nil
		})
		for _, name := range offBatches[k] {
			vsm, err := getMachine(name)
			if err != nil {
				t.Fatal(err)
			}
			patch := client.MergeFrom(vsm.DeepCopy())
			vsm.Spec.PowerState = infrav1.PowerStatePoweredOff
			if err := c.Patch(ctx, vsm, patch); err != nil {
				t.Fatal(err)
			}
		}
		// A destroy (task recorded on a deleted machine that still exists)
		// and a power-off (a PowerOff task vcsim runs on one of the batch's
		// VMs) are both in flight.
		killProviderWhen(t, func() error {
			d, err := destroying()
			if err != nil {
				return err
			}
			n, err := vcTasksRunning(ctx, "VirtualMachine.powerOff", offBatches[k])
			if err != nil {
				return err
			}
			if !d || n == 0 {
				return fmt.Errorf("batch %d: destroy in flight %v, power-offs running %d", k, d, n)
			}
			return nil
		})
	}
	eventually(t, time.Duration(table.Size(3, 6))*time.Minute, func() error {
		for _, name := range deleted {
			if _, err := getMachine(name); err == nil {
				return fmt.Errorf("%s still exists", name)
			}
		}
		for _, name := range poweredOff {
			vsm, err := getMachine(name)
			if err != nil {
				return err
			}
			if vsm.Status.PowerState != infrav1.PowerStatePoweredOff || !isReady(vsm) {
				return fmt.Errorf("%s is %s, Ready: %v", name, vsm.Status.PowerState, isReady(vsm))
			}
		}
		return nil
	})
	// vcsim holds exactly the VMs of the machines that still exist, powered
	// off, with their instance UUIDs: the operations done are the destroys
	// and power-offs vcsim shows.
	var done count.Ops
	wantVCVMs(t, "crash2-", poweredOff)
	for _, name := range poweredOff {
		vsm, err := getMachine(name)
		if err != nil {
			t.Fatal(err)
		}
		if m := vcVM(t, "DC0", providers.BackendName(ns, name)); m == nil || m.Config.InstanceUuid != string(vsm.UID) || m.Runtime.PowerState != "poweredOff" {
			t.Errorf("%s in vcsim: %v", name, m != nil)
		} else {
			done.Answered("power off " + name)
		}
	}
	seen := vcInstances(t)
	for _, uid := range count.Missing(deletedUIDs, seen) {
		done.Answered("destroy " + uid)
	}
	if left := count.Only(seen, deletedUIDs); len(left) > 0 {
		t.Errorf("vcsim still holds the VMs of deleted machines (by instance UUID): %v", left)
	}
	_, lost, dup := vcLostAndDuplicated(t, poweredOff)
	reliability.Record(t, table.Row{Scenario: "vSphere provider container SIGKILLed mid-destroy and mid-power-off, restarted by the kubelet: vcsim holds exactly the VMs whose VSphereMachines exist, in their power state (counted by instance UUID)",
		Operations: done.N(), Faults: sigkills(kills) + " of the leading provider pod's container during destroys and power-offs", Lost: table.Counted(lost), Dup: table.Counted(dup)})
	simulator.TaskDelay.MethodDelay = nil
	deleteAndWaitGone(t, "crash2-", poweredOff)
}
