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
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// MachineState is what a real node changes on the machine outside its own
// directory, read before the node starts and after it stops: a tear-down
// that leaves any of it different did not put the machine back.
type MachineState struct {
	// Links are the network interfaces' names.
	Links []string
	// Rules are iptables-save's (and ip6tables-save's) chain and rule
	// lines, by family and table ("ip4 nat :CNI-1234 - [0:0]").
	Rules []string
	// Cgroups are the pods' cgroups (the slots' roots and kubepods at the
	// top, where a kubelet without a root puts them), in every hierarchy.
	Cgroups []string
	// Mounts are the mount points under the directories asked for (a
	// node's own) and the default place of the CRI's network namespaces.
	Mounts []string
	// Sysctls the kubelet and the CNI plugins set, by name.
	Sysctls map[string]string
}

// nodeSysctls are the kernel settings the kubelet sets (unless
// protectKernelDefaults) and the bridge plugin needs.
var nodeSysctls = []string{"kernel/panic", "kernel/panic_on_oops", "vm/overcommit_memory", "net/ipv4/ip_forward",
	"net/bridge/bridge-nf-call-iptables"}

// ReadMachineState reads the machine's state; mountsUnder are the
// directories whose mounts count (the node's own).
func ReadMachineState(mountsUnder ...string) (MachineState, error) {
	var s MachineState
	var err error
	if s.Links, err = links(); err != nil {
		return s, err
	}
	for _, family := range []struct{ name, save string }{{"ip4", "iptables-save"}, {"ip6", "ip6tables-save"}} {
		rules, err := iptablesRules(family.save)
		if err != nil {
			return s, err
		}
		for _, r := range rules {
			s.Rules = append(s.Rules, family.name+" "+r)
		}
	}
	for _, pattern := range []string{"/sys/fs/cgroup/*/kubepods*", "/sys/fs/cgroup/*/banlieue-node-*"} {
		found, err := filepath.Glob(pattern)
		if err != nil {
			return s, err
		}
		s.Cgroups = append(s.Cgroups, found...)
	}
	if s.Mounts, err = mountsBelow(append(mountsUnder, "/run/netns", "/var/run/netns")...); err != nil {
		return s, err
	}
	s.Sysctls = map[string]string{}
	for _, k := range nodeSysctls {
		v, err := os.ReadFile(filepath.Join("/proc/sys", k))
		if err == nil {
			s.Sysctls[k] = strings.TrimSpace(string(v))
		}
	}
	return s, nil
}

// Diff lists, one per line, what after has that s has not, what s had that
// after lost, and each sysctl that changed.
func (s MachineState) Diff(after MachineState) []string {
	var out []string
	for _, d := range []struct {
		what          string
		before, after []string
	}{{"link", s.Links, after.Links}, {"iptables", s.Rules, after.Rules}, {"cgroup", s.Cgroups, after.Cgroups}, {"mount", s.Mounts, after.Mounts}} {
		added, removed := setDiff(d.before, d.after)
		for _, a := range added {
			out = append(out, fmt.Sprintf("%s left behind: %s", d.what, a))
		}
		for _, r := range removed {
			out = append(out, fmt.Sprintf("%s gone: %s", d.what, r))
		}
	}
	keys := make([]string, 0, len(s.Sysctls))
	for k := range s.Sysctls {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if v, ok := after.Sysctls[k]; ok && v != s.Sysctls[k] {
			out = append(out, fmt.Sprintf("sysctl %s is %s, was %s", k, v, s.Sysctls[k]))
		}
	}
	return out
}

// LeftBehind is Diff without what went missing meanwhile: the node's
// tear-down removes only what it added, and the kernel may finish removing
// something another user (or an earlier node) was deleting when s was read
// (a veth of a namespace being destroyed): that is no change of the node's.
func (s MachineState) LeftBehind(after MachineState) []string {
	var out []string
	for _, d := range s.Diff(after) {
		if !strings.Contains(d, " gone: ") {
			out = append(out, d)
		}
	}
	return out
}

// setDiff is what b has that a has not, and what a has that b has not.
func setDiff(a, b []string) (added, removed []string) {
	in := func(xs []string) map[string]bool {
		m := map[string]bool{}
		for _, x := range xs {
			m[x] = true
		}
		return m
	}
	inA, inB := in(a), in(b)
	for _, x := range b {
		if !inA[x] {
			added = append(added, x)
		}
	}
	for _, x := range a {
		if !inB[x] {
			removed = append(removed, x)
		}
	}
	return added, removed
}

func links() ([]string, error) {
	entries, err := os.ReadDir("/sys/class/net")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out, nil
}

// iptablesRules are the chain declarations (without their counters) and
// rules of every table, as "TABLE LINE"; none when the tool is missing.
func iptablesRules(save string) ([]string, error) {
	path, err := exec.LookPath(save)
	if err != nil {
		return nil, nil
	}
	data, err := exec.Command(path).Output()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", save, err)
	}
	return parseIPTablesSave(string(data)), nil
}

// parseIPTablesSave turns iptables-save's output into "TABLE LINE"s:
// ":CHAIN POLICY" for each chain (counters dropped) and "-A ..." rules.
func parseIPTablesSave(out string) []string {
	var rules []string
	table := ""
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":"):
			fields := strings.Fields(line)
			// A built-in chain that accepts is what a table has before
			// anything creates it (iptables-nft shows no table until then).
			if len(fields) >= 2 && !(builtinChains[fields[0][1:]] && fields[1] == "ACCEPT") {
				rules = append(rules, table+" "+fields[0]+" "+fields[1])
			}
		case strings.HasPrefix(line, "-A "):
			rules = append(rules, table+" "+line)
		}
	}
	return rules
}

// builtinChains are iptables' own chains, in whichever table.
var builtinChains = map[string]bool{"PREROUTING": true, "INPUT": true, "FORWARD": true, "OUTPUT": true, "POSTROUTING": true}

// mountsBelow are the mount points under any of dirs, deepest first.
func mountsBelow(dirs ...string) ([]string, error) {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		fields := strings.Fields(line)
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range dirs {
			if d != "" && (mp == d || strings.HasPrefix(mp, strings.TrimSuffix(d, "/")+"/")) {
				out = append(out, mp)
				break
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out, nil
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			var c byte
			if _, err := fmt.Sscanf(s[i+1:i+4], "%03o", &c); err == nil {
				b.WriteByte(c)
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
