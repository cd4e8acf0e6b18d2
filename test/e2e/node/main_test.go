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
	"os"
	"path/filepath"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
)

var (
	env  *devenv.Env
	cs   *kubernetes.Clientset
	root string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	os.Exit(devenv.NodeSuite{Name: "node", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC},
		Ready: func(e *devenv.Env) (err error) {
			env = e
			cs, err = kubernetes.NewForConfig(env.Admin)
			return err
		}}.Run(m))
}
