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

package proxmox

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestPluginSnapshots runs the built kubectl-banlieue (make build) as a
// process, with the environment's kubeconfig, where the controller and
// the Proxmox VE provider run on pvesim: snapshot --wait prints the
// snapshot Ready once the simulator holds it (with and without memory,
// the default name from the VM and the time), snapshots and snapshot
// --list show the table, completion offers the VM's ready snapshots,
// restore --wait prints Done after one rollback, and the failures exit 1
// with kubectl's error line: refusals by field path (no VM, no snapshot,
// the Provider's bound) and a snapshot and a restore the backend fails.
func TestPluginSnapshots(t *testing.T) {
	plugin := filepath.Join(filepath.Dir(kubectlBin), "kubectl-banlieue")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: build it first (make build)", err)
	}
	ctx := context.Background()
	p := proxmoxProvider(t, "plugsnap-proxmox", "proxmox-token", map[string]string{"plugsnap": "yes"})
	p.Spec.Capabilities.MaxSnapshotsPerVM = ptr.To[int32](3)
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitProvider(t, p.Name, "InventoryWalked")
	ensureImage(t)
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pve-plugsnap"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "plugsnap-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"plugsnap": "yes"}}}}}

	run := func(args ...string) (string, string, int) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		// -n right after the command, so that the word __complete
		// completes stays the last.
		cmd := exec.CommandContext(ctx, plugin, append([]string{args[0], "-n", ns}, args[1:]...)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.AdminKubeconfig)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		err := cmd.Run()
		var exit *exec.ExitError
		switch {
		case err == nil:
			return out.String(), errOut.String(), 0
		case errors.As(err, &exit):
			return out.String(), errOut.String(), exit.ExitCode()
		}
		t.Fatalf("kubectl-banlieue %s: %v", strings.Join(args, " "), err)
		return "", "", -1
	}
	succeeds := func(args ...string) string {
		t.Helper()
		out, errOut, code := run(args...)
		if code != 0 {
			t.Fatalf("kubectl-banlieue %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		}
		t.Logf("kubectl banlieue %s:\n%s", strings.Join(args, " "), out)
		return out
	}
	// fails wants exit 1, nothing on stdout but want (a regexp), and on
	// stderr a single error line matching errWant.
	fails := func(outWant, errWant string, args ...string) {
		t.Helper()
		out, errOut, code := run(args...)
		t.Logf("kubectl banlieue %s: exit %d\n%s%s", strings.Join(args, " "), code, out, errOut)
		if code != 1 || !regexp.MustCompile(`^`+outWant+`$`).MatchString(out) || !regexp.MustCompile(`^error: (?:`+errWant+`)\n$`).MatchString(errOut) {
			t.Errorf("kubectl-banlieue %s: exit %d, stdout %q, stderr %q; want exit 1, stdout %s and error: %s",
				strings.Join(args, " "), code, out, errOut, outWant, errWant)
		}
	}

	// Before the VM exists: refused by the API server, by field path.
	fails(``, `VirtualMachineSnapshot\.banlieue\.io "plugsnap-0-\d{8}-\d{6}" is invalid: spec\.vmName: Not found: "plugsnap-0"`,
		"snapshot", vm.Name, "--wait")

	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	powered(t, vm, "PoweredOn")
	vmid := machineVMID(t, vm)

	// Taken with memory, named; then without, named from the VM and the
	// time.
	out := succeeds("snapshot", vm.Name, "--name=plug-mem", "--memory", "--wait", "--timeout=2m")
	if !strings.HasPrefix(out, "virtualmachinesnapshot.banlieue.io/plug-mem created\n") ||
		!strings.HasSuffix(out, "\nvirtualmachinesnapshot.banlieue.io/plug-mem is Ready (with memory)\n") {
		t.Errorf("snapshot --memory --wait printed:\n%s", out)
	}
	out = succeeds("snapshot", vm.Name, "--wait", "--timeout=2m")
	m := regexp.MustCompile(`^virtualmachinesnapshot\.banlieue\.io/(plugsnap-0-\d{8}-\d{6}) created\n(?:.*\n)*virtualmachinesnapshot\.banlieue\.io/(\S+) is Ready \(disks only\)\n$`).FindStringSubmatch(out)
	if m == nil || m[1] != m[2] {
		t.Fatalf("snapshot --wait printed:\n%s", out)
	}
	disk := m[1]
	mem := newSnapshot("plug-mem", vm.Name, true)
	ready(t, mem)
	if names := backendSnapshots(vmid); len(names) != 2 {
		t.Errorf("%d snapshots on the simulator after two snapshot --wait, want 2: %v", len(names), names)
	}

	// The table, both ways, oldest first.
	out = succeeds("snapshots", vm.Name)
	for _, row := range []string{
		`^NAME\s+READY\s+REASON\s+CREATED\s+MEMORY\n`,
		`\nplug-mem\s+yes\s+Ready\s+\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ\s+yes\n` + regexp.QuoteMeta(disk) + `\s+yes\s+Ready\s+\S+Z\s+no\n$`,
	} {
		if !regexp.MustCompile(row).MatchString(out) {
			t.Errorf("snapshots does not match %s:\n%s", row, out)
		}
	}
	if list := succeeds("snapshot", vm.Name, "--list"); list != out {
		t.Errorf("snapshot --list printed\n%s\nsnapshots printed\n%s", list, out)
	}

	// Completion: the VM, then its snapshots a restore takes.
	out = succeeds("__complete", "restore", vm.Name, "")
	for _, want := range []string{"plug-mem\n", disk + "\n", ":4\n"} {
		if !strings.Contains(out, want) {
			t.Errorf("__complete restore %s lacks %q:\n%s", vm.Name, want, out)
		}
	}
	if out = succeeds("__complete", "restore", vm.Name, "plug-"); strings.Contains(out, disk) || !strings.Contains(out, "plug-mem\n") {
		t.Errorf("__complete restore %s plug-:\n%s", vm.Name, out)
	}
	for _, args := range [][]string{{"snapshot", "plugsnap-"}, {"restore", "plugsnap-"}, {"snapshots", "plugsnap-"}} {
		if out = succeeds(append([]string{"__complete"}, args...)...); !strings.Contains(out, vm.Name+"\n") {
			t.Errorf("__complete %s lacks the VM:\n%s", strings.Join(args, " "), out)
		}
	}

	// A restore to a snapshot that does not exist: refused, naming
	// spec.snapshotName.
	fails(``, `VirtualMachineRestore\.banlieue\.io "plugsnap-0-restore-\d{8}-\d{6}" is invalid: spec\.snapshotName: Not found: "no-such-snapshot"`,
		"restore", vm.Name, "no-such-snapshot", "--wait")

	// A restore to the disk-only snapshot: one rollback, Done, and the VM
	// runs again.
	rollbacks := func() int { return sim.Requests()["POST qemu snapshot rollback"] }
	rb := rollbacks()
	out = succeeds("restore", vm.Name, disk, "--name=plug-back", "--wait", "--timeout=2m")
	if !strings.HasPrefix(out, "virtualmachinerestore.banlieue.io/plug-back created\n") ||
		!strings.HasSuffix(out, "\nvirtualmachinerestore.banlieue.io/plug-back is Done: virtualmachine plugsnap-0 is at snapshot "+disk+"\n") {
		t.Errorf("restore --wait printed:\n%s", out)
	}
	if n := rollbacks() - rb; n != 1 {
		t.Errorf("%d rollback requests for one restore, want 1", n)
	}
	powered(t, vm, "PoweredOn")

	// The backend fails a snapshot: --wait says why and exits 1; the
	// snapshot stays, Failed, and counts toward the Provider's bound.
	sim.FailTasks("qmsnapshot", "snapshot feature is not available")
	fails(`virtualmachinesnapshot\.banlieue\.io/plug-fail created\n(?:.*\n)*`,
		`snapshot plug-fail of virtualmachine plugsnap-0 is Failed: .*snapshot feature is not available.*`,
		"snapshot", vm.Name, "--name=plug-fail", "--wait", "--timeout=2m")
	sim.FailTasks("qmsnapshot", "")
	fails(``, `VirtualMachineSnapshot\.banlieue\.io "plug-fourth" is invalid: spec\.vmName: Forbidden: .*maxSnapshotsPerVM.*`,
		"snapshot", vm.Name, "--name=plug-fourth")

	// The backend fails a rollback: restore --wait says why and exits 1.
	sim.FailTasks("qmrollback", "rollback failed: disk busy")
	fails(`virtualmachinerestore\.banlieue\.io/plug-back-2 created\n(?:.*\n)*`,
		`restore plug-back-2 of virtualmachine plugsnap-0 to snapshot plug-mem is Failed: .*rollback failed: disk busy.*`,
		"restore", vm.Name, "plug-mem", "--name=plug-back-2", "--wait", "--timeout=2m")
	sim.FailTasks("qmrollback", "")
	powered(t, vm, "PoweredOn")

	// Deleting the VM takes its snapshots, here and on the simulator.
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"plug-mem", disk, "plug-fail"} {
		gone(t, name, &v1alpha1.VirtualMachineSnapshot{})
	}
	gone(t, vm.Name, &v1alpha1.VirtualMachine{})
}
