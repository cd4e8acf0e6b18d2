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
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/providers"
)

// TestPluginOnLibvirt runs kubectl-banlieue as a process where the
// controller and the libvirt provider run, so what it follows is what
// they write: stop --wait and start --wait see the real guest's power
// state; restart waits for the provider's Done and the guest boots
// again; images shows the image Ready in the Provider's failure domain;
// migrate recreates the VM on a second Provider of the same libvirtd and
// prints Migrated.
func TestPluginOnLibvirt(t *testing.T) {
	plugin := filepath.Join(filepath.Dir(kubectlBin), "kubectl-banlieue")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: build it first (make build)", err)
	}
	ctx := context.Background()
	vm, p := bootedGuest(t, "plugin-ops")
	domain := providers.BackendName(ns, vm.Name)
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(plugin, append(args, "-n", ns)...)
		cmd.Env = append(os.Environ(), "KUBECONFIG="+env.AdminKubeconfig)
		var out, errOut bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errOut
		if err := cmd.Run(); err != nil {
			t.Fatalf("kubectl-banlieue %s: %v\n%s%s", strings.Join(args, " "), err, out.String(), errOut.String())
		}
		return out.String()
	}

	if out := run("stop", vm.Name, "--wait", "--timeout=3m"); !strings.Contains(out, "is PoweredOff") {
		t.Errorf("stop --wait printed %q", out)
	}
	if out := run("start", vm.Name, "--wait", "--timeout=3m"); !strings.Contains(out, "is PoweredOn") {
		t.Errorf("start --wait printed %q", out)
	}
	boots := func() int { return strings.Count(daemon.SerialLog(domain), "BANLIEUE-READY") }
	eventually(t, 2*time.Minute, func() error {
		if n := boots(); n < 2 {
			return fmt.Errorf("%d boots after a stop and a start, want 2", n)
		}
		return nil
	})
	before := boots()
	if out := run("restart", vm.Name, "--timeout=3m"); !regexp.MustCompile(`restart \S+ Done\n$`).MatchString(out) {
		t.Errorf("restart printed %q", out)
	}
	eventually(t, 2*time.Minute, func() error {
		if n := boots(); n != before+1 {
			return fmt.Errorf("%d boots after the restart, want %d", n, before+1)
		}
		return nil
	})

	out := run("images", vm.Spec.ImageRef.Name)
	if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(vm.Spec.ImageRef.Name) + `\s+` + regexp.QuoteMeta(ns+"/"+p.Name) + `\s+\S+\s+Ready\b`).MatchString(out) {
		t.Errorf("images does not show the image Ready on %s:\n%s", p.Name, out)
	}

	// A second Provider of the same libvirtd, which the VM's selector
	// matches: the migration's target.
	other := libvirtProvider("plugin-ops-2-libvirt", map[string]string{"role": "plugin-ops"})
	if err := c.Create(ctx, other); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), other) })
	waitProviderReady(t, other.Name)
	out = run("migrate", vm.Name, "--timeout=4m")
	t.Logf("migrate printed:\n%s", out)
	if !strings.Contains(out, "Migrated: ") {
		t.Errorf("migrate printed no Migrated line:\n%s", out)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if vm.Status.Scheduled == nil || vm.Status.Scheduled.Provider != other.Name {
		t.Errorf("after migrate the VM is scheduled on %+v, want %s", vm.Status.Scheduled, other.Name)
	}
}
