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
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
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
	// the present) is answered by a relist, as informers do. Every ADDED
	// event is kept as it arrives, before any de-duplication, so a resume
	// that delivers an object twice is counted.
	var (
		mu       sync.Mutex
		events   []types.UID            // every ADDED event's UID, in order
		relist   = map[types.UID]bool{} // objects a relist delivered that no event had
		relisted atomic.Int64
	)
	watched := make(chan error, 1)
	go func() {
		watched <- watchResuming(ctx, vms, list.ResourceVersion, &relisted, func(vm *v1alpha1.VirtualMachine, fromList bool) {
			mu.Lock()
			defer mu.Unlock()
			if fromList {
				relist[vm.UID] = true
			} else {
				events = append(events, vm.UID)
			}
		})
	}()

	total := size(300, 3000)
	var (
		next     atomic.Int64
		ackedMu  sync.Mutex
		acked    = map[string]types.UID{}
		creates  count.Ops
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
					creates.Done(vmName(i), err)
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
	stored := map[string]types.UID{}
	all, err := vms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range all.Items {
		stored[vm.Name] = vm.UID
	}
	lost := count.Lost(acked, stored)
	if len(lost) > 0 {
		t.Errorf("%d acknowledged creates are not stored with their UID: %v", len(lost), lost)
	}
	// The watch delivered each of them, and no event twice.
	var ackedUIDs []types.UID
	for _, uid := range acked {
		ackedUIDs = append(ackedUIDs, uid)
	}
	eventually(t, time.Minute, func() error {
		select {
		case err := <-watched:
			t.Fatalf("the watch ended: %v", err)
		default:
		}
		mu.Lock()
		defer mu.Unlock()
		seen := count.Sightings(events)
		for uid := range relist {
			seen[uid]++
		}
		if missing := count.Missing(ackedUIDs, seen); len(missing) > 0 {
			return fmt.Errorf("%d acknowledged VMs not delivered by the watch", len(missing))
		}
		return nil
	})
	mu.Lock()
	dup, dupUIDs := count.Duplicated(count.Sightings(events))
	nEvents, nRelist := len(events), len(relist)
	mu.Unlock()
	if dup > 0 {
		t.Errorf("%d ADDED events repeat an object already delivered: %v", dup, dupUIDs)
	}
	t.Logf("%d creates, %d answered, %d acknowledged, %d failed attempts during the outage; %d ADDED events, the watch relisted %d times (%d objects only in a relist)",
		total, creates.N(), len(acked), failures.Load(), nEvents, relisted.Load(), nRelist)
	if failures.Load() == 0 {
		t.Error("no create failed: the crash did not happen during the stream")
	}
	record(t, row{Scenario: "VM creates through kube-apiserver while banlieue is SIGKILLed and restarted; a watch resumes from its last resourceVersion",
		Operations: creates.N(), Faults: "SIGKILL of banlieue mid-stream, 2 s down", Lost: table.Counted(len(lost)), Dup: table.Counted(dup)})
}

// watchResuming reports every VM added in vms after resourceVersion rv:
// each ADDED event as it comes (fromList false), resuming from the last
// resourceVersion seen after a disconnect; after a 410 Gone it relists and
// reports the listed VMs no event has reported yet (fromList true), as an
// informer's relist does.
func watchResuming(ctx context.Context, vms vmInterface, rv string, relisted *atomic.Int64, onAdd func(vm *v1alpha1.VirtualMachine, fromList bool)) error {
	seen := map[types.UID]bool{}
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
				seen[vm.UID] = true
				onAdd(vm, false)
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
					if vm := &list.Items[i]; !seen[vm.UID] {
						seen[vm.UID] = true
						onAdd(vm, true)
					}
				}
				rv = list.ResourceVersion
				w.Stop()
			}
		}
		w.Stop()
	}
	return ctx.Err()
}
