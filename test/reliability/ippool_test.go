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

package reliability

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrlclient "sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

// TestIPPoolFailover: two controllers with leader election serve a burst
// of IP address claims on one pool; the leader is SIGKILLed a third of
// the way in. Every claim ends bound, and no address is handed out twice:
// what the leader had handed out lives in the API (IPAddressReservations),
// not in its memory, so its successor cannot give it again.
func TestIPPoolFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, _ := ownEnv(ctx, t, devenv.Config{})
	ctrllog.SetLogger(klog.NewKlogr())
	scheme, err := controllers.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := ctrlclient.New(env.Admin, ctrlclient.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	leader, leaseHolder := leaderAndStandby(ctx, t, env)

	const ns = "ipam-failover"
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	// A /23 (510 addresses less the gateway) serves the long run too.
	pool := &infrav1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "failover"},
		Spec: infrav1.IPPoolSpec{Addresses: []string{"10.40.0.0/23"}, Prefix: 23, Gateway: "10.40.0.1"}}
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	total := size(60, 400)
	killAt := int64(total / 3)
	var (
		next    atomic.Int64
		creates count.Ops
		wg      sync.WaitGroup
		mu      sync.Mutex
		claims  []string
	)
	killed := make(chan struct{})
	for range 4 {
		wg.Go(func() {
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				if i == killAt {
					close(killed)
				}
				c := &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("claim-%03d", i), Namespace: ns},
					Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: infrav1.GroupName, Kind: infrav1.IPPoolKind, Name: pool.Name}}}
				for ctx.Err() == nil {
					err := admin.Create(ctx, c)
					if err == nil || apierrors.IsAlreadyExists(err) {
						creates.Done(c.Name, err) // AlreadyExists: an earlier attempt's reply was lost, not its write
						mu.Lock()
						claims = append(claims, c.Name)
						mu.Unlock()
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		})
	}
	<-killed
	first := leaseHolder()
	leader.Kill()
	wg.Wait()

	// Every claim bound, by the controller that took over.
	var bound map[string]int
	eventually(t, 2*time.Minute, func() error {
		var list ipamv1.IPAddressClaimList
		if err := admin.List(ctx, &list, ctrlclient.InNamespace(ns)); err != nil {
			return err
		}
		var names []string
		for _, c := range list.Items {
			if c.Status.AddressRef.Name != "" {
				names = append(names, c.Name)
			}
		}
		bound = count.Sightings(names)
		if missing := count.Missing(claims, bound); len(missing) > 0 {
			return fmt.Errorf("%d of %d claims have no address yet, the first %s", len(missing), len(claims), missing[0])
		}
		return nil
	})
	if h := leaseHolder(); h == "" || h == first {
		t.Errorf("the lease is held by %q, not by the controller that took over from %q", h, first)
	}
	// Every address handed out, by the address: one given to two claims
	// shows as a duplicate (each claim's IPAddress is owned by it, so
	// neither is collected).
	var addresses ipamv1.IPAddressList
	if err := admin.List(ctx, &addresses, ctrlclient.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var handedOut []string
	for _, a := range addresses.Items {
		handedOut = append(handedOut, a.Spec.Address)
	}
	dup, twice := count.Duplicated(count.Sightings(handedOut))
	lost := count.Missing(claims, bound)
	if dup > 0 || len(lost) > 0 {
		t.Errorf("%d addresses handed out twice (%v), %d claims without one", dup, twice, len(lost))
	}
	t.Logf("%d claims on one pool across the leader's SIGKILL", creates.N())
	record(t, row{Scenario: "IP pool: 2 controllers with leader election; the leader SIGKILLed during a burst of address claims",
		Operations: creates.N(), Faults: "SIGKILL of the leading controller", Lost: table.Counted(len(lost)), Dup: table.Counted(dup)})
}
