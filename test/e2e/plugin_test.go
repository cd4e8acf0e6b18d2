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

package e2e

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
)

// TestKubectlPlugin runs the built kubectl-banlieue (make build) as a
// user does, a process reading the environment's kubeconfig, against
// kube-apiserver aggregating banlieue. No controller runs here: where a
// command follows a VM's status, the test writes that status as the
// controller would, through the status subresource.
func TestKubectlPlugin(t *testing.T) {
	plugin := filepath.Join(binDir, "kubectl-banlieue")
	if _, err := os.Stat(plugin); err != nil {
		t.Fatalf("%v: build it first (make build)", err)
	}
	const ns = "banlieue-system"
	mustKC(t, "apply", "-f", "artifacts/examples/")
	mustKCIn(t, `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: plugin-vm, namespace: banlieue-system}
spec:
  classRef: {name: db-prod-large}
  imageRef: {name: ubuntu-22.04-cloudinit}
`, "apply", "-f", "-")
	t.Cleanup(func() { kc(t, "delete", "vm", "plugin-vm", "-n", ns, "--ignore-not-found") })

	t.Run("resolved prints each field with its provenance", func(t *testing.T) {
		out := mustPlugin(t, plugin, "resolved", "db-prod-02", "-n", ns)
		t.Logf("resolved printed:\n%s", out)
		for _, row := range []string{
			`VirtualMachine banlieue-system/db-prod-02: class db-prod-large`,
			`(?m)^FIELD\s+VALUE\s+FROM$`,
			`(?m)^cpus\s+8\s+class$`,
			`(?m)^memoryMiB\s+65536\s+override$`,
			`(?m)^disks\[data\]\s+2000GiB \(storageClass gold, eagerZeroed\)\s+override$`,
			`(?m)^interfaces\[eth0\]\s+Static 192\.0\.2\.90/24 \(networkClass prod\)\s+override$`,
		} {
			if !regexp.MustCompile(row).MatchString(out) {
				t.Errorf("resolved does not match %s:\n%s", row, out)
			}
		}
	})

	t.Run("placement explains each Provider", func(t *testing.T) {
		out := mustPlugin(t, plugin, "placement", "plugin-vm", "-n", ns)
		t.Logf("placement printed:\n%s", out)
		for _, row := range []string{
			`VirtualMachine banlieue-system/plugin-vm (fits|does not fit): \S+`,
			`(?m)^Current: <none>$`,
			`(?m)^PROVIDER\s+FAILURE-DOMAIN\s+FITS\s+LOAD\s+REASON\s+MESSAGE$`,
			// The example Provider has no backend behind it here: it
			// cannot be the one that fits.
			`(?m)^prod-vsphere\s+-\s+no\s+-\s+\S+`,
		} {
			if !regexp.MustCompile(row).MatchString(out) {
				t.Errorf("placement does not match %s:\n%s", row, out)
			}
		}
	})

	t.Run("stop and start set spec.desiredPowerState; --wait follows status.powerState", func(t *testing.T) {
		out := mustPlugin(t, plugin, "stop", "plugin-vm", "-n", ns)
		if !strings.Contains(out, "desiredPowerState set to PoweredOff") {
			t.Errorf("stop printed %q", out)
		}
		if got := mustKC(t, "get", "vm", "plugin-vm", "-n", ns, "-o", "jsonpath={.spec.desiredPowerState}"); got != "PoweredOff" {
			t.Errorf("after stop, spec.desiredPowerState is %q", got)
		}
		// Nothing reports the power state: --wait gives up, saying what
		// the VM reports.
		_, errOut, err := runPlugin(t, plugin, "stop", "plugin-vm", "-n", ns, "--wait", "--timeout=2s")
		if err == nil || !strings.HasPrefix(errOut, "error: timed out after 2s waiting for virtualmachine plugin-vm to be PoweredOff: it reports <none>") {
			t.Errorf("stop --wait without a controller: %v, stderr %q", err, errOut)
		}

		done := make(chan result, 1)
		go func() {
			out, errOut, err := runPlugin(t, plugin, "start", "plugin-vm", "-n", ns, "--wait", "--timeout=1m")
			done <- result{out, errOut, err}
		}()
		eventually(t, 30*time.Second, func() error {
			if got, _, _ := kc(t, "get", "vm", "plugin-vm", "-n", ns, "-o", "jsonpath={.spec.desiredPowerState}"); got != "PoweredOn" {
				return fmt.Errorf("spec.desiredPowerState %q", got)
			}
			return nil
		})
		select {
		case r := <-done:
			t.Fatalf("start --wait returned before the VM reported PoweredOn: %v %q %q", r.err, r.out, r.errOut)
		default:
		}
		// Play the backend: the VM reports PoweredOn.
		mustKC(t, "patch", "vm", "plugin-vm", "-n", ns, "--subresource=status", "--type=merge", "-p", `{"status":{"powerState":"PoweredOn"}}`)
		r := <-done
		if r.err != nil || !strings.Contains(r.out, "virtualmachine.banlieue.io/plugin-vm is PoweredOn") {
			t.Errorf("start --wait: %v, stdout %q, stderr %q", r.err, r.out, r.errOut)
		}
	})

	t.Run("migrate annotates the VM and follows the Migrating condition", func(t *testing.T) {
		_, errOut, err := runPlugin(t, plugin, "migrate", "plugin-vm", "-n", ns)
		if err == nil || !strings.Contains(errOut, "error: virtualmachine plugin-vm is not placed yet") {
			t.Errorf("migrate of an unplaced VM: %v, stderr %q", err, errOut)
		}
		now := time.Now().UTC().Format(time.RFC3339)
		mustKC(t, "patch", "vm", "plugin-vm", "-n", ns, "--subresource=status", "--type=merge", "-p",
			fmt.Sprintf(`{"status":{"scheduled":{"provider":"prod-vsphere","failureDomain":"dc1-c1"},"conditions":[{"type":"Migrating","status":"False","reason":"Migrated","message":"an earlier one","lastTransitionTime":%q}]}}`, now))

		done := make(chan result, 1)
		go func() {
			out, errOut, err := runPlugin(t, plugin, "migrate", "plugin-vm", "-n", ns, "--timeout=1m")
			done <- result{out, errOut, err}
		}()
		eventually(t, 30*time.Second, func() error {
			if got, _, _ := kc(t, "get", "vm", "plugin-vm", "-n", ns, "-o", `jsonpath={.metadata.annotations.banlieue\.io/migrate}`); got != "true" {
				return fmt.Errorf("annotation banlieue.io/migrate=%q", got)
			}
			return nil
		})
		// Play the controller: the migration starts, then is done. The
		// earlier Migrated condition did not end the command.
		time.Sleep(time.Second)
		select {
		case r := <-done:
			t.Fatalf("migrate returned on the earlier migration's condition: %v %q %q", r.err, r.out, r.errOut)
		default:
		}
		later := time.Now().UTC().Add(time.Second).Format(time.RFC3339)
		mustKC(t, "patch", "vm", "plugin-vm", "-n", ns, "--subresource=status", "--type=merge", "-p",
			fmt.Sprintf(`{"status":{"migration":{"target":{"provider":"lab","failureDomain":"host-a"},"infrastructureRef":{"apiGroup":"infrastructure.banlieue.io","kind":"LibvirtMachine","name":"plugin-vm-1"},"reason":"Requested"},"conditions":[{"type":"Migrating","status":"True","reason":"Requested","message":"recreating the VM on Provider lab","lastTransitionTime":%q}]}}`, later))
		mustKC(t, "patch", "vm", "plugin-vm", "-n", ns, "--subresource=status", "--type=merge", "-p",
			fmt.Sprintf(`{"status":{"migration":null,"scheduled":{"provider":"lab","failureDomain":"host-a"},"conditions":[{"type":"Migrating","status":"False","reason":"Migrated","message":"moved from Provider prod-vsphere to Provider lab","lastTransitionTime":%q}]}}`, later))
		var r result
		select {
		case r = <-done:
		case <-time.After(time.Minute):
			t.Fatal("migrate did not return after Migrated")
		}
		if r.err != nil {
			t.Fatalf("migrate: %v, stdout %q, stderr %q", r.err, r.out, r.errOut)
		}
		for _, want := range []string{
			"virtualmachine.banlieue.io/plugin-vm annotated banlieue.io/migrate=true\n",
			"Migrated: moved from Provider prod-vsphere to Provider lab\n",
		} {
			if !strings.Contains(r.out, want) {
				t.Errorf("migrate output lacks %q:\n%s", want, r.out)
			}
		}
		// The Migrating=True step is printed when the watch saw it (two
		// patches in a row may reach it as one change).
		t.Logf("migrate printed:\n%s", r.out)

		// A migration that ends without moving fails the command with its reason.
		mustKC(t, "annotate", "vm", "plugin-vm", "-n", ns, "banlieue.io/migrate-")
		go func() {
			out, errOut, err := runPlugin(t, plugin, "migrate", "plugin-vm", "-n", ns, "--timeout=1m")
			done <- result{out, errOut, err}
		}()
		eventually(t, 30*time.Second, func() error {
			if got, _, _ := kc(t, "get", "vm", "plugin-vm", "-n", ns, "-o", `jsonpath={.metadata.annotations.banlieue\.io/migrate}`); got != "true" {
				return fmt.Errorf("annotation banlieue.io/migrate=%q", got)
			}
			return nil
		})
		mustKC(t, "patch", "vm", "plugin-vm", "-n", ns, "--subresource=status", "--type=merge", "-p",
			fmt.Sprintf(`{"status":{"conditions":[{"type":"Migrating","status":"False","reason":"NoTarget","message":"no other placement fits","lastTransitionTime":%q}]}}`, time.Now().UTC().Add(2*time.Second).Format(time.RFC3339)))
		r = <-done
		if r.err == nil || !strings.Contains(r.errOut, "error: virtualmachine plugin-vm was not migrated: NoTarget: no other placement fits") {
			t.Errorf("migrate with no target: %v, stdout %q, stderr %q", r.err, r.out, r.errOut)
		}
	})

	t.Run("images shows per-failure-domain progress", func(t *testing.T) {
		mustKCIn(t, `apiVersion: banlieue.io/v1alpha1
kind: VMImage
metadata: {name: plugin-image}
spec:
  osFamily: linux
  sources:
    - providerClass: vsphere
      kind: Template
      ref: plugin-image
`, "apply", "-f", "-")
		t.Cleanup(func() { kc(t, "delete", "vmimage", "plugin-image", "--ignore-not-found") })
		out := mustPlugin(t, plugin, "images", "plugin-image")
		if !regexp.MustCompile(`(?m)^plugin-image\s+<none>\s+-\s+-\s+-\s+-\s+no Provider reports it yet$`).MatchString(out) {
			t.Errorf("images of an image nothing reports:\n%s", out)
		}
		// Play a provider: one failure domain importing, one failed.
		mustKC(t, "patch", "vmimage", "plugin-image", "--subresource=status", "--type=merge", "-p",
			`{"status":{"perProvider":[{"provider":"banlieue-system/lab","ready":false,"reason":"Importing","failureDomains":[`+
				`{"name":"host-a","phase":"Importing","revision":"r1","bytesDone":536870912,"bytesTotal":2147483648,"reason":"Importing"},`+
				`{"name":"host-b","phase":"Failed","revision":"r1","reason":"ChecksumMismatch","message":"sha256 differs"}]}]}}`)
		out = mustPlugin(t, plugin, "images", "plugin-image")
		for _, row := range []string{
			`(?m)^IMAGE\s+PROVIDER\s+FAILURE-DOMAIN\s+PHASE\s+PROGRESS\s+REVISION\s+REASON$`,
			`(?m)^plugin-image\s+banlieue-system/lab\s+host-a\s+Importing\s+512\.0MiB/2\.0GiB \(25%\)\s+r1\s+Importing$`,
			`(?m)^plugin-image\s+banlieue-system/lab\s+host-b\s+Failed\s+-\s+r1\s+ChecksumMismatch: sha256 differs$`,
		} {
			if !regexp.MustCompile(row).MatchString(out) {
				t.Errorf("images does not match %s:\n%s", row, out)
			}
		}
		// Without a name: every image, this one among them.
		if all := mustPlugin(t, plugin, "images"); !strings.Contains(all, "plugin-image") || !strings.Contains(all, "ubuntu-22.04-cloudinit") {
			t.Errorf("images without a name:\n%s", all)
		}
	})

	t.Run("errors: on stderr as kubectl prints them, a non-zero exit", func(t *testing.T) {
		for _, args := range [][]string{
			{"resolved", "no-such-vm", "-n", ns},
			{"start", "no-such-vm", "-n", ns},
			{"console", "no-such-vm", "-n", ns},
			{"images", "no-such-image"},
		} {
			out, errOut, err := runPlugin(t, plugin, args...)
			if err == nil || !regexp.MustCompile(`^error: .*"no-such-[a-z]+" not found\n$`).MatchString(errOut) || out != "" {
				t.Errorf("%s: %v, stdout %q, stderr %q; want a non-zero exit and error: ... not found", strings.Join(args, " "), err, out, errOut)
			}
		}
		// A VM without a machine has no console: the server's reason.
		_, errOut, err := runPlugin(t, plugin, "console", "plugin-vm", "-n", ns)
		if err == nil || !strings.HasPrefix(errOut, "error: ") || !strings.Contains(errOut, "no machine yet") {
			t.Errorf("console of a VM without a machine: %v, stderr %q", err, errOut)
		}
		t.Logf("console of a VM without a machine: %s", errOut)
		// Another user's credentials are theirs: kubectl's --as.
		_, errOut, err = runPlugin(t, plugin, "resolved", "plugin-vm", "-n", ns, "--as=mallory")
		if err == nil || !strings.Contains(errOut, `User "mallory" cannot get resource "virtualmachines/resolved"`) {
			t.Errorf("resolved --as=mallory: %v, stderr %q", err, errOut)
		}
	})

	t.Run("completion: a bash script, and VM names from the API", func(t *testing.T) {
		out := mustPlugin(t, plugin, "completion", "bash")
		if !strings.Contains(out, "__start_kubectl-banlieue") {
			t.Errorf("completion bash is not a bash completion script:\n%.300s", out)
		}
		out = mustPlugin(t, plugin, "__complete", "-n", ns, "console", "")
		for _, want := range []string{"plugin-vm\n", "db-prod-02\n", ":4\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("__complete console lacks %q:\n%s", want, out)
			}
		}
		// Names starting with what was typed.
		out = mustPlugin(t, plugin, "__complete", "images", "ubuntu-")
		if !strings.Contains(out, "ubuntu-22.04-cloudinit\n") || strings.Contains(out, "kairos") {
			t.Errorf("__complete images:\n%s", out)
		}
	})
}

type result struct {
	out, errOut string
	err         error
}

// runPlugin runs kubectl-banlieue with the admin kubeconfig, as kubectl
// would run it for "kubectl banlieue ARGS".
func runPlugin(t *testing.T, plugin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, plugin, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+env.AdminKubeconfig)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func mustPlugin(t *testing.T, plugin string, args ...string) string {
	t.Helper()
	out, errOut, err := runPlugin(t, plugin, args...)
	if err != nil {
		t.Fatalf("kubectl-banlieue %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}
