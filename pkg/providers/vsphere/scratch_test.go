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
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
)

// TestSweepScratch: the scratch files a killed process left (its PID no
// longer alive, or this process's own PID before its first staging) are
// removed; those of a live process and anything not a scratch file stay.
// The dead process is a real one, run to its end; the live one is this
// test's parent.
func TestSweepScratch(t *testing.T) {
	dir := t.TempDir()
	// A PID freed by an ended process may be taken again at once: another
	// process is run until one stays free.
	dead := 0
	for range 10 {
		cmd := exec.Command("true")
		if err := cmd.Run(); err != nil {
			t.Fatal(err)
		}
		if !processAlive(cmd.Process.Pid) {
			dead = cmd.Process.Pid
			break
		}
	}
	if dead == 0 {
		t.Fatal("every ended process's PID was taken again at once, 10 times")
	}
	live, self := os.Getppid(), os.Getpid()
	if !processAlive(live) || !processAlive(self) {
		t.Fatalf("processAlive(parent %d) = %v, processAlive(self %d) = %v", live, processAlive(live), self, processAlive(self))
	}
	mk := func(pattern string) string {
		f, err := os.CreateTemp(dir, pattern)
		if err != nil {
			t.Fatal(err)
		}
		_ = f.Close()
		return f.Name()
	}
	deadFile := mk(scratchCreatePattern(dead))
	ownFile := mk(scratchCreatePattern(self))
	liveFile := mk(scratchCreatePattern(live))
	other := mk("banlieue-import-12345-*.qcow2") // no pid: not one of ours
	unrelated := mk("something-else-*")
	if err := os.Mkdir(filepath.Join(dir, "banlieue-import-pid1-dir.qcow2"), 0o700); err != nil {
		t.Fatal(err)
	}

	removed, err := sweepScratch(dir, self, processAlive)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(removed)
	want := []string{deadFile, ownFile}
	slices.Sort(want)
	if !slices.Equal(removed, want) {
		t.Errorf("removed %v, want %v", removed, want)
	}
	for _, f := range want {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("%s is still there (%v)", f, err)
		}
	}
	for _, f := range []string{liveFile, other, unrelated, filepath.Join(dir, "banlieue-import-pid1-dir.qcow2")} {
		if _, err := os.Stat(f); err != nil {
			t.Errorf("%s was removed: %v", f, err)
		}
	}
}

func TestScratchPID(t *testing.T) {
	for name, want := range map[string]int{
		"banlieue-import-pid42-123456.qcow2": 42,
		"banlieue-import-pid42-.qcow2":       42,
		"banlieue-import-42-123.qcow2":       0,
		"banlieue-import-pidx-1.qcow2":       0,
		"banlieue-import-pid0-1.qcow2":       0,
		"banlieue-import-pid42-1.vmdk":       0,
	} {
		got, ok := scratchPID(name)
		if ok != (want != 0) || got != want {
			t.Errorf("scratchPID(%q) = %d, %v; want %d", name, got, ok, want)
		}
	}
	if got, ok := scratchPID(filepath.Base(scratchCreatePattern(7))); !ok || got != 7 {
		t.Errorf("the create pattern's own name gives %d, %v", got, ok)
	}
}
