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

package devenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	"k8s.io/klog/v2"
)

// removeSandboxes stops and removes every pod sandbox through the CRI, as
// the kubelet would: containerd runs the CNI DEL (the pod's interface, its
// address, its network namespace) and stops its containers.
func (n *node) removeSandboxes(ctx context.Context) error {
	conn, err := grpc.NewClient("unix://"+n.socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	rt := runtimeapi.NewRuntimeServiceClient(conn)
	list, err := rt.ListPodSandbox(ctx, &runtimeapi.ListPodSandboxRequest{})
	if err != nil {
		return fmt.Errorf("listing pod sandboxes: %w", err)
	}
	var errs []error
	for _, sb := range list.Items {
		if _, err := rt.StopPodSandbox(ctx, &runtimeapi.StopPodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("stopping sandbox %s: %w", sb.Id, err))
			continue
		}
		if _, err := rt.RemovePodSandbox(ctx, &runtimeapi.RemovePodSandboxRequest{PodSandboxId: sb.Id}); err != nil {
			errs = append(errs, fmt.Errorf("removing sandbox %s: %w", sb.Id, err))
		}
	}
	return errors.Join(errs...)
}

// killShims ends the runc shims containerd started for this node (they
// outlive containerd by design) and that a sandbox removal left.
func (n *node) killShims() {
	procs, err := os.ReadDir("/proc")
	if err != nil {
		return
	}
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", p.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if strings.Contains(filepath.Base(args[0]), "containerd-shim") && strings.Contains(string(cmdline), n.socket) {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
}

// nodeLink tells a link a node makes: a slot's bridge (cni0, cni1, ...)
// or a pod's veth.
func nodeLink(name string) bool {
	if strings.HasPrefix(name, "veth") {
		return true
	}
	_, err := strconv.Atoi(strings.TrimPrefix(name, "cni"))
	return strings.HasPrefix(name, "cni") && err == nil
}

// removeOwn removes what the node made for itself alone, while other nodes
// may run: the mounts under its directory (deepest first), its bridge, the
// iptables rules naming its bridge or addresses, and its pods' cgroups.
func (n *node) removeOwn() {
	mounts, err := mountsBelow(n.dir)
	if err != nil {
		klog.ErrorS(err, "Reading the node's mounts")
	}
	unmount(mounts)
	if _, err := os.Stat("/sys/class/net/" + n.slot.bridge()); err == nil {
		deleteLinks([]string{n.slot.bridge()})
	}
	rules, err := n.ownRules()
	if err != nil {
		klog.ErrorS(err, "Reading the node's iptables rules")
	}
	removeRules(rules)
	cgroups, err := n.ownCgroups()
	if err != nil {
		klog.ErrorS(err, "Reading the node's cgroups")
	}
	for _, cg := range cgroups {
		removeCgroupTree(cg)
	}
}

// ownLeftovers is what of the node's own is still on the machine.
func (n *node) ownLeftovers() []string {
	var out []string
	mounts, err := mountsBelow(n.dir)
	if err != nil {
		out = append(out, err.Error())
	}
	for _, mp := range mounts {
		out = append(out, "mount left behind: "+mp)
	}
	if _, err := os.Stat("/sys/class/net/" + n.slot.bridge()); err == nil {
		out = append(out, "link left behind: "+n.slot.bridge())
	}
	rules, err := n.ownRules()
	if err != nil {
		out = append(out, err.Error())
	}
	for _, r := range rules {
		out = append(out, "iptables left behind: "+r)
	}
	cgroups, err := n.ownCgroups()
	if err != nil {
		out = append(out, err.Error())
	}
	for _, cg := range cgroups {
		out = append(out, "cgroup left behind: "+cg)
	}
	return out
}

// ownRules are the iptables rules ("FAMILY TABLE -A ...") that name the
// node's bridge, subnet or gateway.
func (n *node) ownRules() ([]string, error) {
	var own []string
	for _, family := range []struct{ name, save string }{{"ip4", "iptables-save"}, {"ip6", "ip6tables-save"}} {
		rules, err := iptablesRules(family.save)
		if err != nil {
			return own, err
		}
		for _, r := range rules {
			if n.slot.names(r) {
				own = append(own, family.name+" "+r)
			}
		}
	}
	return own, nil
}

// names tells whether an iptables rule names the slot's bridge, subnet or
// gateway.
func (s *slot) names(rule string) bool {
	if !strings.Contains(rule, " -A ") {
		return false
	}
	rule += " "
	return strings.Contains(rule, " -i "+s.bridge()+" ") || strings.Contains(rule, " -o "+s.bridge()+" ") ||
		strings.Contains(rule, " "+s.subnet()+" ") || strings.Contains(rule, " "+s.gateway()+"/32 ")
}

// ownCgroups are the node's pods' cgroup, in each hierarchy it exists in.
func (n *node) ownCgroups() ([]string, error) {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return nil, err
	}
	var out []string
	for _, h := range hierarchies {
		p := filepath.Join(h, n.slot.cgroupRoot())
		if _, err := os.Stat(p); err == nil {
			out = append(out, p)
		}
	}
	return out, nil
}

// cgroupHierarchies are the cgroup (v1) hierarchies mounted under
// /sys/fs/cgroup, each once (cpu and cpuacct may be one, linked twice).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	var out []string
	for _, e := range entries {
		p, err := filepath.EvalSymlinks(filepath.Join("/sys/fs/cgroup", e.Name()))
		if err != nil || seen[p] {
			continue
		}
		if fi, err := os.Stat(p); err == nil && fi.IsDir() {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out, nil
}

// makeCgroupRoot makes the cgroup a kubelet puts its pods under (it must
// exist before the kubelet starts) in every hierarchy. A new cpuset cgroup
// has no CPUs and no memory nodes, so no process could join one below it:
// it gets its parent's.
func makeCgroupRoot(name string) error {
	hierarchies, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hierarchies {
		p := filepath.Join(h, name)
		if err := os.Mkdir(p, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			v, err := os.ReadFile(filepath.Join(h, f))
			if err != nil {
				continue // not the cpuset hierarchy
			}
			if err := os.WriteFile(filepath.Join(p, f), v, 0o644); err != nil {
				return fmt.Errorf("%s: %w", filepath.Join(p, f), err)
			}
		}
	}
	return nil
}

// restore undoes what nodes changed outside their directories, by what
// differs from the state the first of them read before it started.
func (n *node) restore() {
	// Read as the first node read n.before: the mounts of nodes' own
	// directories are each node's to remove (removeOwn).
	now, err := ReadMachineState()
	if err != nil {
		klog.ErrorS(err, "Reading the machine's state")
		return
	}
	addedMounts, _ := setDiff(n.before.Mounts, now.Mounts) // deepest first, as read
	unmount(addedMounts)
	added, _ := setDiff(n.before.Links, now.Links)
	var links []string
	for _, l := range added {
		if nodeLink(l) {
			links = append(links, l)
		}
	}
	deleteLinks(links)
	addedRules, _ := setDiff(n.before.Rules, now.Rules)
	removeRules(addedRules)
	addedCgroups, _ := setDiff(n.before.Cgroups, now.Cgroups)
	for _, cg := range addedCgroups {
		removeCgroupTree(cg)
	}
	for k, v := range n.before.Sysctls {
		if now.Sysctls[k] != v {
			if err := os.WriteFile(filepath.Join("/proc/sys", k), []byte(v), 0o644); err != nil {
				klog.ErrorS(err, "Restoring a sysctl", "key", k)
			}
		}
	}
}

// unmount detaches each mount point, in the order given (deepest first).
func unmount(mounts []string) {
	for _, mp := range mounts {
		if err := syscall.Unmount(mp, syscall.MNT_DETACH); err != nil {
			klog.ErrorS(err, "Unmounting", "path", mp)
		}
	}
}

// deleteLinks deletes each network link named.
func deleteLinks(links []string) {
	for _, l := range links {
		if out, err := exec.Command("ip", "link", "del", l).CombinedOutput(); err != nil {
			klog.ErrorS(err, "Deleting a link", "link", l, "output", string(out))
		}
	}
}

// removeRules deletes the iptables rules and chains given as
// "FAMILY TABLE LINE" (undoRules).
func removeRules(rules []string) {
	for family, script := range undoRules(rules) {
		restore := map[string]string{"ip4": "iptables-restore", "ip6": "ip6tables-restore"}[family]
		cmd := exec.Command(restore, "--noflush")
		cmd.Stdin = strings.NewReader(script)
		if out, err := cmd.CombinedOutput(); err != nil {
			klog.ErrorS(err, "Removing iptables rules", "family", family, "output", string(out), "script", script)
		}
	}
}

// undoRules is, per family, the iptables-restore --noflush script that
// deletes the added rules ("FAMILY TABLE -A ...") and then the added
// chains ("FAMILY TABLE :CHAIN POLICY"), flushed first.
func undoRules(added []string) map[string]string {
	type tableUndo struct{ deletes, chains []string }
	byFamily := map[string]map[string]*tableUndo{}
	for _, r := range added {
		parts := strings.SplitN(r, " ", 3)
		if len(parts) < 3 {
			continue
		}
		family, table, line := parts[0], parts[1], parts[2]
		if byFamily[family] == nil {
			byFamily[family] = map[string]*tableUndo{}
		}
		t := byFamily[family][table]
		if t == nil {
			t = &tableUndo{}
			byFamily[family][table] = t
		}
		switch {
		case strings.HasPrefix(line, "-A "):
			t.deletes = append(t.deletes, "-D "+line[3:])
		case strings.HasPrefix(line, ":"):
			t.chains = append(t.chains, strings.Fields(line)[0][1:])
		}
	}
	scripts := map[string]string{}
	for family, tables := range byFamily {
		names := make([]string, 0, len(tables))
		for name := range tables {
			names = append(names, name)
		}
		sort.Strings(names)
		var b strings.Builder
		for _, name := range names {
			t := tables[name]
			b.WriteString("*" + name + "\n")
			for _, d := range t.deletes {
				b.WriteString(d + "\n")
			}
			for _, c := range t.chains {
				b.WriteString("-F " + c + "\n")
			}
			for _, c := range t.chains {
				b.WriteString("-X " + c + "\n")
			}
			b.WriteString("COMMIT\n")
		}
		scripts[family] = b.String()
	}
	return scripts
}

// removeCgroupTree removes a cgroup and the ones below it, deepest first
// (a cgroup goes with rmdir once it has no process and no child).
func removeCgroupTree(root string) {
	var dirs []string
	_ = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			dirs = append(dirs, path)
		}
		return nil
	})
	sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
	for _, d := range dirs {
		if err := syscall.Rmdir(d); err != nil {
			klog.ErrorS(err, "Removing a cgroup", "path", d)
		}
	}
}
