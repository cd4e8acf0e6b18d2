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

package scheduling

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/devenv"
)

// TestEmbeddedControllers: "banlieue apiserver --controllers=..." runs the
// controllers in the API server process; the VM's missing Provider is
// reported by them, with no "banlieue controller" process running.
//
// The flag is the API server's, and the suite's environment runs the
// controller Deployment, which would report the VM too: this test starts
// an environment of its own, without a node (one runs per machine, and the
// suite's has it), its API server a process as the suite's is.
func TestEmbeddedControllers(t *testing.T) {
	ctx := context.Background()
	// The embedded controllers act with the API server's identity, so it
	// gets the controller's roles too.
	setup := func(ctx context.Context, kubeconfig string) error {
		if err := dev.InstallRBAC(ctx, kubeconfig); err != nil {
			return err
		}
		sa := "--serviceaccount=" + devenv.APIServerNamespace + ":" + devenv.ServiceAccount
		for _, args := range [][]string{
			{"create", "clusterrolebinding", "embedded-controllers", "--clusterrole=banlieue-controller", sa},
			{"create", "rolebinding", "embedded-leader-election", "-n", devenv.Namespace, "--role=banlieue-controller-leader-election", sa},
		} {
			if out, err := exec.Command(kubectl, append([]string{"--kubeconfig=" + kubeconfig}, args...)...).CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %v: %s", args, err, out)
			}
		}
		return nil
	}
	e, err := devenv.Start(ctx, devenv.Config{
		Dir: t.TempDir(), BinDir: filepath.Join(root, "bin"), Setup: setup,
		BanlieueArgs: []string{"--controllers=" + controllers.VirtualMachine},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Stop()
	scheme, _ := controllers.Scheme()
	ec, err := client.New(e.Admin, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectl, "--kubeconfig="+e.AdminKubeconfig, "apply",
		"-f", filepath.Join(root, "artifacts/examples/vmclass.yaml"),
		"-f", filepath.Join(root, "artifacts/examples/vmimage.yaml"),
		"-f", filepath.Join(root, "artifacts/examples/virtualmachine.yaml")).CombinedOutput()
	if err != nil {
		t.Fatalf("apply: %v: %s", err, out)
	}
	vm := &v1alpha1.VirtualMachine{}
	eventually(t, 90*time.Second, func() error {
		if err := ec.Get(ctx, client.ObjectKey{Namespace: devenv.Namespace, Name: "db-prod-01"}, vm); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled); c == nil || c.Reason != "NoProviderMatched" {
			return fmt.Errorf("Scheduled condition %+v", c)
		}
		return nil
	})
}
