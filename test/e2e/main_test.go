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

// Package e2e drives banlieue the way its users do: the real kubectl against
// a real kube-apiserver whose aggregation layer proxies banlieue.io to the
// banlieue binary, all separate processes (pkg/devenv). The binaries come
// from 'make build' and 'make tools'.
package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
)

var (
	env     *devenv.Env
	root    string // repository root
	binDir  string
	kubectl string
)

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	root = filepath.Join(wd, "..", "..")
	binDir = filepath.Join(root, "bin")
	kubectl = filepath.Join(binDir, "kubectl")
	dir, err := os.MkdirTemp("", "banlieue-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	ctx := context.Background()
	start := time.Now()
	env, err = devenv.Start(ctx, devenv.Config{Dir: dir, BinDir: binDir, Setup: dev.InstallRBAC})
	if err != nil {
		fmt.Fprintf(os.Stderr, "e2e: starting the environment: %v\n", err)
		dumpLogs(dir)
		return 1
	}
	fmt.Printf("e2e: environment up in %s (%s)\n", time.Since(start).Round(10*time.Millisecond), dir)
	code := m.Run()
	env.Stop()
	if left := processesUnder(dir); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "e2e: processes left running after Stop:\n%s\n", strings.Join(left, "\n"))
		code = 1
	}
	if code != 0 {
		dumpLogs(dir)
	} else {
		os.RemoveAll(dir)
	}
	return code
}

// dumpLogs prints the tail of every process log, so a CI failure explains itself.
func dumpLogs(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if len(data) > 6000 {
			data = data[len(data)-6000:]
		}
		fmt.Fprintf(os.Stderr, "----- %s (tail)\n%s\n", l, data)
	}
}

// kc runs kubectl with the admin kubeconfig (or another given as
// --kubeconfig in args) and returns stdout, stderr and the error.
func kc(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return kcIn(t, "", args...)
}

// kcIn runs kubectl with stdin.
func kcIn(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	hasKubeconfig := false
	for _, a := range args {
		if strings.HasPrefix(a, "--kubeconfig") {
			hasKubeconfig = true
		}
	}
	if !hasKubeconfig {
		args = append([]string{"--kubeconfig=" + env.AdminKubeconfig}, args...)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, kubectl, args...)
	cmd.Dir = root
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

// mustKC runs kubectl and fails the test on error.
func mustKC(t *testing.T, args ...string) string {
	t.Helper()
	out, errOut, err := kc(t, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// mustKCIn is mustKC with stdin.
func mustKCIn(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errOut, err := kcIn(t, stdin, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, out, errOut)
	}
	return out
}

// eventually retries f until it returns nil or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var err error
	for time.Now().Before(deadline) {
		if err = f(); err == nil {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("not within %s: %v", timeout, err)
}
