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
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

func readExample(t *testing.T, name string, obj any) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "artifacts", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		t.Fatal(err)
	}
}

// schedulable makes the seed guide's Provider, class and image ready to
// schedule on, playing the vSphere provider's part in their status.
func schedulable(t *testing.T, ctx context.Context, c clientset.Interface) {
	t.Helper()
	var class v1alpha1.VMClass
	var image v1alpha1.VMImage
	var provider v1alpha1.Provider
	readExample(t, "vmclass.yaml", &class)
	readExample(t, "vmimage.yaml", &image)
	readExample(t, "provider.yaml", &provider)
	if _, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, &class, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	img, err := c.BanlieueV1alpha1().VMImages().Create(ctx, &image, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.BanlieueV1alpha1().Providers(provider.Namespace).Create(ctx, &provider, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	p.Status.Conditions = []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "InventoryWalked", LastTransitionTime: metav1.Now()}}
	p.Status.FailureDomains = []v1alpha1.FailureDomain{
		{Name: "prod-vsphere-dc1-c1", Datacenter: "DC1", Cluster: "C1"}, {Name: "prod-vsphere-dc1-c2", Datacenter: "DC1", Cluster: "C2"}}
	if _, err := c.BanlieueV1alpha1().Providers(p.Namespace).UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	img.Status.PerProvider = []v1alpha1.ImageProviderStatus{{Provider: p.Namespace + "/" + p.Name, Ready: true}}
	if _, err := c.BanlieueV1alpha1().VMImages().UpdateStatus(ctx, img, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestHAFailover: two banlieue replicas share one etcd behind the
// APIService, and two controller replicas take turns through a Lease.
// Clients creating VMs through kube-apiserver keep going when a banlieue
// replica is SIGKILLed; the controllers' lease moves within its duration
// when the leader is SIGKILLed; every VM is scheduled once, with exactly
// one VSphereMachine.
func TestHAFailover(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	ha, c := ownEnv(ctx, t, devenv.Config{BanlieueReplicas: 2})
	schedulable(t, ctx, c)
	leader, leaseHolder := leaderAndStandby(ctx, t, ha)
	first := leaseHolder()

	const ns = devenv.Namespace
	dc, err := dynamic.NewForConfig(ha.Admin)
	if err != nil {
		t.Fatal(err)
	}
	machineClient := dc.Resource(infrav1.GroupVersion.WithResource("vspheremachines")).Namespace(ns)
	// Every VSphereMachine ever created during the run, from a watch
	// started before the first VM: a machine deleted and created again (a
	// second leader redoing the first's work) has another UID under the
	// same name, which the final list alone would never show.
	machines := watchMachines(ctx, t, machineClient)

	total := size(60, 600)
	var (
		next     atomic.Int64
		failures atomic.Int64
		creates  count.Ops
		wg       sync.WaitGroup
	)
	vms := c.BanlieueV1alpha1().VirtualMachines(ns)
	var example v1alpha1.VirtualMachine
	readExample(t, "virtualmachine.yaml", &example)
	killAt := int64(total / 3)
	killed := make(chan struct{})
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(total) {
					return
				}
				if i == killAt {
					close(killed)
				}
				vm := example.DeepCopy()
				vm.Name = fmt.Sprintf("ha-%03d", i)
				for ctx.Err() == nil {
					_, err := vms.Create(ctx, vm, metav1.CreateOptions{})
					if err == nil || apierrors.IsAlreadyExists(err) {
						creates.Done(vm.Name, err) // AlreadyExists: an earlier attempt's reply was lost, not its write
						break
					}
					failures.Add(1)
					time.Sleep(100 * time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}()
	}
	<-killed
	ha.CrashBanlieueReplica(0)
	killedLeader := time.Now()
	leader.Kill()
	wg.Wait()
	if ctx.Err() != nil {
		t.Fatal("creates did not finish after the banlieue replica was killed")
	}
	var moved time.Duration
	eventually(t, time.Minute, func() error {
		if h := leaseHolder(); h == "" || h == first {
			return fmt.Errorf("lease still held by %q", h)
		}
		moved = time.Since(killedLeader)
		return nil
	})
	if moved > 15*time.Second+2*time.Second+5*time.Second {
		t.Errorf("the lease moved after %s, beyond its 15 s duration", moved)
	}
	// Every VM scheduled, each with exactly one VSphereMachine.
	eventually(t, 2*time.Minute, func() error {
		list, err := vms.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		n := 0
		for _, vm := range list.Items {
			if strings.HasPrefix(vm.Name, "ha-") {
				if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled) {
					return fmt.Errorf("%s not scheduled", vm.Name)
				}
				n++
			}
		}
		if n != total {
			return fmt.Errorf("%d of %d VMs exist", n, total)
		}
		return nil
	})
	// Count every VSphereMachine seen, by the VM that controls it (its
	// owner reference's UID), whatever its name or lifetime: two machines
	// for one VM show as a duplicate, a VM with none as lost.
	all, err := vms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var want []types.UID
	for _, vm := range all.Items {
		if strings.HasPrefix(vm.Name, "ha-") {
			want = append(want, vm.UID)
		}
	}
	per := count.Distinct(machines.seen(ctx, t))
	lost := count.Missing(want, per)
	dup, dupOwners := count.Duplicated(per)
	if dup > 0 || len(lost) > 0 {
		t.Errorf("VSphereMachines per VM: %d VMs without one (%v), %d extra (VMs %v)", len(lost), lost, dup, dupOwners)
	}
	t.Logf("%d VMs created with %d failed attempts across the failover; the lease moved in %s", creates.N(), failures.Load(), moved.Round(time.Second))
	record(t, row{Scenario: "HA: 2 banlieue replicas behind one APIService, 2 controllers with leader election; one replica and the leader SIGKILLed mid-stream",
		Operations: creates.N(), Faults: "SIGKILL of a banlieue replica and of the leading controller", Lost: table.Counted(len(lost)), Dup: table.Counted(dup)})
}

// leaderAndStandby starts controller-0 and waits until it holds the
// controllers' Lease, then starts controller-1 as its standby: the leader
// is the process a test kills. leaseHolder reads the Lease's holder ("" for
// none).
func leaderAndStandby(ctx context.Context, t *testing.T, env *devenv.Env) (leader devenv.Process, leaseHolder func() string) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	leaseHolder = func() string {
		l, err := kube.CoordinationV1().Leases(devenv.Namespace).Get(ctx, "banlieue-controllers", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	if leader, err = env.StartController(0); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if leaseHolder() == "" {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	if _, err := env.StartController(1); err != nil {
		t.Fatal(err)
	}
	return leader, leaseHolder
}

// machineWatch collects every VSphereMachine a watch delivers as
// (controlling VM's UID, machine's UID).
type machineWatch struct {
	client dynamic.ResourceInterface
	mu     sync.Mutex
	all    []count.Seen[types.UID, types.UID]
	done   chan error
}

// watchMachines starts collecting machines: those listed now, then every
// one a watch from that list's resourceVersion adds or changes, resuming
// after a disconnect. It stops with ctx.
func watchMachines(ctx context.Context, t *testing.T, mc dynamic.ResourceInterface) *machineWatch {
	t.Helper()
	list, err := mc.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	w := &machineWatch{client: mc, done: make(chan error, 1)}
	for i := range list.Items {
		w.add(&list.Items[i])
	}
	rw, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return mc.Watch(ctx, o) },
	})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer rw.Stop()
		for ev := range rw.ResultChan() {
			if m, ok := ev.Object.(*unstructured.Unstructured); ok && ev.Type != watch.Error {
				w.add(m)
			} else if ev.Type == watch.Error {
				w.done <- apierrors.FromObject(ev.Object)
				return
			}
		}
		w.done <- nil
	}()
	return w
}

func (w *machineWatch) add(m *unstructured.Unstructured) {
	ref := metav1.GetControllerOf(m)
	if ref == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.all = append(w.all, count.Seen[types.UID, types.UID]{Key: ref.UID, ID: m.GetUID()})
}

// seen is every machine the watch delivered, and those of a last list, so
// a machine whose events are still on their way is counted too.
func (w *machineWatch) seen(ctx context.Context, t *testing.T) []count.Seen[types.UID, types.UID] {
	t.Helper()
	select {
	case err := <-w.done:
		t.Fatalf("the VSphereMachine watch ended early: %v", err)
	default:
	}
	list, err := w.client.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range list.Items {
		w.add(&list.Items[i])
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.all)
}
