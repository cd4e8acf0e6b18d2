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

package runbook

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Follow does steps in dir as a reader does: each Command in bash (errexit,
// pipefail) with environ after this process's environment, each File
// written, each Output compared with what the Command before it printed on
// its standard output (warnings on standard error are not what a guide
// shows). It stops at the first Command that fails; outputs that differ
// are returned together. logf gets each command and its output.
func Follow(steps []Step, dir string, environ []string, logf func(format string, args ...any)) error {
	var last string
	var differ []error
	for _, s := range steps {
		switch s.Kind {
		case File:
			if err := os.WriteFile(filepath.Join(dir, s.Name), []byte(s.Text), 0o644); err != nil {
				return err
			}
		case Command:
			out, err := shell(dir, environ, s.Text)
			logf("line %d: %s\n%s", s.Line, s.Text, out)
			if err != nil {
				return fmt.Errorf("line %d: %s: %w\n%s", s.Line, s.Text, err, out)
			}
			last = out
		case Output:
			if d := Match(s.Text, last); d != "" {
				differ = append(differ, fmt.Errorf("line %d: the command before printed otherwise: %s", s.Line, d))
			}
		}
	}
	return errors.Join(differ...)
}

// shell runs command in dir; its standard output, and standard error too
// when it fails.
func shell(dir string, environ []string, command string) (string, error) {
	cmd := exec.Command("bash", "-o", "errexit", "-o", "pipefail", "-c", command)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), environ...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out) + stderr.String(), err
	}
	return string(out), nil
}
