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
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/firestoned/banlieue/hack/image/build"
	"github.com/firestoned/banlieue/pkg/devenv/logscan"
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
	// PodsOnly is for a package that installs banlieue itself, as pods
	// (Ready): the control plane runs none of it (ControlPlaneOnly), the
	// node has the etcd image the shipped manifest names, and the shipped
	// etcd's three claims have volumes (this cluster has no provisioner).
	PodsOnly bool
	// Ready runs once the environment is up, before the tests: what the
	// package installs on it. An error fails the suite without tests.
	Ready func(*Env) error
	// Stop, when set, runs after the tests (or a failed Ready), before
	// the environment stops: it stops what Ready started beside the node
	// that the node's tear-down check would otherwise find (a libvirtd in
	// a namespace of its own, say). An error fails the suite.
	Stop func() error
	// ScanPodLogs fails the suite when a pod whose logs it copied
	// (Env.FollowLogs) logged a lost optimistic-concurrency race as a
	// reconcile error (logscan.NoConflictErrors).
	ScanPodLogs bool
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
	if s.PodsOnly {
		cfg.ControlPlaneOnly = true
		cfg.NodeImages = append(cfg.NodeImages, filepath.Join(binDir, "etcd-image.tar"))
	}
	env, err := startInterruptible(cfg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: environment: %v (logs in %s)\n", s.Name, err, filepath.Join(dir, "logs"))
		return 1 // Start stopped what it started
	}
	code := 1
	if err := s.ready(env); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
	} else {
		code = m.Run()
	}
	if s.Stop != nil {
		if err := s.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", s.Name, err)
			code = 1
		}
	}
	env.Stop()
	if s.ScanPodLogs {
		if err := logscan.NoConflictErrors(env.PodLogs(), "*"); err != nil {
			fmt.Fprintf(os.Stderr, "%s: pods: %v\n", s.Name, err)
			code = 1
		}
	}
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

// ready gives a PodsOnly suite's etcd its volumes, then calls Ready.
func (s NodeSuite) ready(env *Env) error {
	if s.PodsOnly {
		// The shipped etcd: three members, 8Gi claims, uid 65532 (its
		// securityContext).
		if err := env.ProvideVolumes(context.Background(), "etcd-data", 3, "8Gi", 65532); err != nil {
			return err
		}
	}
	return s.Ready(env)
}

// ReleaseImage is the tag the shipped manifests name.
const ReleaseImage = "ghcr.io/firestoned/banlieue:v0.1.0"

// BuildReleaseImage builds the release binary (-tags release) of the
// repository at root and packs it as make image does, tagged
// ReleaseImage, into dir; it returns the image tarball for
// Config.NodeImages.
func BuildReleaseImage(root, dir string) (string, error) {
	bin := filepath.Join(dir, "banlieue-release")
	cmd := exec.Command("go", "build", "-tags", "release", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/banlieue")
	cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the release binary: %v: %s", err, out)
	}
	tarball := filepath.Join(dir, "banlieue-image.tar")
	if err := build.Write(bin, ReleaseImage, tarball); err != nil {
		return "", fmt.Errorf("packing the release image: %w", err)
	}
	return tarball, nil
}

// startInterruptible starts the environment, and stops what it started
// when an interrupt or SIGTERM comes while it starts (waiting for a node
// slot, say), which go test's default handling would leave running; once
// it is up, the default handling is back.
func startInterruptible(cfg Config) (*Env, error) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
	go func() {
		select {
		case <-sigs:
			cancel()
		case <-ctx.Done():
		}
	}()
	env, err := Start(ctx, cfg)
	if err == nil && ctx.Err() != nil {
		env.Stop()
		return nil, errors.New("interrupted while starting")
	}
	return env, err
}
