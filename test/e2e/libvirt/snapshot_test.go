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

package libvirt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"github.com/firestoned/banlieue/pkg/providers"
)

// markerSector is where on its boot disk the guest writes its markers:
// past what the image uses (a 1 GiB disk has 2097152 sectors), read and
// written raw, so no file system cache stands between them and the disk.
const markerSector = 2000000

// TestSnapshotRestoresTheGuestsDisk (issue 34) on the real libvirtd and
// guest, through the API and the console only: the guest writes a marker
// to its disk, a VirtualMachineSnapshot is taken, the guest writes
// another, a VirtualMachineRestore runs, and the guest, booted again on
// the snapshot's disks, reads the first marker back. Deleting the
// snapshot removes it from the domain before the object goes.
func TestSnapshotRestoresTheGuestsDisk(t *testing.T) {
	ctx := context.Background()
	vm, _ := bootedGuest(t, "snapshot")
	first, second := "FIRST-"+strings.ToUpper(randomHex(t)), "SECOND-"+strings.ToUpper(randomHex(t))

	s := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, false)
	writeMarker(t, s, first)
	snap := &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: "before-upgrade", Namespace: ns},
		Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: vm.Name}}
	if err := c.Create(ctx, snap); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), snap); err != nil {
			return err
		}
		if !snap.Status.ReadyToUse {
			return fmt.Errorf("snapshot not ready: %+v", meta.FindStatusCondition(snap.Status.Conditions, v1alpha1.SnapshotReady))
		}
		return nil
	})
	if names := domainSnapshots(t, vm); len(names) != 1 || names[0] != snap.Status.BackendName {
		t.Errorf("domain snapshots %v, want only %s", names, snap.Status.BackendName)
	}
	writeMarker(t, s, second)
	readMarker(t, s, second)

	restore := &v1alpha1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: "undo-upgrade", Namespace: ns},
		Spec: v1alpha1.VirtualMachineRestoreSpec{VMName: vm.Name, SnapshotName: snap.Name}}
	if err := c.Create(ctx, restore); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(restore), restore); err != nil {
			return err
		}
		if restore.Status.Phase != v1alpha1.RestoreDone {
			return fmt.Errorf("restore %s: %s", restore.Status.Phase, restore.Status.Message)
		}
		return nil
	})
	// The snapshot holds no memory: the guest boots again on its disks.
	s.Leave()
	eventually(t, 3*time.Minute, func() error {
		again := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, true)
		defer again.Leave()
		again.TypeLine(markerRead)
		if err := again.WaitOrEnd("MARKER="+first, 15*time.Second); err != nil {
			if strings.Contains(again.Text(), "MARKER="+second) {
				t.Fatalf("the guest reads the second marker after the restore: %q", again.Text())
			}
			return err
		}
		return nil
	})

	if err := c.Delete(ctx, snap); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(snap), snap); !apierrors.IsNotFound(err) {
			return fmt.Errorf("snapshot object still there (finalizers %v): %v", snap.Finalizers, err)
		}
		return nil
	})
	if names := domainSnapshots(t, vm); len(names) != 0 {
		t.Errorf("domain snapshots %v after the snapshot was deleted, want none", names)
	}
}

// markerRead prints the marker sector's text after MARKER=.
var markerRead = fmt.Sprintf("echo MARKER=$(dd if=/dev/vda bs=512 skip=%d count=1 2>/dev/null | tr -cd 'A-Z0-9-')", markerSector)

// writeMarker writes marker to the guest's disk and flushes it.
func writeMarker(t *testing.T, s *consoletest.Session, marker string) {
	t.Helper()
	s.TypeLine(fmt.Sprintf("printf '%%-512s' %s | dd of=/dev/vda bs=512 seek=%d count=1 conv=notrunc,fsync 2>/dev/null && sync && echo WROTE$((40+2))-%s",
		marker, markerSector, marker))
	// Worked out by the guest's shell: not the typed line's echo.
	s.Wait(t, "WROTE42-"+marker, 30*time.Second)
}

func readMarker(t *testing.T, s *consoletest.Session, want string) {
	t.Helper()
	s.TypeLine(markerRead)
	s.Wait(t, "MARKER="+want, 30*time.Second)
}

// domainSnapshots lists the snapshots libvirtd holds of vm's domain.
func domainSnapshots(t *testing.T, vm *v1alpha1.VirtualMachine) []string {
	t.Helper()
	l := lv(t)
	dom, err := l.DomainLookupByName(providers.BackendName(vm.Namespace, vm.Name))
	if err != nil {
		t.Fatal(err)
	}
	snaps, _, err := l.DomainListAllSnapshots(dom, -1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, s := range snaps {
		out = append(out, s.Name)
	}
	return out
}
