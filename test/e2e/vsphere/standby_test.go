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
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/devenv"
)

// TestStandbyTakesOver: the shipped controller and vSphere provider
// Deployments (the operator's: TestOperatorWorkloads), two replicas each
// taking turns through their Lease (standbyTakesOver).
func TestStandbyTakesOver(t *testing.T) {
	for _, d := range []string{"banlieue-controller", providerDeployment} {
		t.Run(d, func(t *testing.T) { standbyTakesOver(t, d) })
	}
}

// standbyTakesOver: every pod of the Deployment is live and Ready (a
// standby can take over); the leader's /readyz?verbose says leading, the
// other's standby; once the leader's pod is deleted from the cordoned
// node (a drain), the former standby says leading. Cordoned, because the
// Deployment's replacement pod, started within a second, would otherwise
// race the standby for a released Lease and may win.
func standbyTakesOver(t *testing.T, deployment string) {
	t.Helper()
	ctx := context.Background()
	lead, all, err := env.WaitLeadership(ctx, ns, deployment, 2*time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range all {
		if err := env.LiveAndReady(ctx, ns, r, time.Minute); err != nil {
			t.Error(err)
		}
	}
	node := env.NodeName()
	uncordon := func() {
		if out, err := env.Kubectl("", "uncordon", node); err != nil {
			t.Errorf("kubectl uncordon: %v: %s", err, out)
		}
	}
	if out, err := env.Kubectl("", "cordon", node); err != nil {
		t.Fatalf("kubectl cordon: %v: %s", err, out)
	}
	t.Cleanup(uncordon)
	if out, err := env.Kubectl("", "-n", ns, "delete", "pod", lead.Pod, "--wait=false"); err != nil {
		t.Fatalf("kubectl delete pod %s: %v: %s", lead.Pod, err, out)
	}
	eventually(t, 2*time.Minute, func() error {
		for _, r := range all {
			if r.Pod == lead.Pod {
				continue
			}
			if state, err := devenv.Leadership(r.Health); err == nil && state == "leading" {
				return nil
			}
		}
		return fmt.Errorf("no former standby of %v leads after %s was deleted", all, lead.Pod)
	})
	// The replacement joins as standby: the Deployment whole again for
	// the tests after this one.
	uncordon()
	if err := env.RolloutStatus(ctx, ns, deployment, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}
