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
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestKubectl walks through what a user does with kubectl, in order.
func TestKubectl(t *testing.T) {
	t.Run("api-resources lists the group with short names and categories", func(t *testing.T) {
		out := mustKC(t, "api-resources", "--api-group=banlieue.io", "-o", "wide")
		for _, want := range []*regexp.Regexp{
			regexp.MustCompile(`(?m)^virtualmachines\s+vm\s+banlieue\.io/v1alpha1\s+true\s+VirtualMachine\s+.*\bbanlieue\b`),
			regexp.MustCompile(`(?m)^providers\s+banlieue\.io/v1alpha1\s+true\s+Provider\s+.*\bbanlieue\b`),
			regexp.MustCompile(`(?m)^vmclasses\s+banlieue\.io/v1alpha1\s+false\s+VMClass\s+.*\bbanlieue\b`),
			regexp.MustCompile(`(?m)^vmimages\s+banlieue\.io/v1alpha1\s+false\s+VMImage\s+.*\bbanlieue\b`),
			regexp.MustCompile(`(?m)^providerclasses\s+banlieue\.io/v1alpha1\s+false\s+ProviderClass\s+.*\bbanlieue\b`),
			regexp.MustCompile(`(?m)^virtualmachinesnapshots\s+vmsnapshot,vmsnap\s+banlieue\.io/v1alpha1\s+true\s+VirtualMachineSnapshot\s+.*\bbanlieue\b`),
			regexp.MustCompile(`(?m)^virtualmachinerestores\s+vmrestore\s+banlieue\.io/v1alpha1\s+true\s+VirtualMachineRestore\s+.*\bbanlieue\b`),
		} {
			if !want.MatchString(out) {
				t.Errorf("api-resources does not match %s:\n%s", want, out)
			}
		}
	})

	t.Run("apply the examples and get them with their columns", func(t *testing.T) {
		mustKC(t, "apply", "-f", "artifacts/examples/")
		out := mustKC(t, "get", "vm,provider,vmclass,vmimage", "-A")
		for _, header := range []string{
			`NAMESPACE\s+NAME\s+CLASS\s+IMAGE\s+PROVIDER\s+POWER\s+READY\s+IP\s+AGE`,
			`NAMESPACE\s+NAME\s+CLASS\s+READY\s+AGE`,
			`NAME\s+CPUS\s+MEMORY\s+FIRMWARE\s+AGE`,
			`NAME\s+OS\s+VERSION\s+ARCH\s+READY\s+PROGRESS\s+AGE`,
		} {
			if !regexp.MustCompile(header).MatchString(out) {
				t.Errorf("no header %q in:\n%s", header, out)
			}
		}
		if !regexp.MustCompile(`banlieue-system\s+virtualmachine.banlieue.io/db-prod-01\s+db-prod-large\s+ubuntu-22.04-cloudinit\s+<none>`).MatchString(out) &&
			!regexp.MustCompile(`banlieue-system\s+db-prod-01\s+db-prod-large\s+ubuntu-22.04-cloudinit`).MatchString(out) {
			t.Errorf("no db-prod-01 row:\n%s", out)
		}
		if !regexp.MustCompile(`db-prod-large\s+8\s+32768Mi\s+efi-secure`).MatchString(out) {
			t.Errorf("no db-prod-large class row:\n%s", out)
		}
		cat := mustKC(t, "get", "banlieue", "-A")
		for _, name := range []string{"db-prod-01", "prod-vsphere", "db-prod-large", "ubuntu-22.04-cloudinit"} {
			if !strings.Contains(cat, name) {
				t.Errorf("kubectl get banlieue lacks %s:\n%s", name, cat)
			}
		}
	})

	t.Run("the shipped ProviderClasses: columns, defaults, explain, refusals", func(t *testing.T) {
		mustKC(t, "apply", "--server-side", "-k", "artifacts/deploy/providerclasses")
		t.Cleanup(func() { kc(t, "delete", "-k", "artifacts/deploy/providerclasses") })
		out := mustKC(t, "get", "providerclasses")
		for _, row := range []string{`NAME\s+BACKEND\s+STRATEGY\s+NAMESPACE\s+REPLICAS\s+PAUSED\s+AGE`,
			`libvirt\s+libvirt\s+PerProvider\s+banlieue-system\s+1\s+false`, `vsphere\s+vsphere\s+PerProvider\s+banlieue-system\s+1\s+false`} {
			if !regexp.MustCompile(row).MatchString(out) {
				t.Errorf("kubectl get providerclasses does not match %s:\n%s", row, out)
			}
		}
		// Defaults the shipped file leaves out are stored, so that the
		// object shows what runs.
		if got := mustKC(t, "get", "providerclass", "vsphere", "-o", "jsonpath={.spec.resources.limits.memory}"); got != "512Mi" {
			t.Errorf("defaulted memory limit %q", got)
		}
		if out := mustKC(t, "explain", "providerclass.spec.deploymentStrategy"); !strings.Contains(out, "PerProvider") || !strings.Contains(out, "Shared") {
			t.Errorf("explain providerclass.spec.deploymentStrategy:\n%s", out)
		}
		_, errOut, err := kcIn(t, `apiVersion: banlieue.io/v1alpha1
kind: ProviderClass
metadata: {name: vsphere-prod}
spec: {backend: vsphere, image: x, deploymentStrategy: DaemonSet, resources: {limits: {nvidia.com/gpu: "1"}}}
`, "apply", "--server-side", "-f", "-")
		for _, want := range []string{"spec.backend", `must equal the class's name "vsphere-prod"`, "spec.deploymentStrategy", `spec.resources.limits[nvidia.com/gpu]`} {
			if err == nil || !strings.Contains(errOut, want) {
				t.Errorf("a bad ProviderClass: error %v lacks %q: %s", err, want, errOut)
			}
		}
		if _, _, err := kc(t, "get", "providerclass", "vsphere-prod"); err == nil {
			t.Error("the refused ProviderClass was stored")
		}
	})

	t.Run("snapshots: explain, columns, refusals by field path", func(t *testing.T) {
		if out := mustKC(t, "explain", "virtualmachinesnapshot.spec.includeMemory"); !strings.Contains(out, "memory") {
			t.Errorf("explain virtualmachinesnapshot.spec.includeMemory:\n%s", out)
		}
		if out := mustKC(t, "explain", "virtualmachinerestore.status.phase"); !strings.Contains(out, "PoweringOff") {
			t.Errorf("explain virtualmachinerestore.status.phase:\n%s", out)
		}
		// db-prod-01 exists (the examples) but no provider built it here.
		_, errOut, err := kcIn(t, `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachineSnapshot
metadata: {name: too-early, namespace: banlieue-system}
spec: {vmName: db-prod-01}
`, "apply", "--server-side", "-f", "-")
		if err == nil || !strings.Contains(errOut, "spec.vmName") || !strings.Contains(errOut, "not built yet") {
			t.Errorf("a snapshot of a VM not built: %v %s; want refused naming spec.vmName", err, errOut)
		}
		_, errOut, err = kcIn(t, `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachineRestore
metadata: {name: to-nothing, namespace: banlieue-system}
spec: {vmName: db-prod-01, snapshotName: nope}
`, "apply", "--server-side", "-f", "-")
		if err == nil || !strings.Contains(errOut, "spec.snapshotName") {
			t.Errorf("a restore to a missing snapshot: %v %s; want refused naming spec.snapshotName", err, errOut)
		}
		if out := mustKC(t, "get", "vmsnapshot,vmrestore", "-A"); !strings.Contains(out, "No resources") && out != "" {
			t.Errorf("refused objects were stored:\n%s", out)
		}
	})

	t.Run("explain shows field docs", func(t *testing.T) {
		out := mustKC(t, "explain", "virtualmachine.spec.hardwareOverride")
		for _, want := range []string{"KIND:", "VirtualMachine", "cpus", "memoryMiB", "diskOverrides", "delta"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain virtualmachine.spec.hardwareOverride lacks %q:\n%s", want, out)
			}
		}
		out = mustKC(t, "explain", "provider.spec.connection.caBundle")
		for _, want := range []string{"inline", "configMapRef", "secretRef", "ca.crt"} {
			if !strings.Contains(out, want) {
				t.Errorf("explain provider.spec.connection.caBundle lacks %q:\n%s", want, out)
			}
		}
		out = mustKC(t, "explain", "virtualmachine.spec.desiredPowerState")
		if !strings.Contains(out, "Defaults to PoweredOn") {
			t.Errorf("explain does not state the default:\n%s", out)
		}
	})

	t.Run("resolved through the aggregator", func(t *testing.T) {
		raw := mustKC(t, "get", "--raw", "/apis/banlieue.io/v1alpha1/namespaces/banlieue-system/virtualmachines/db-prod-02/resolved")
		var r struct {
			Kind string `json:"kind"`
			Spec struct {
				CPUs struct {
					Value int32
					From  string
				} `json:"cpus"`
				MemoryMiB struct {
					Value int64
					From  string
				} `json:"memoryMiB"`
				Disks []struct {
					Name    string
					SizeGiB struct {
						Value int64
						From  string
					} `json:"sizeGiB"`
				} `json:"disks"`
			} `json:"spec"`
		}
		if err := json.Unmarshal([]byte(raw), &r); err != nil {
			t.Fatalf("%v: %s", err, raw)
		}
		got := fmt.Sprintf("%s cpus=%d/%s mem=%d/%s data=%d/%s", r.Kind, r.Spec.CPUs.Value, r.Spec.CPUs.From,
			r.Spec.MemoryMiB.Value, r.Spec.MemoryMiB.From, r.Spec.Disks[1].SizeGiB.Value, r.Spec.Disks[1].SizeGiB.From)
		if got != "ResolvedVirtualMachine cpus=8/class mem=65536/override data=2000/override" {
			t.Errorf("resolved: %s", got)
		}
	})

	t.Run("server-side apply with two managers and a conflict", func(t *testing.T) {
		vm := `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: ssa-vm, namespace: banlieue-system}
spec:
  classRef: {name: db-prod-large}
  imageRef: {name: ubuntu-22.04-cloudinit}
  desiredPowerState: PoweredOn
`
		mustKCIn(t, vm, "apply", "--server-side", "--field-manager=alice", "-f", "-")
		sizing := `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: ssa-vm, namespace: banlieue-system}
spec:
  hardwareOverride:
    diskOverrides: [{name: data, sizeGiB: 900}]
`
		mustKCIn(t, sizing, "apply", "--server-side", "--field-manager=bob", "-f", "-")
		out := mustKC(t, "get", "vm", "ssa-vm", "-n", "banlieue-system", "-o", "jsonpath={.spec.classRef.name} {.spec.hardwareOverride.diskOverrides[0].sizeGiB}")
		if out != "db-prod-large 900" {
			t.Errorf("merged object: %q", out)
		}
		conflicting := strings.Replace(vm, "PoweredOn", "PoweredOn\n  hardwareOverride:\n    diskOverrides: [{name: data, sizeGiB: 1000}]", 1)
		_, errOut, err := kcIn(t, conflicting, "apply", "--server-side", "--field-manager=alice", "-f", "-")
		if err == nil || !strings.Contains(errOut, "conflict") || !strings.Contains(errOut, `"bob"`) {
			t.Errorf("want a conflict with bob, got err=%v: %s", err, errOut)
		}
		mustKCIn(t, conflicting, "apply", "--server-side", "--field-manager=alice", "--force-conflicts", "-f", "-")
	})

	t.Run("invalid input names the field", func(t *testing.T) {
		bad := `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: bad-vm, namespace: banlieue-system}
spec:
  classRef: {name: db-prod-large}
  imageRef: {name: ubuntu-22.04-cloudinit}
  desiredPowerState: Hibernating
  networkOverrides:
    - name: eth0
      static: {address: 192.0.2.10, prefix: 40}
`
		_, errOut, err := kcIn(t, bad, "apply", "-f", "-")
		if err == nil {
			t.Fatal("invalid VM accepted")
		}
		for _, want := range []string{"spec.desiredPowerState", `"Hibernating"`, "spec.networkOverrides[0].static.prefix"} {
			if !strings.Contains(errOut, want) {
				t.Errorf("error lacks %q: %s", want, errOut)
			}
		}
		if _, _, err := kc(t, "get", "vm", "bad-vm", "-n", "banlieue-system"); err == nil {
			t.Error("rejected VM was stored")
		}
	})

	t.Run("wait for a condition, watch, delete", func(t *testing.T) {
		mustKCIn(t, `apiVersion: banlieue.io/v1alpha1
kind: VirtualMachine
metadata: {name: watched-vm, namespace: banlieue-system}
spec:
  classRef: {name: db-prod-large}
  imageRef: {name: ubuntu-22.04-cloudinit}
`, "apply", "-f", "-")

		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		watch := exec.CommandContext(ctx, kubectl, "--kubeconfig="+env.AdminKubeconfig,
			"get", "vm", "-n", "banlieue-system", "-w", "--output-watch-events", "--field-selector=metadata.name=watched-vm")
		stdout, err := watch.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := watch.Start(); err != nil {
			t.Fatal(err)
		}
		lines := make(chan string, 100)
		go func() {
			s := bufio.NewScanner(stdout)
			for s.Scan() {
				lines <- s.Text()
			}
			close(lines)
		}()
		// The initial listing arrives first.
		expectLine(t, lines, "ADDED")

		waitDone := make(chan error, 1)
		go func() {
			_, errOut, err := kc(t, "wait", "--for=condition=Ready", "vm/watched-vm", "-n", "banlieue-system", "--timeout=60s")
			if err != nil {
				err = fmt.Errorf("%v: %s", err, errOut)
			}
			waitDone <- err
		}()
		// Play the controller: set Ready through the status subresource.
		now := time.Now().UTC().Format(time.RFC3339)
		patch := fmt.Sprintf(`{"status":{"powerState":"PoweredOn","conditions":[{"type":"Ready","status":"True","reason":"Provisioned","message":"test","lastTransitionTime":%q}]}}`, now)
		mustKC(t, "patch", "vm", "watched-vm", "-n", "banlieue-system", "--subresource=status", "--type=merge", "-p", patch)
		if err := <-waitDone; err != nil {
			t.Errorf("kubectl wait: %v", err)
		}
		expectLine(t, lines, "MODIFIED")
		out := mustKC(t, "get", "vm", "watched-vm", "-n", "banlieue-system")
		if !regexp.MustCompile(`watched-vm\s+db-prod-large\s+ubuntu-22.04-cloudinit\s+PoweredOn\s+True`).MatchString(out) &&
			!regexp.MustCompile(`watched-vm\s+db-prod-large\s+ubuntu-22.04-cloudinit\s+\S*\s+PoweredOn\s+True`).MatchString(out) {
			t.Errorf("row after status: %s", out)
		}
		mustKC(t, "delete", "vm", "watched-vm", "-n", "banlieue-system", "--wait=true")
		expectLine(t, lines, "DELETED")
		cancel()
		_ = watch.Wait()
	})
}

func expectLine(t *testing.T, lines <-chan string, prefix string) {
	t.Helper()
	timeout := time.After(60 * time.Second)
	for {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("watch ended before %s", prefix)
			}
			if strings.HasPrefix(l, prefix) {
				return
			}
		case <-timeout:
			t.Fatalf("no %s event within 60s", prefix)
		}
	}
}
