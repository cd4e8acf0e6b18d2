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
	"testing"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
)

// TestFaultsAsVCenterSendsThem: the faults the backend tolerates (a VM
// destroyed already, a folder made already) are recognised as vCenter
// sends them over SOAP and in a task's error, values rather than
// pointers: a type assertion on the pointer type never matched them.
func TestFaultsAsVCenterSendsThem(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	f := find.NewFinder(c.gc.Client, true)
	dc, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(dc)
	vms, err := f.VirtualMachineList(ctx, "*")
	if err != nil || len(vms) == 0 {
		t.Fatalf("VMs of DC0: %v (%d)", err, len(vms))
	}
	vm := vms[0]
	if task, err := vm.PowerOff(ctx); err == nil {
		_ = task.Wait(ctx)
	}
	destroy := func() error {
		task, err := vm.Destroy(ctx)
		if err != nil {
			return err
		}
		_, err = awaitTask(ctx, task)
		return err
	}
	if err := destroy(); err != nil {
		t.Fatal(err)
	}
	err = destroy()
	if err == nil || !fault.Is(err, &types.ManagedObjectNotFound{}) {
		t.Errorf("destroying a VM twice: %#v; want ManagedObjectNotFound recognised", err)
	}

	dir := "[LocalDS_0] banlieue-fault-test"
	fm := object.NewFileManager(c.gc.Client)
	if err := fm.MakeDirectory(ctx, dir, dc, false); err != nil {
		t.Fatal(err)
	}
	err = fm.MakeDirectory(ctx, dir, dc, false)
	if err == nil || !fault.Is(err, &types.FileAlreadyExists{}) {
		t.Errorf("making a folder twice: %#v; want FileAlreadyExists recognised", err)
	}
}
