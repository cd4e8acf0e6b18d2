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

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	typedv1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
)

type vmInterface = typedv1alpha1.VirtualMachineInterface

// TestCrashDuringCreatesLosesNothing: clients create VMs through
// kube-apiserver while banlieue is SIGKILLed and restarted. Every create
// that was acknowledged (2xx) exists afterwards with the UID it was given,
// and a watch started before the crash, resumed from its last
// resourceVersion, delivers every acknowledged VM exactly once as ADDED.
func TestCrashDuringCreatesLosesNothing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const ns = "crash-creates"
	namespace(t, ns)
	vms := client.BanlieueV1alpha1().VirtualMachines(ns)
	list, err := vms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}

	// The watch resumes from the last resourceVersion it saw after every
	// disconnect; a 410 Gone (the restarted server's watch cache starts at
	// the present) is answered by a relist, as informers do.
	var (
		mu       sync.Mutex
		added    = map[string][]types.UID{}
		relisted atomic.Int64
	)
	watched := make(chan error, 1)
	go func() {
		watched <- watchResuming(ctx, vms, list.ResourceVersion, &relisted, func(vm *v1alpha1.VirtualMachine) {
			mu.Lock()
			added[vm.Name] = append(added[vm.Name], vm.UID)
			mu.Unlock()
		})
	}()

	total := size(300, 3000)
	var (
		next     atomic.Int64
		ackedMu  sync.Mutex
		acked    = map[string]types.UID{}
		failures atomic.Int64
		wg       sync.WaitGroup
	)
	crashAt := int64(total / 3)
	crashed := make(chan struct{})
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= total {
					return
				}
				if int64(i) == crashAt {
					close(crashed)
				}
				// Retry each VM until it is acknowledged or known to exist:
				// the stream keeps going through the outage.
				for ctx.Err() == nil {
					vm, err := vms.Create(ctx, testVM(ns, vmName(i)), metav1.CreateOptions{})
					if err == nil {
						ackedMu.Lock()
						acked[vm.Name] = vm.UID
						ackedMu.Unlock()
						break
					}
					failures.Add(1)
					if apierrors.IsAlreadyExists(err) {
						break // an earlier attempt's reply was lost, not its write
					}
					time.Sleep(100 * time.Millisecond)
				}
			}
		}()
	}
	<-crashed
	env.CrashBanlieue()
	time.Sleep(2 * time.Second) // creates fail meanwhile
	if err := env.StartBanlieue(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()

	// Every acknowledged create is stored, with the UID its reply carried.
	lost := 0
	for name, uid := range acked {
		vm, err := vms.Get(ctx, name, metav1.GetOptions{})
		if err != nil || vm.UID != uid {
			t.Errorf("acknowledged %s (uid %s): %v", name, uid, err)
			lost++
		}
	}
	// The watch saw each of them added, once.
	dup := 0
	eventually(t, time.Minute, func() error {
		select {
		case err := <-watched:
			t.Fatalf("the watch ended: %v", err)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		missing := 0
		for name := range acked {
			if len(added[name]) == 0 {
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d acknowledged VMs not delivered by the watch", missing)
		}
		return nil
	})
	mu.Lock()
	for name, uids := range added {
		if len(uids) > 1 {
			t.Errorf("%s delivered as ADDED %d times: %v", name, len(uids), uids)
			dup++
		}
	}
	mu.Unlock()
	t.Logf("%d creates, %d acknowledged, %d failed attempts during the outage; the watch relisted %d times", total, len(acked), failures.Load(), relisted.Load())
	if failures.Load() == 0 {
		t.Error("no create failed: the crash did not happen during the stream")
	}
	record(t, row{Scenario: "VM creates through kube-apiserver while banlieue is SIGKILLed and restarted; a watch resumes from its last resourceVersion",
		Operations: total, Faults: "SIGKILL of banlieue mid-stream, 2 s down", Lost: lost, Dup: dup})
}

// watchResuming delivers every VM added in vms after resourceVersion rv,
// once: it resumes from the last resourceVersion seen after a disconnect,
// and after a 410 Gone relists, delivering what it has not seen yet.
func watchResuming(ctx context.Context, vms vmInterface, rv string, relisted *atomic.Int64, onAdd func(*v1alpha1.VirtualMachine)) error {
	seen := map[types.UID]bool{}
	deliver := func(vm *v1alpha1.VirtualMachine) {
		if !seen[vm.UID] {
			seen[vm.UID] = true
			onAdd(vm)
		}
	}
	for ctx.Err() == nil {
		w, err := watchtools.NewRetryWatcherWithContext(ctx, rv, &cache.ListWatch{
			WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) { return vms.Watch(ctx, o) },
		})
		if err != nil {
			return err
		}
		for ev := range w.ResultChan() {
			switch ev.Type {
			case watch.Added:
				vm := ev.Object.(*v1alpha1.VirtualMachine)
				deliver(vm)
				rv = vm.ResourceVersion
			case watch.Modified, watch.Deleted:
				rv = ev.Object.(*v1alpha1.VirtualMachine).ResourceVersion
			case watch.Error:
				if err := apierrors.FromObject(ev.Object); !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
					w.Stop()
					return err
				}
				// Too old: relist, deliver what was missed, watch from there.
				relisted.Add(1)
				list, err := vms.List(ctx, metav1.ListOptions{})
				if err != nil {
					w.Stop()
					return err
				}
				for i := range list.Items {
					deliver(&list.Items[i])
				}
				rv = list.ResourceVersion
				w.Stop()
			}
		}
		w.Stop()
	}
	return ctx.Err()
}
