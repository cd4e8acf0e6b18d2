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
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/devenv"
)

// TestMakeRun is the README's first command as a user runs it: "make run"
// comes up with the examples applied and prints a KUBECONFIG that works;
// Ctrl-C stops every process; a second start keeps the objects.
func TestMakeRun(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := startMakeRun(t, dir, func(kubeconfig string) {
		out := mustKC(t, "--kubeconfig="+kubeconfig, "get", "vm", "-n", "banlieue-system")
		if !strings.Contains(out, "db-prod-01") || !strings.Contains(out, "db-prod-02") {
			t.Errorf("examples not applied:\n%s", out)
		}
		mustKCIn(t, fmt.Sprintf(vmYAML, "kept-vm", "banlieue-system"), "--kubeconfig="+kubeconfig, "apply", "-f", "-")
		// The seed guide end to end on the simulated vCenter: db-prod-01
		// becomes Ready with an address, as "make run" promises.
		mustKC(t, "--kubeconfig="+kubeconfig, "wait", "-n", "banlieue-system", "--for=condition=Ready", "vm/db-prod-01", "--timeout=2m")
		// The simulated DHCP addresses the guest after it boots.
		eventually(t, time.Minute, func() error {
			out := mustKC(t, "--kubeconfig="+kubeconfig, "get", "vm", "db-prod-01", "-n", "banlieue-system",
				"-o", `jsonpath={.status.addresses[?(@.type=="InternalIP")].address}`)
			if net.ParseIP(strings.TrimSpace(out)) == nil {
				return fmt.Errorf("db-prod-01 has no IP address: %q", out)
			}
			return nil
		})
		out = mustKC(t, "--kubeconfig="+kubeconfig, "get", "provider", "prod-vsphere", "-n", "banlieue-system",
			"-o", "jsonpath={.status.failureDomains[*].name}")
		if n := len(strings.Fields(out)); n != 6 {
			t.Errorf("prod-vsphere has %d failure domains, want 6: %s", n, out)
		}
		// The simulated Proxmox VE cluster beside it: its Provider Ready
		// with the three nodes.
		mustKC(t, "--kubeconfig="+kubeconfig, "wait", "-n", "banlieue-system", "--for=condition=Ready", "provider/lab-proxmox", "--timeout=2m")
		out = mustKC(t, "--kubeconfig="+kubeconfig, "get", "provider", "lab-proxmox", "-n", "banlieue-system",
			"-o", "jsonpath={.status.failureDomains[*].host}")
		if out != "pve1 pve2 pve3" {
			t.Errorf("lab-proxmox failure domains %q, want the nodes pve1 pve2 pve3", out)
		}
		// Its VMs' serial consoles: the provider publishes its endpoint
		// (as root at its pod's address, which banlieue's API server
		// reaches on the node's bridge), and the Secret names the
		// simulator's console user (PVE 8.x takes no token at the
		// console's handshake).
		eventually(t, time.Minute, func() error {
			out := mustKC(t, "--kubeconfig="+kubeconfig, "get", "provider", "lab-proxmox", "-n", "banlieue-system", "-o", "jsonpath={.status.console.endpoint}")
			return reachedWhereItRuns(t, kubeconfig, out, "https", "provider-proxmox")
		})
		if out := mustKC(t, "--kubeconfig="+kubeconfig, "get", "secret", "lab-proxmox-token", "-n", "banlieue-system", "-o", "jsonpath={.data.consoleUsername}"); out == "" {
			t.Error("lab-proxmox-token names no console user")
		}
		// The local libvirt host's image is imported by its provider from
		// a loopback URL (kubectl get vmimage -w shows it happen).
		mustKC(t, "--kubeconfig="+kubeconfig, "wait", "--for=condition=Ready", "vmimage/banlieue-guest", "--timeout=3m")
		out = mustKC(t, "--kubeconfig="+kubeconfig, "get", "vmimage", "banlieue-guest",
			"-o", `jsonpath={.spec.import.url} {.status.perProvider[?(@.provider=="banlieue-system/lab-libvirt")].failureDomains[0].ref}`)
		if f := strings.Fields(out); len(f) != 2 || !strings.Contains(f[1], "/banlieue-img-") {
			t.Errorf("banlieue-guest: URL and what lab-libvirt built %q, want a URL and an imported volume", out)
		} else if err := reachedWhereItRuns(t, kubeconfig, f[0], "http", ""); err != nil {
			t.Errorf("banlieue-guest: %v", err)
		}
		// The seed guide's db-prod-02 (user data, in a namespace that
		// consented to its reading) and the README's tour on lab-vm-01: a
		// console session and a snapshot and restore with the plugin.
		mustKC(t, "--kubeconfig="+kubeconfig, "wait", "-n", "banlieue-system", "--for=condition=Ready", "vm/db-prod-02", "vm/lab-vm-01", "--timeout=3m")
		readmeTour(t, dir, kubeconfig)
		checkRunNode(t, dir, kubeconfig)
	})
	startMakeRun(t, dir, func(string) {
		out := mustKC(t, "--kubeconfig="+kubeconfig, "get", "vm", "kept-vm", "-n", "banlieue-system", "-o", "name")
		if strings.TrimSpace(out) != "virtualmachine.banlieue.io/kept-vm" {
			t.Errorf("after restart: %q", out)
		}
		// The controller authenticates after a restart too (its certificate
		// comes from the new start's CA): a new VM gets a Scheduled condition.
		mustKCIn(t, fmt.Sprintf(vmYAML, "after-restart", "banlieue-system"), "--kubeconfig="+kubeconfig, "apply", "-f", "-")
		eventually(t, 90*time.Second, func() error {
			out, _, err := kc(t, "--kubeconfig="+kubeconfig, "get", "vm", "after-restart", "-n", "banlieue-system",
				"-o", "jsonpath={.status.conditions[?(@.type==\"Scheduled\")].reason}")
			if err != nil || strings.TrimSpace(out) == "" {
				return fmt.Errorf("no Scheduled condition yet (%v)", err)
			}
			return nil
		})
	})
}

// checkRunNode: as root, make run's node is Ready and runs banlieue's
// controller and providers as their shipped Deployments, pods of the
// release image, and no process of make run's is one of them.
func checkRunNode(t *testing.T, dir, kubeconfig string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Log("not root: make run has no real node, as it says")
		return
	}
	mustKC(t, "--kubeconfig="+kubeconfig, "wait", "--for=condition=Ready", "nodes", "--all", "--timeout=1m")
	for _, d := range runDeployments {
		mustKC(t, "--kubeconfig="+kubeconfig, "-n", "banlieue-system", "rollout", "status", "deploy/"+d, "--timeout=2m")
		images := mustKC(t, "--kubeconfig="+kubeconfig, "-n", "banlieue-system", "get", "deploy", d, "-o", "jsonpath={.spec.template.spec.containers[*].image}")
		if images != devenv.ReleaseImage {
			t.Errorf("deploy/%s runs %q, want the release image %s", d, images, devenv.ReleaseImage)
		}
	}
	for _, p := range processesUnder(dir) {
		if strings.Contains(p, " controller ") || strings.Contains(p, " provider ") {
			t.Errorf("make run runs a component as a process beside its node: %s", p)
		}
	}
}

// runDeployments are the shipped Deployments make run runs on its node.
var runDeployments = []string{"banlieue-controller", "banlieue-provider-vsphere", "banlieue-provider-proxmox", "banlieue-provider-libvirt"}

// reachedWhereItRuns checks that rawURL (of scheme) is where make run's
// components reach a server: loopback without a node; as root, not
// loopback (pods reach the node's bridge), and, when component is named,
// the address of one of its pods.
func reachedWhereItRuns(t *testing.T, kubeconfig, rawURL, scheme, component string) error {
	t.Helper()
	u, err := url.Parse(rawURL)
	if err != nil || u.Scheme != scheme || net.ParseIP(u.Hostname()) == nil {
		return fmt.Errorf("%q is no %s URL of an IP address", rawURL, scheme)
	}
	loopback := net.ParseIP(u.Hostname()).IsLoopback()
	switch {
	case os.Geteuid() != 0 && !loopback:
		return fmt.Errorf("%q: without a node, want a loopback address", rawURL)
	case os.Geteuid() != 0:
		return nil
	case loopback:
		return fmt.Errorf("%q: pods do not reach loopback", rawURL)
	case component == "":
		return nil
	}
	ips := mustKC(t, "--kubeconfig="+kubeconfig, "-n", "banlieue-system", "get", "pods", "-l", "app.kubernetes.io/component="+component,
		"-o", "jsonpath={.items[*].status.podIP}")
	if !slices.Contains(strings.Fields(ips), u.Hostname()) {
		return fmt.Errorf("%q is not at a pod of %s (%s)", rawURL, component, ips)
	}
	return nil
}

// startMakeRun runs "make run" with its state in dir, calls use with the
// printed KUBECONFIG, then sends Ctrl-C and checks that everything stopped.
func startMakeRun(t *testing.T, dir string, use func(kubeconfig string)) string {
	t.Helper()
	cmd := exec.Command("make", "--no-print-directory", "run", "DEV_ARGS=--dir="+dir)
	cmd.Dir = root
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // like a terminal's foreground group
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exported := regexp.MustCompile(`export KUBECONFIG=(\S+)`)
	found := make(chan string, 1)
	var transcript strings.Builder
	go func() {
		s := bufio.NewScanner(stdout)
		for s.Scan() {
			transcript.WriteString(s.Text() + "\n")
			if m := exported.FindStringSubmatch(s.Text()); m != nil {
				found <- m[1]
			}
		}
		close(found)
	}()
	var kubeconfig string
	select {
	case kubeconfig = <-found:
	// As root make run starts a real node, which waits while another
	// package's environment holds the machine's (devenv's node lock).
	case <-time.After(8 * time.Minute):
	}
	if kubeconfig == "" {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		_ = cmd.Wait()
		t.Fatalf("make run printed no KUBECONFIG:\n%s", transcript.String())
	}
	use(kubeconfig)

	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(90 * time.Second):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		t.Fatalf("make run did not stop on Ctrl-C:\n%s", transcript.String())
	}
	assertNoProcessesUnder(t, dir)
	if strings.Contains(transcript.String(), "the node left the machine changed") {
		t.Errorf("make run's node left the machine changed:\n%s", transcript.String())
	}
	return kubeconfig
}

// assertNoProcessesUnder fails if any process still has dir on its command
// line (every component is started with a path inside it).
func assertNoProcessesUnder(t *testing.T, dir string) {
	t.Helper()
	for _, p := range processesUnder(dir) {
		t.Errorf("left running: %s", p)
	}
}

func processesUnder(dir string) []string {
	var out []string
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if strings.Contains(string(data), dir) {
			out = append(out, strings.ReplaceAll(string(data), "\x00", " "))
		}
	}
	return out
}

// readmeTour does on lab-vm-01 what README's "Console, restart,
// snapshots" shows: a command through the console, a marker on the disk,
// a snapshot, another marker, a restore, and the first marker read back.
func readmeTour(t *testing.T, dir, kubeconfig string) {
	t.Helper()
	eventually(t, 2*time.Minute, func() error {
		// The daemon's folder: libvirtd, or libvirtd-lab as root (pods reach it over TLS).
		logs, _ := filepath.Glob(filepath.Join(dir, "libvirtd*", "log", "qemu", "banlieue-system.lab-vm-01.serial.log"))
		if len(logs) != 1 {
			return fmt.Errorf("lab-vm-01's serial logs: %v, want one", logs)
		}
		data, _ := os.ReadFile(logs[0])
		if !strings.Contains(string(data), "BANLIEUE-READY") {
			return fmt.Errorf("lab-vm-01 has not booted to its shell yet")
		}
		return nil
	})
	plugin := func(args ...string) *exec.Cmd {
		return exec.Command(filepath.Join(binDir, "kubectl-banlieue"), append([]string{"--kubeconfig=" + kubeconfig, "-n", "banlieue-system"}, args...)...)
	}
	// console types line into lab-vm-01's console until what it prints
	// holds want (a console has no history: a line typed before the
	// session is attached is lost, and typed again).
	console := func(line, want, never string) {
		t.Helper()
		eventually(t, 2*time.Minute, func() error {
			cmd := plugin("console", "lab-vm-01")
			r, w := io.Pipe()
			cmd.Stdin = r
			go func() {
				time.Sleep(time.Second)
				_, _ = io.WriteString(w, line+"\n")
				time.Sleep(3 * time.Second)
				_ = w.Close()
			}()
			out, _ := cmd.CombinedOutput()
			if never != "" && strings.Contains(string(out), never) {
				t.Fatalf("the console printed %q: %q", never, out)
			}
			if !strings.Contains(string(out), want) {
				return fmt.Errorf("the console printed %q, want %q", out, want)
			}
			return nil
		})
	}
	run := func(want string, args ...string) {
		t.Helper()
		out, err := plugin(args...).CombinedOutput()
		if err != nil || !strings.Contains(string(out), want) {
			t.Fatalf("kubectl banlieue %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	const read = `echo DISK$((40+2))=$(dd if=/dev/vda bs=512 skip=2000000 count=1 2>/dev/null | tr -d " ")`
	write := func(m string) string {
		return fmt.Sprintf(`printf "%%-512s" %s | dd of=/dev/vda bs=512 seek=2000000 conv=notrunc,fsync 2>/dev/null; `, m) + read
	}
	console("hostname; echo $((6*7))", "lab-vm-01\r\n42", "")
	console(write("before-upgrade"), "DISK42=before-upgrade", "")
	run("is Ready", "snapshot", "lab-vm-01", "--name", "before-upgrade", "--wait")
	console(write("after-upgrade"), "DISK42=after-upgrade", "")
	run("is Done", "restore", "lab-vm-01", "before-upgrade", "--name", "undo-upgrade", "--wait")
	console(read, "DISK42=before-upgrade", "DISK42=after-upgrade")
}
