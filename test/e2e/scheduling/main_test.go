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

// Package scheduling runs the core controllers in pod mode: the shipped
// controller Deployment, as it is (its replicas elect a leader), as pods
// of the release image on a real node, against banlieue's API server run
// as a process (devenv.NodeSuite, as test/e2e/node). No test here kills or
// pauses a component, so none needs process mode. The tests read the
// replicas' probes and metrics at their pod IPs and scan their pods'
// logs, copied as they are written.
//
// The tests play the providers, writing Provider, VMImage and
// VSphereMachine status: the controller is under test, not the providers,
// and playing them sets each failure domain, capability and machine state
// the scheduling checks need at the moment they need it, with no backend.
// TestEmbeddedControllers starts an environment of its own (embedded_test.go).
package scheduling

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/devenv"
)

const (
	ns = devenv.Namespace
	// deployment is the shipped controller Deployment's name.
	deployment = "banlieue-controller"
)

var (
	env     *devenv.Env
	c       client.Client
	root    string
	kubectl string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	kubectl = filepath.Join(root, "bin", "kubectl")
	os.Exit(devenv.NodeSuite{Name: "scheduling", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC}, ScanPodLogs: true,
		Ready: func(e *devenv.Env) error {
			env = e
			scheme, err := controllers.Scheme()
			if err != nil {
				return err
			}
			if c, err = client.New(env.Admin, client.Options{Scheme: scheme}); err != nil {
				return err
			}
			return installController()
		}}.Run(m))
}

// installController applies the shipped controller Deployment, copies
// its pods' logs (controller-*, env.FollowLogs) from then on, and waits
// for its rollout.
func installController() error {
	manifest := filepath.Join(root, "artifacts", "deploy", "base", "deployment-controller.yaml")
	if out, err := env.Kubectl("", "apply", "-f", manifest); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	d := &appsv1.Deployment{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: deployment}, d); err != nil {
		return err
	}
	if err := env.FollowLogs(ns, metav1.FormatLabelSelector(d.Spec.Selector), "controller"); err != nil {
		return err
	}
	return env.RolloutStatus(context.Background(), ns, deployment, 2*time.Minute)
}
