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
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	applyv1alpha1 "github.com/firestoned/banlieue/pkg/generated/applyconfiguration/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

const (
	clients   = 32
	sharedVMs = 50
	// counterAnnotation holds a VM's count of acknowledged increments.
	counterAnnotation = "reliability.banlieue.io/count"
)

func namespace(t *testing.T, name string) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// testVM is a small valid VirtualMachine (its class and image need not
// exist: admission checks shape, the scheduler references).
func testVM(ns, name string) *v1alpha1.VirtualMachine {
	return &v1alpha1.VirtualMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "small"}, ImageRef: v1alpha1.LocalObjectReference{Name: "ubuntu"},
			HardwareOverride: &v1alpha1.HardwareOverride{CPUs: ptr.To[int32](2)},
		},
	}
}

func vmName(i int) string { return fmt.Sprintf("vm-%03d", i) }

// patient retries a conflicting write until it goes through: contention
// here is the point, not a failure.
// (No Cap: reaching a Backoff's cap ends its steps.)
var patient = wait.Backoff{Steps: 500, Duration: 10 * time.Millisecond, Factor: 1, Jitter: 2}

// TestConcurrentUpdatesLoseNothing: 32 clients increment counters on the
// same 50 VMs through kube-apiserver, each a read-modify-write with the
// resourceVersion (optimistic concurrency, retried on conflict). Every
// acknowledged increment must be in the final state.
func TestConcurrentUpdatesLoseNothing(t *testing.T) {
	ctx := context.Background()
	const ns = "concurrent-updates"
	namespace(t, ns)
	vms := client.BanlieueV1alpha1().VirtualMachines(ns)
	for i := range sharedVMs {
		if _, err := vms.Create(ctx, testVM(ns, vmName(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rounds := size(20, 200)
	var (
		conflicts atomic.Int64
		updates   count.Ops // every acknowledged increment, one per client and round
		ackedMu   sync.Mutex
		acked     = map[string]int{} // acknowledged increments per VM
		wg        sync.WaitGroup
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				// Four clients on each VM at a time: they contend.
				i := (r + c/4) % sharedVMs
				err := retry.RetryOnConflict(patient, func() error {
					vm, err := vms.Get(ctx, vmName(i), metav1.GetOptions{})
					if err != nil {
						return err
					}
					n, _ := strconv.Atoi(vm.Annotations[counterAnnotation])
					if vm.Annotations == nil {
						vm.Annotations = map[string]string{}
					}
					vm.Annotations[counterAnnotation] = strconv.Itoa(n + 1)
					_, err = vms.Update(ctx, vm, metav1.UpdateOptions{})
					if apierrors.IsConflict(err) {
						conflicts.Add(1)
					}
					return err
				})
				if err != nil {
					t.Errorf("client %d round %d: %v", c, r, err)
					return
				}
				updates.Answered(fmt.Sprintf("client %d round %d", c, r))
				ackedMu.Lock()
				acked[vmName(i)]++
				ackedMu.Unlock()
			}
		}()
	}
	wg.Wait()
	stored := map[string]int{}
	for i := range sharedVMs {
		vm, err := vms.Get(ctx, vmName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stored[vm.Name], _ = strconv.Atoi(vm.Annotations[counterAnnotation])
	}
	// An increment applied twice would show as a count above the
	// acknowledged ones.
	lost, lostVMs := count.Shortfall(acked, stored)
	dup, dupVMs := count.Shortfall(stored, acked)
	if lost > 0 || dup > 0 {
		t.Errorf("%d acknowledged increments lost (VMs %v), %d applied beyond those acknowledged (VMs %v)", lost, lostVMs, dup, dupVMs)
	}
	t.Logf("%d increments acknowledged after %d conflicts", updates.N(), conflicts.Load())
	if conflicts.Load() == 0 {
		t.Error("no conflicts at all: the clients did not contend, so this proved nothing")
	}
	record(t, row{Scenario: fmt.Sprintf("%d clients update the same %d VMs (optimistic concurrency, retry on conflict)", clients, sharedVMs),
		Operations: updates.N(), Faults: "concurrent writers (409 Conflict)", Lost: table.Counted(lost), Dup: table.Counted(dup)})
}

// TestConcurrentApplyLoseNothing: 32 field managers server-side apply
// their own label to the same 50 VMs over and over: each VM ends with every
// manager's last value, and managedFields names every manager.
func TestConcurrentApplyLoseNothing(t *testing.T) {
	ctx := context.Background()
	const ns = "concurrent-apply"
	namespace(t, ns)
	vms := client.BanlieueV1alpha1().VirtualMachines(ns)
	for i := range sharedVMs {
		if _, err := vms.Create(ctx, testVM(ns, vmName(i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	rounds := size(4, 40)
	var (
		wg      sync.WaitGroup
		applied count.Ops
		ackedMu sync.Mutex
		// acked is each manager's last acknowledged value on each VM,
		// keyed "vm/manager".
		acked = map[string]string{}
	)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			manager := fmt.Sprintf("manager-%02d", c)
			for r := range rounds {
				for i := range sharedVMs {
					i := (i + c) % sharedVMs
					cfg := applyv1alpha1.VirtualMachine(vmName(i), ns).
						WithLabels(map[string]string{"reliability.banlieue.io/" + manager: strconv.Itoa(r)})
					if _, err := vms.Apply(ctx, cfg, metav1.ApplyOptions{FieldManager: manager}); err != nil {
						t.Errorf("%s round %d %s: %v", manager, r, vmName(i), err)
						return
					}
					applied.Answered(fmt.Sprintf("%s round %d %s", manager, r, vmName(i)))
					ackedMu.Lock()
					acked[vmName(i)+"/"+manager] = strconv.Itoa(r)
					ackedMu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if len(acked) != clients*sharedVMs {
		t.Errorf("%d of %d managers' labels acknowledged", len(acked), clients*sharedVMs)
	}
	// stored holds a manager's label only where managedFields names the
	// manager: a label kept without its owner is lost too.
	stored := map[string]string{}
	for i := range sharedVMs {
		vm, err := vms.Get(ctx, vmName(i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range vm.ManagedFields {
			if label, ok := vm.Labels["reliability.banlieue.io/"+mf.Manager]; ok && mf.Operation == metav1.ManagedFieldsOperationApply {
				stored[vm.Name+"/"+mf.Manager] = label
			}
		}
	}
	lost := count.Lost(acked, stored)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged labels not stored with their last value and manager: %v", len(lost), lost)
	}
	record(t, row{Scenario: fmt.Sprintf("%d field managers server-side apply to the same %d VMs", clients, sharedVMs),
		Operations: applied.N(), Faults: "concurrent appliers", Lost: table.Counted(len(lost))})
}
