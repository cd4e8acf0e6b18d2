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

// Package nodeinstall installs banlieue on a cluster with a real node as
// a user does, "banlieue bootstrap operator --wait": its API server, its
// etcd (three members on volumes of the node), the controller and the
// operator run as pods of the release image (etcd of an image of the etcd
// the tools build, tagged as the shipped manifest names it), and the
// Providers' workloads the operator renders too. Nothing of banlieue runs
// as a process here.
package nodeinstall

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/devenv"
)

var (
	env    *devenv.Env
	cs     *kubernetes.Clientset
	root   string
	dirBin string
	// bootstrapOutput is what banlieue bootstrap operator --wait printed.
	bootstrapOutput string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	dirBin = filepath.Join(root, "bin")
	os.Exit(devenv.NodeSuite{Name: "nodeinstall", Root: root, PodsOnly: true,
		Ready: func(e *devenv.Env) error {
			env = e
			return install(context.Background())
		}}.Run(m))
}

// install runs banlieue bootstrap operator --wait.
func install(ctx context.Context) error {
	var err error
	if cs, err = kubernetes.NewForConfig(env.Admin); err != nil {
		return err
	}
	out, err := banlieue("bootstrap", "operator", "--version=v0.1.0", "--wait", "--timeout=5m")
	bootstrapOutput = out
	if err != nil {
		return fmt.Errorf("banlieue bootstrap operator --wait: %v\n%s\n%s", err, out, env.PodsSummary(ctx))
	}
	return nil
}

// banlieue runs the banlieue binary (make build) as the administrator.
func banlieue(args ...string) (string, error) {
	cmd := exec.Command(filepath.Join(dirBin, "banlieue"), append(args, "--kubeconfig="+env.AdminKubeconfig)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return out.String(), err
}
