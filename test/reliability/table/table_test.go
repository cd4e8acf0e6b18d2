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

package table

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A row with no operation counted is refused: the scenario proved nothing.
func TestCheck(t *testing.T) {
	if err := check(Row{Scenario: "nothing done", Operations: 0}); err == nil {
		t.Error("a row of 0 operations passed the check")
	}
	if err := check(Row{Scenario: "done", Operations: 3, Lost: Counted(0)}); err != nil {
		t.Errorf("a row of 3 operations refused: %v", err)
	}
}

// The table is written under bin/, never the committed docs/.
func TestPathUnderBin(t *testing.T) {
	root := t.TempDir()
	if got, want := Path(root), filepath.Join(root, "bin", "reliability.md"); got != want {
		t.Errorf("Path = %s, want %s", got, want)
	}
}

// A package's Write replaces its own rows and keeps another package's.
func TestWriteKeepsOtherPackagesRows(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bin", "reliability.md")
	vsphere := &Table{Owner: "vsphere", rows: []Row{{Scenario: "clone crash", Test: "vsphere.TestCrashMidClone", Operations: 3, Faults: "SIGKILL", Lost: Counted(0), Dup: Counted(0)}}}
	if err := vsphere.Write(path); err != nil {
		t.Fatal(err)
	}
	old := &Table{Owner: "reliability", rows: []Row{{Scenario: "old", Test: "reliability.TestOld", Operations: 1, Faults: "none"}}}
	if err := old.Write(path); err != nil {
		t.Fatal(err)
	}
	fresh := &Table{Owner: "reliability", rows: []Row{{Scenario: "new", Test: "reliability.TestNew", Operations: 7, Faults: "none", Lost: Counted(0)}}}
	if err := fresh.Write(path); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	rows := parse(string(data))
	var tests []string
	for _, r := range rows {
		tests = append(tests, r.Test)
	}
	if got := strings.Join(tests, " "); got != "reliability.TestNew vsphere.TestCrashMidClone" {
		t.Errorf("rows %s, want reliability.TestNew vsphere.TestCrashMidClone", got)
	}
	if len(rows) == 2 && (rows[0].Operations != 7 || *rows[0].Lost != 0 || rows[0].Dup != nil) {
		t.Errorf("row read back as %+v", rows[0])
	}
}
