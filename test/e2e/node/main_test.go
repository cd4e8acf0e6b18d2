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

// Package node runs banlieue's shipped Deployments as pods on a real node
// (devenv's Config.Node: the kubelet, containerd, runc and the CNI bridge)
// with the release image, and checks that tearing the node down leaves the
// machine as it was.
package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
)

var (
	env    *devenv.Env
	cs     *kubernetes.Clientset
	root   string
	dirBin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	dirBin = filepath.Join(root, "bin")
	if err := devenv.CheckNodePrerequisites(dirBin); err != nil {
		fmt.Fprintf(os.Stderr, "node: %v\n", err)
		return 1
	}
	dir, err := os.MkdirTemp("", "banlieue-node-")
	if err != nil {
		panic(err)
	}
	image, err := devenv.BuildReleaseImage(root, dir)
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: the release image: %v\n", err)
		return 1
	}
	env, err = devenv.Start(context.Background(), devenv.Config{Dir: dir, BinDir: dirBin, Setup: dev.InstallRBAC,
		Node: true, NodeImages: []string{image}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "node: environment: %v (logs in %s)\n", err, filepath.Join(dir, "logs"))
		if env != nil {
			env.Stop()
		}
		return 1
	}
	if cs, err = kubernetes.NewForConfig(env.Admin); err != nil {
		panic(err)
	}
	code := m.Run()
	env.Stop()
	if left := env.NodeLeftovers(); len(left) > 0 {
		fmt.Fprintf(os.Stderr, "node: tearing the node down left the machine changed:\n  %s\n", strings.Join(left, "\n  "))
		code = 1
	}
	if code == 0 {
		_ = os.RemoveAll(dir)
	} else {
		fmt.Fprintf(os.Stderr, "node: logs in %s\n", filepath.Join(dir, "logs"))
	}
	return code
}

// kubectl runs bin/kubectl as the administrator.
func kubectl(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(dirBin, "kubectl"), append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}
