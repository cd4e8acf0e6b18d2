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

package ippool_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/controllers/ippool"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// controlPlane starts etcd, kube-apiserver and kube-controller-manager
// (whose garbage collector deletes a claim's IPAddress after it) with the
// shipped RBAC and CRDs, and returns an administrator's client and the
// REST config of the controller's ServiceAccount, so the reconcilers run
// with exactly the shipped ClusterRole.
func controlPlane(ctx context.Context, t *testing.T) (client.Client, string) {
	t.Helper()
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	env, err := devenv.Start(ctx, devenv.Config{Dir: t.TempDir(), BinDir: filepath.Join(wd, "..", "..", "..", "bin"),
		ControlPlaneOnly: true, Setup: dev.InstallRBAC})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(env.Stop)
	scheme, err := controllers.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	admin, err := client.New(env.Admin, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.UserKubeconfig(devenv.ControllerUser, "system:serviceaccounts", "system:serviceaccounts:"+devenv.Namespace)
	if err != nil {
		t.Fatal(err)
	}
	return admin, kubeconfig
}

// lagging delays every read of a watch of the addresses in use (IPAddresses
// and IPAddressReservations) by lag: the cache fed by it shows each one that
// much later than the API server has it, as a loaded leader's cache does,
// while it sees claims as soon as the other leader.
type lagging struct {
	rt  http.RoundTripper
	lag time.Duration
}

func (l lagging) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := l.rt.RoundTrip(req)
	if err == nil && req.URL.Query().Get("watch") == "true" &&
		(strings.HasSuffix(req.URL.Path, "/ipaddresses") || strings.HasSuffix(req.URL.Path, "/ipaddressreservations")) {
		resp.Body = &laggingBody{ReadCloser: resp.Body, lag: l.lag}
	}
	return resp, err
}

type laggingBody struct {
	io.ReadCloser
	lag time.Duration
}

func (b *laggingBody) Read(p []byte) (int, error) {
	time.Sleep(b.lag)
	return b.ReadCloser.Read(p)
}

// startReconciler runs one ippool controller in a manager of its own: its
// own cache and work queue, no leader election, as two leaders overlap
// while a lease changes hands (the old one has not noticed yet). Its cache
// shows the addresses in use lag late. It stops with ctx.
func startReconciler(ctx context.Context, t *testing.T, kubeconfig string, lag time.Duration) {
	t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	if lag > 0 {
		cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return lagging{rt: rt, lag: lag} })
	}
	scheme, err := controllers.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		// Both managers name their controller "ippool" in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := (&ippool.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func claimOf(ns, name, pool string) *ipamv1.IPAddressClaim {
	return &ipamv1.IPAddressClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: ipamv1.IPAddressClaimSpec{PoolRef: ipamv1.IPPoolReference{APIGroup: infrav1.GroupName, Kind: infrav1.IPPoolKind, Name: pool}}}
}

// addresses counts the IPAddresses of every pool by POOL/ADDRESS.
func addresses(ctx context.Context, t *testing.T, c client.Client) map[string]int {
	t.Helper()
	var list ipamv1.IPAddressList
	if err := c.List(ctx, &list); err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, a := range list.Items {
		seen = append(seen, a.Labels[ippool.PoolLabel]+"/"+a.Spec.Address)
	}
	return count.Sightings(seen)
}

// bound counts the bound claims by NAMESPACE/NAME.
func bound(ctx context.Context, t *testing.T, c client.Client) map[string]int {
	t.Helper()
	var claims ipamv1.IPAddressClaimList
	if err := c.List(ctx, &claims); err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, c := range claims.Items {
		if c.Status.AddressRef.Name != "" {
			out = append(out, c.Namespace+"/"+c.Name)
		}
	}
	return count.Sightings(out)
}

// TestTwoLeaders: two ippool controllers with their own caches serve
// bursts of claims on small pools at once, as two leaders overlapping in a
// failover (the old one has not seen its lease go yet) or a leader whose
// cache lags. Every claim is bound while its pool has room, and no address
// is handed out twice. With the addresses handed out kept unique in each
// leader's memory only (before IPAddressReservation), this test measured
// 37, 32 and 24 addresses handed out twice in three runs (of 144 claims).
func TestTwoLeaders(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	defer cancel()
	ctrl.SetLogger(klog.NewKlogr())
	admin, kubeconfig := controlPlane(ctx, t)
	run, stop := context.WithCancel(ctx)
	defer stop()
	// One leader's cache is current, the other's shows the addresses in
	// use 300 ms late: each decides on what its own cache shows.
	startReconciler(run, t, kubeconfig, 0)
	startReconciler(run, t, kubeconfig, 300*time.Millisecond)

	namespaces := []string{"team-a", "team-b", "team-c"}
	for _, ns := range namespaces {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	// Rounds of 3 pools of 24 addresses (a /27's 30, minus the gateway and
	// 5 excluded), each with as many claims: whether two leaders meet on an
	// address depends on timing, so more rounds catch it more surely.
	const rounds, pools, size = 2, 3, 24
	var names []string
	for r := range rounds {
		for p := range pools {
			pool := &infrav1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("small-%d-%d", r, p)}, Spec: infrav1.IPPoolSpec{
				Addresses: []string{fmt.Sprintf("10.2%d.%d.0/27", r, p)}, Prefix: 27, Gateway: fmt.Sprintf("10.2%d.%d.1", r, p),
				ExcludedAddresses: []string{fmt.Sprintf("10.2%d.%d.26-10.2%d.%d.30", r, p, r, p)}}}
			if err := admin.Create(ctx, pool); err != nil {
				t.Fatal(err)
			}
		}
		// The burst: the pools in turn, from 4 clients at once.
		var (
			next atomic.Int64
			wg   sync.WaitGroup
			mu   sync.Mutex
		)
		for range 4 {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= pools*size {
						return
					}
					c := claimOf(namespaces[i%int64(len(namespaces))], fmt.Sprintf("burst-%d-%02d", r, i), fmt.Sprintf("small-%d-%d", r, i%pools))
					if err := admin.Create(ctx, c); err != nil {
						t.Error(err)
						return
					}
					mu.Lock()
					names = append(names, c.Namespace+"/"+c.Name)
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		// Every claim bound, or the time is up: the counts below say what
		// is missing either way.
		for deadline := time.Now().Add(time.Minute); len(bound(ctx, t, admin)) < len(names) && time.Now().Before(deadline); {
			time.Sleep(200 * time.Millisecond)
		}
	}
	lost := count.Missing(names, bound(ctx, t, admin))
	dup, dupAddresses := count.Duplicated(addresses(ctx, t, admin))
	t.Logf("%d claims on %d pools of %d served by two controllers: %d without an address, %d duplicated addresses %v", len(names), rounds*pools, size, len(lost), dup, dupAddresses)
	if dup > 0 {
		t.Errorf("%d addresses handed out twice or more: %v", dup, dupAddresses)
	}
	if len(lost) > 0 {
		t.Errorf("%d claims without an address while their pool had room: %v", len(lost), lost)
	}
}

// readyOf is a claim's Ready condition, once it has one.
func readyOf(ctx context.Context, c client.Client, ns, name string) (*metav1.Condition, *ipamv1.IPAddressClaim, error) {
	claim := &ipamv1.IPAddressClaim{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, claim); err != nil {
		return nil, nil, err
	}
	for _, cond := range claim.Status.Conditions {
		if cond.Type == "Ready" {
			return &cond, claim, nil
		}
	}
	return nil, claim, fmt.Errorf("%s/%s has no Ready condition yet", ns, name)
}

// TestAllowedNamespacesAndRelease: a pool serves the namespaces its
// spec.allowedNamespaces lists only, saying so to the others' claims; when
// it is full, deleting a claim frees its reservation once its IPAddress is
// gone, and a waiting claim gets the address, still never twice.
func TestAllowedNamespacesAndRelease(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	ctrl.SetLogger(klog.NewKlogr())
	admin, kubeconfig := controlPlane(ctx, t)
	run, stop := context.WithCancel(ctx)
	defer stop()
	startReconciler(run, t, kubeconfig, 0)
	for _, ns := range []string{"team-a", "team-b"} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	pool := &infrav1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "guarded"}, Spec: infrav1.IPPoolSpec{
		Addresses: []string{"10.30.0.1-10.30.0.2"}, Prefix: 24, AllowedNamespaces: []string{"team-a"}}}
	if err := admin.Create(ctx, pool); err != nil {
		t.Fatal(err)
	}
	for _, c := range []*ipamv1.IPAddressClaim{claimOf("team-b", "b0", pool.Name), claimOf("team-a", "a0", pool.Name), claimOf("team-a", "a1", pool.Name)} {
		if err := admin.Create(ctx, c); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, func() error {
		cond, _, err := readyOf(ctx, admin, "team-b", "b0")
		if err != nil {
			return err
		}
		if cond.Status != metav1.ConditionFalse || cond.Reason != ippool.ReasonNamespaceNotAllowed ||
			!strings.Contains(cond.Message, "spec.allowedNamespaces") || !strings.Contains(cond.Message, "team-b") {
			return fmt.Errorf("team-b/b0 Ready: %+v", cond)
		}
		return nil
	})
	for _, name := range []string{"a0", "a1"} {
		eventually(t, time.Minute, func() error {
			if cond, _, err := readyOf(ctx, admin, "team-a", name); err != nil || cond.Status != metav1.ConditionTrue {
				return fmt.Errorf("team-a/%s Ready: %+v (%v)", name, cond, err)
			}
			return nil
		})
	}
	// Full: a third claim waits, and the pool says so.
	if err := admin.Create(ctx, claimOf("team-a", "a2", pool.Name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		cond, _, err := readyOf(ctx, admin, "team-a", "a2")
		if err != nil {
			return err
		}
		if cond.Reason != ippool.ReasonPoolExhausted {
			return fmt.Errorf("team-a/a2 Ready: %+v", cond)
		}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(pool), pool); err != nil {
			return err
		}
		if pool.Status.Used != 2 || pool.Status.Free != 0 || pool.Status.Total != 2 {
			return fmt.Errorf("pool status %+v", pool.Status)
		}
		return nil
	})
	var reservations infrav1.IPAddressReservationList
	if err := admin.List(ctx, &reservations); err != nil || len(reservations.Items) != 2 {
		t.Fatalf("reservations: %d (%v), want 2", len(reservations.Items), err)
	}
	// Freed: the garbage collector deletes a0's IPAddress after it, then
	// the controller its reservation, and a2 gets the address.
	if err := admin.Delete(ctx, claimOf("team-a", "a0", pool.Name)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if cond, _, err := readyOf(ctx, admin, "team-a", "a2"); err != nil || cond.Status != metav1.ConditionTrue {
			return fmt.Errorf("team-a/a2 Ready: %+v (%v)", cond, err)
		}
		return nil
	})
	dup, dupAddresses := count.Duplicated(addresses(ctx, t, admin))
	if dup > 0 {
		t.Errorf("%d addresses handed out twice: %v", dup, dupAddresses)
	}
	if err := admin.List(ctx, &reservations); err != nil || len(reservations.Items) != 2 {
		t.Errorf("reservations: %d (%v), want 2 (a1's and a2's)", len(reservations.Items), err)
	}
	for _, res := range reservations.Items {
		if res.Spec.Claim.Name == "a0" {
			t.Errorf("a0's reservation %s outlived it", res.Name)
		}
	}
}
