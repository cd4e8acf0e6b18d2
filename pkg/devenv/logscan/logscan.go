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

// Package logscan reads the logs the local environment keeps (one file per
// process) for what a user reading them would take for a fault.
package logscan

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// conflictMessage is how kube-apiserver words a lost optimistic-concurrency
// race.
const conflictMessage = "the object has been modified"

// ReconcileErrors returns the controller-runtime "Reconciler error" lines
// that contain substr in the logs of dir whose names match glob+".log"
// (controller-*, provider-*). No log matching glob is an error: a scan of
// nothing would find nothing wrong.
func ReconcileErrors(dir, glob, substr string) ([]string, error) {
	logs, err := filepath.Glob(filepath.Join(dir, glob+".log"))
	if err != nil {
		return nil, err
	}
	if len(logs) == 0 {
		return nil, fmt.Errorf("no log matches %s in %s", glob, dir)
	}
	var out []string
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"Reconciler error"`) && strings.Contains(line, substr) {
				out = append(out, line)
			}
		}
	}
	return out, nil
}

// NoConflictErrors fails when a log of dir matching glob holds a lost
// optimistic-concurrency race logged as a reconcile error: the
// controllers requeue those quietly (pkg/controllers/conflict).
func NoConflictErrors(dir, glob string) error {
	lines, err := ReconcileErrors(dir, glob, conflictMessage)
	if err != nil {
		return err
	}
	if len(lines) > 0 {
		return fmt.Errorf("%d conflicts logged as reconcile errors, first: %.300s", len(lines), lines[0])
	}
	return nil
}
