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

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers/blackhole"
	"github.com/firestoned/banlieue/test/reliability/table"
)

// provisionAll creates n machines of provider named prefix-i and returns
// how long it took until every one was Ready.
func provisionAll(t *testing.T, prefix, provider string, n int) (names []string, took time.Duration) {
	t.Helper()
	ctx := context.Background()
	start := time.Now()
	for i := range n {
		name := fmt.Sprintf("%s%d", prefix, i)
		names = append(names, name)
		if err := c.Create(ctx, crashMachine(name, provider)); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 3*time.Minute, func() error {
		machines, err := listMachines()
		if err != nil {
			return err
		}
		for _, name := range names {
			if vsm := machines[name]; vsm == nil || !isReady(vsm) {
				return fmt.Errorf("%s not Ready", name)
			}
		}
		return nil
	})
	return names, time.Since(start)
}

// TestDeadBackendStallsNobody (its file sorts before secrets_test.go,
// whose leak search must run last): two Providers served by one provider pod, one
// pointed at a black hole (a listener that accepts and never answers),
// with machines of its own keeping the machine workers asking for it.
// The live Provider's provisioning rate stays at least 0.8 of its rate
// alone; the dead one is reported ConnectFailed.
func TestDeadBackendStallsNobody(t *testing.T) {
	ctx := context.Background()
	servingProvider(t, "rate-live", nil)
	n := table.Size(32, 128)
	// A first batch warms the provider (template lookups, cached
	// references, connections) so the rates compare like with like.
	warm, _ := provisionAll(t, "rate-warm-", "rate-live", 8)
	deleteAndWaitGone(t, "rate-warm-", warm)

	alone, tookAlone := provisionAll(t, "rate-alone-", "rate-live", n)
	deleteAndWaitGone(t, "rate-alone-", alone)

	// The dead Provider was Ready (its failure domains stay published, so
	// its machines are admitted and ask for its backend), then its
	// endpoint went dark.
	hole := blackhole.Start(t)
	servingProvider(t, "rate-dead", nil)
	p := &v1alpha1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rate-dead"}, p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	p.Spec.Connection.Endpoint = podURL(t, "https://"+hole.Addr()+"/sdk")
	if err := c.Patch(ctx, p, patch); err != nil {
		t.Fatal(err)
	}
	if !hole.WaitAccepted(1, time.Minute) {
		t.Fatal("nothing dialled the dead Provider's endpoint")
	}
	var dead []string
	for i := range 4 {
		name := fmt.Sprintf("rate-dead-%d", i)
		dead = append(dead, name)
		if err := c.Create(ctx, crashMachine(name, "rate-dead")); err != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { releaseDead(t, dead) })
	// Measured in steady state: for WaitForLogin (3 s) after a login to
	// the dead backend starts, its machines' reconciles wait for it, each
	// holding a worker; then they are answered at once (the provider log
	// shows "the backend has not answered the login yet", then the login's
	// deadline).
	time.Sleep(4 * time.Second)

	with, tookWith := provisionAll(t, "rate-with-", "rate-live", n)
	rateAlone, rateWith := float64(n)/tookAlone.Seconds(), float64(n)/tookWith.Seconds()
	t.Logf("rate alone %.1f machines/s (%d in %v); beside a dead Provider %.1f/s (%d in %v); ratio %.2f; black hole dialled %d times",
		rateAlone, n, tookAlone.Round(time.Millisecond), rateWith, n, tookWith.Round(time.Millisecond), rateWith/rateAlone, hole.Accepted())
	for _, name := range dead {
		if vsm, err := getMachine(name); err == nil {
			t.Logf("dead Provider's machine %s: %+v", name, meta.FindStatusCondition(vsm.Status.Conditions, infrav1.ReadyCondition))
		}
	}
	if rateWith < 0.8*rateAlone {
		t.Errorf("beside a dead Provider the live one provisions %.1f/s, below 0.8 of its %.1f/s alone", rateWith, rateAlone)
	}
	eventually(t, 2*time.Minute, func() error {
		p := &v1alpha1.Provider{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rate-dead"}, p); err != nil {
			return err
		}
		if cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady); cond == nil || cond.Reason != v1alpha1.ProviderReasonConnectFailed {
			return fmt.Errorf("dead Provider's Ready %+v, want ConnectFailed", cond)
		}
		return nil
	})
	reliability.Record(t, table.Row{Scenario: fmt.Sprintf("two vSphere Providers in one provider pod, one at a listener that accepts and never answers (it was Ready; its %d new machines ask for it): the other provisions %d machines at %.2f of its rate alone (%.1f/s beside it, %.1f/s alone; ≥ 0.8 required)",
		len(dead), n, rateWith/rateAlone, rateWith, rateAlone),
		Operations: 2 * n, Faults: "a black-holed backend endpoint"})
	deleteAndWaitGone(t, "rate-with-", with)
	if err := c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "rate-live"}}); err != nil {
		t.Error(err)
	}
}

// releaseDead deletes the dead Provider's machines and, since their
// backend never answers, lets them go without it.
func releaseDead(t *testing.T, names []string) {
	ctx := context.Background()
	for _, name := range names {
		vsm := &infrav1.VSphereMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vsm); err != nil {
			continue
		}
		patch := client.MergeFrom(vsm.DeepCopy())
		vsm.Finalizers = nil
		if err := c.Patch(ctx, vsm, patch); err != nil {
			t.Logf("releasing %s: %v", name, err)
		}
		_ = c.Delete(ctx, vsm)
	}
	p := &v1alpha1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rate-dead"}, p); err == nil {
		_ = c.Delete(ctx, p)
	}
}
