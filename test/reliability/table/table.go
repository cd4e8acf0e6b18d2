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

// Package table keeps the reliability table, bin/reliability.md: every
// reliability scenario, in whichever test package it runs, records a row;
// a passing package rewrites its own rows and keeps the other packages'.
// The long form of the scenarios (-long, make test-long) keeps
// bin/reliability-long.md the same way, so neither run overwrites the
// other's figures. The tables are written under bin/ so that a test run
// leaves the tracked tree as it found it; make reliability-doc copies
// them to docs/.
package table

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// long is registered here, once, for every package with reliability
// scenarios: they scale their sizes with it and write their rows to the
// long document.
var long = flag.Bool("long", false, "Run every reliability scenario at its long size and write bin/reliability-long.md (make test-long).")

// Size is short in make test and long in make test-long.
func Size(short, longSize int) int {
	if *long {
		return longSize
	}
	return short
}

// Path is the table this run keeps, under the repository root: in bin/,
// never the committed docs/ (make reliability-doc copies it there).
func Path(root string) string {
	if *long {
		return filepath.Join(root, "bin", "reliability-long.md")
	}
	return filepath.Join(root, "bin", "reliability.md")
}

// Row is one scenario's outcome.
type Row struct {
	Scenario string
	Test     string // owner.TestName, filled by Record
	// Operations is how many operations the scenario performed and had
	// answered, measured through package count (count.Ops), never a size
	// or a literal.
	Operations int
	Faults     string
	// Lost and Dup are measured counts (package count), or nil where the
	// scenario loses or duplicates nothing by nature (an access check):
	// the table shows "—" then, never a 0 nobody counted.
	Lost, Dup *int
}

// Counted is a measured count for a Row.
func Counted(n int) *int { return &n }

func cell(n *int) string {
	if n == nil {
		return "—"
	}
	return strconv.Itoa(*n)
}

func parseCell(s string) (*int, error) {
	if s == "—" {
		return nil, nil
	}
	n, err := strconv.Atoi(s)
	return &n, err
}

// Table collects one test package's rows.
type Table struct {
	// Owner names the package in the test column ("reliability", "vsphere").
	Owner string
	mu    sync.Mutex
	rows  []Row
}

// Record adds a scenario's row. The test itself fails on any loss, so a
// written table only ever shows what a passing run measured; it fails here
// if the scenario counted no operation, as it then proved nothing.
func (tb *Table) Record(t *testing.T, r Row) {
	t.Helper()
	if err := check(r); err != nil {
		t.Error(err)
	}
	r.Test = tb.Owner + "." + t.Name()
	tb.mu.Lock()
	tb.rows = append(tb.rows, r)
	tb.mu.Unlock()
	t.Logf("%s: %d operations, faults: %s, lost %s, duplicated %s", r.Scenario, r.Operations, r.Faults, cell(r.Lost), cell(r.Dup))
}

// check refuses a row that shows what was not measured.
func check(r Row) error {
	if r.Operations <= 0 {
		return fmt.Errorf("%s: %d operations counted: the scenario proved nothing", r.Scenario, r.Operations)
	}
	return nil
}

// Partial reports whether this run was filtered with -run: a partial run
// does not rewrite the table.
func Partial() bool {
	return testingFlag("test.run") != ""
}

// Write rewrites path with this package's rows in place of the ones it
// wrote before, keeping every other package's rows.
func (tb *Table) Write(path string) error {
	tb.mu.Lock()
	defer tb.mu.Unlock()
	rows := slices.Clone(tb.rows)
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	for _, r := range parse(string(old)) {
		if !strings.HasPrefix(r.Test, tb.Owner+".") {
			rows = append(rows, r)
		}
	}
	slices.SortStableFunc(rows, func(a, b Row) int { return strings.Compare(a.Test, b.Test) })
	var b strings.Builder
	b.WriteString(intro())
	b.WriteString(" Every scenario runs against the real processes (etcd, kube-apiserver with aggregation, the banlieue binary, the vSphere provider on vcsim), " +
		"injects its faults and counts the operations answered and what was lost or duplicated " +
		"(test/reliability/count, whose own tests feed it a crafted loss, a crafted duplicate and an unanswered request). " +
		"A scenario that loses or duplicates anything fails its test, so this table is never written with a non-zero count; " +
		"\"—\" marks a scenario where nothing can be lost or duplicated (an access check).\n\n")
	b.WriteString("| scenario | test | operations | faults injected | lost | duplicated |\n|---|---|---:|---|---:|---:|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | `%s` | %d | %s | %s | %s |\n", r.Scenario, r.Test, r.Operations, r.Faults, cell(r.Lost), cell(r.Dup))
	}
	b.WriteString(bounds)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(b.String()), 0o644)
}

func intro() string {
	if *long {
		return "# Reliability, long form\n\nWritten by `make test-long` on passing runs (to bin/reliability-long.md; `make reliability-doc` copies it here): " +
			"the scenarios of docs/reliability.md (`make test`) at their long sizes, " +
			"and each fuzz target for a longer campaign (its figures are in the run's output, not here)."
	}
	return "# Reliability\n\nWritten by the reliability tests on passing runs of `make test` (to bin/reliability.md; `make reliability-doc` copies it here); " +
		"`make test-long` runs the same scenarios larger and writes bin/reliability-long.md."
}

const bounds = "\n## Bounds\n\n" +
	"- Request bodies: at most 3 MiB (k8s.io/apiserver's limit, in kube-apiserver and in banlieue); a larger body is answered 413 before it is decoded.\n" +
	"- JSON nesting: the decoder stops at depth 10 000 with a 400.\n" +
	"- Lists in objects: every list has a maximum enforced by validation (pkg/apis/banlieue/validation: 32 disks, 16 interfaces, 8 nameservers, " +
	"64 features, 32 image sources, 16 cloud configs, 1 024 failure domains, 64 addresses, 256 capability items); a longer list is a 422 naming the list.\n" +
	"- Metadata: names, labels and annotations (256 KiB in all) are bounded by Kubernetes' own object-meta validation.\n" +
	"- Lists of objects: clients page with limit/continue as on any Kubernetes API; the watch cache serves unpaged lists from memory.\n" +
	"- Backend calls: a login 30 s (a caller waits for it 3 s at most; a failed login is answered from memory for 10 s), a call that awaits no task 30 s (each vSphere SOAP call 30 s, a task's wait excepted), a machine's create/converge/delete 15 min, a reconcile 16 min; connects and TLS handshakes 15 s. Flags of `banlieue provider`: --call-timeout, --machine-timeout, --reconcile-timeout.\n"

// parse reads the rows of a table Write wrote.
func parse(doc string) []Row {
	var out []Row
	for _, line := range strings.Split(doc, "\n") {
		if !strings.HasPrefix(line, "| ") || !strings.HasSuffix(line, " |") {
			continue
		}
		f := strings.Split(strings.TrimSuffix(strings.TrimPrefix(line, "| "), " |"), " | ")
		if len(f) != 6 || !strings.HasPrefix(f[1], "`") {
			continue // the header
		}
		ops, err1 := strconv.Atoi(f[2])
		lost, err2 := parseCell(f[4])
		dup, err3 := parseCell(f[5])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		out = append(out, Row{Scenario: f[0], Test: strings.Trim(f[1], "`"), Operations: ops, Faults: f[3], Lost: lost, Dup: dup})
	}
	return out
}

func testingFlag(name string) string {
	if f := flag.Lookup(name); f != nil {
		return f.Value.String()
	}
	return ""
}
