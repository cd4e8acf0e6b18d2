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
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"k8s.io/klog/v2"
)

// A qcow2 import's scratch file is removed when the import ends; a
// process killed meanwhile leaves it, up to ScratchLimit bytes of the
// temporary directory, which no later import would ever remove. So each
// is named after the process staging it, banlieue-import-pidPID-*.qcow2,
// and a process sweeps, before its first staging, those of processes no
// longer alive and those of its own PID: none of them is its own yet,
// and a container restarted with the temporary directory kept runs
// again as the same PID (1) as the one that left them. A file of a
// process still alive (another provider sharing the directory) is left.
// A dead process's PID since taken by another process keeps its file:
// left over rather than removed under a live import.

// scratchPrefix starts every scratch file's name; the PID follows.
const scratchPrefix = "banlieue-import-pid"

// scratchCreatePattern is os.CreateTemp's pattern for a scratch file of
// process pid.
func scratchCreatePattern(pid int) string {
	return fmt.Sprintf("%s%d-*.qcow2", scratchPrefix, pid)
}

// scratchPID is the PID a scratch file's name carries.
func scratchPID(name string) (int, bool) {
	rest, ok := strings.CutPrefix(name, scratchPrefix)
	if !ok || !strings.HasSuffix(rest, ".qcow2") {
		return 0, false
	}
	digits, _, ok := strings.Cut(rest, "-")
	if !ok {
		return 0, false
	}
	pid, err := strconv.Atoi(digits)
	if err != nil || pid <= 0 {
		return 0, false
	}
	return pid, true
}

// processAlive tells whether a process pid runs: signal 0 reaches it, or
// it belongs to another user (EPERM).
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// sweepScratch removes dir's scratch files left by process self's
// earlier incarnation or by processes not alive; it returns them.
func sweepScratch(dir string, self int, alive func(int) bool) ([]string, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, e := range entries {
		pid, ok := scratchPID(e.Name())
		if !ok || !e.Type().IsRegular() || pid != self && alive(pid) {
			continue
		}
		file := filepath.Join(dir, e.Name())
		if err := os.Remove(file); err != nil && !os.IsNotExist(err) {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, file)
	}
	return removed, errors.Join(errs...)
}

// sweepOnce runs the sweep of the temporary directory before this
// process's first scratch file.
var sweepOnce sync.Once

func sweepLeftScratch(log klog.Logger) {
	sweepOnce.Do(func() {
		removed, err := sweepScratch(os.TempDir(), os.Getpid(), processAlive)
		for _, f := range removed {
			log.Info("Removed the scratch file of a qcow2 import a process ended before removing it", "file", f)
		}
		if err != nil {
			log.Error(err, "Removing scratch files of ended processes failed")
		}
	})
}
