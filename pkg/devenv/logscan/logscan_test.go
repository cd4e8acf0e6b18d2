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

package logscan

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReconcileErrors: on crafted logs, only "Reconciler error" lines with
// the text, only in logs matching the glob, are counted; a conflict makes
// NoConflictErrors fail, and a glob matching no log is an error.
func TestReconcileErrors(t *testing.T) {
	dir := t.TempDir()
	conflict := `E1204 controller.go:1 "Reconciler error" err="Operation cannot be fulfilled: the object has been modified"`
	for name, lines := range map[string][]string{
		"controller-0.log": {conflict, `E1204 controller.go:1 "Reconciler error" err="timeout"`, `I1204 "Reconciling" msg="the object has been modified"`},
		"controller-1.log": {conflict},
		"provider-a.log":   {conflict, conflict},
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		glob, substr string
		want         int
	}{
		{"controller-*", conflictMessage, 2},
		{"controller-0", "", 2},
		{"controller-0", "timeout", 1},
		{"provider-*", conflictMessage, 2},
		{"*", conflictMessage, 4},
	} {
		got, err := ReconcileErrors(dir, tc.glob, tc.substr)
		if err != nil || len(got) != tc.want {
			t.Errorf("%s %q: %d lines (%v), want %d", tc.glob, tc.substr, len(got), err, tc.want)
		}
	}
	if err := NoConflictErrors(dir, "controller-*"); err == nil || !strings.Contains(err.Error(), "2 conflicts") {
		t.Errorf("NoConflictErrors on logs with two conflicts: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "quiet-0.log"), []byte(`E1204 "Reconciler error" err="timeout"`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := NoConflictErrors(dir, "quiet-*"); err != nil {
		t.Errorf("NoConflictErrors on a log without conflicts: %v", err)
	}
	if _, err := ReconcileErrors(dir, "nothing-*", ""); err == nil {
		t.Error("a glob matching no log was scanned as clean")
	}
}
