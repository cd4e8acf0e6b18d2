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
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// NodeSuite is a test package run against an environment with a real
// node, the release image of the repository at Root loaded into it.
type NodeSuite struct {
	// Name prefixes messages and the environment's folder.
	Name string
	// Root is the repository; its bin/ holds the tools (make tools).
	Root string
	// Config is the environment's, without Dir, BinDir and Node, which
	// the suite sets; the release image goes before Config.NodeImages.
	Config Config
	// Ready runs once the environment is up, before the tests: what the
	// package installs on it. An error fails the suite without tests.
	Ready func(*Env) error
}

// Run starts the environment, calls Ready, runs the tests, stops the
// environment, and fails when the node left the machine changed; the
// environment's folder stays when anything failed, and says where. It
// returns the exit code for os.Exit.
func (s NodeSuite) Run(m *testing.M) int {
	binDir := filepath.Join(s.Root, "bin")
	if err := CheckNodePrerequisites(binDir); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
		return 1
	}
	dir, err := os.MkdirTemp("", "banlieue-"+s.Name+"-")
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
		return 1
	}
	image, err := BuildReleaseImage(s.Root, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
		return 1
	}
	cfg := s.Config
	cfg.Dir, cfg.BinDir, cfg.Node = dir, binDir, true
	cfg.NodeImages = append([]string{image}, cfg.NodeImages...)
	env, err := Start(context.Background(), cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: environment: %v (logs in %s)\n", s.Name, err, filepath.Join(dir, "logs"))
		return 1 // Start stopped what it started
	}
	code := 1
	if err := s.Ready(env); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
	} else {
		code = m.Run()
	}
	env.Stop()
	if left := env.NodeLeftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "%s: tearing the node down left the machine changed:\n  %s\n", s.Name, strings.Join(left, "\n  "))
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "%s: logs in %s\n", s.Name, filepath.Join(dir, "logs"))
	}
	return code
}
