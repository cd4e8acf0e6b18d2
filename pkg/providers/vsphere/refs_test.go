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
	"errors"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	vsim "github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

func TestRefCache(t *testing.T) {
	now := time.Unix(1000, 0)
	r := newRefCache()
	r.now = func() time.Time { return now }
	fetches := 0
	fetch := func() (cachedObject, error) {
		fetches++
		return cachedObject{ref: types.ManagedObjectReference{Type: "Folder", Value: "group-v1"}, path: "/DC0/vm"}, nil
	}
	get := func() {
		t.Helper()
		if o, err := r.get("k", fetch); err != nil || o.ref.Value != "group-v1" || o.path != "/DC0/vm" {
			t.Fatalf("get: %+v, %v", o, err)
		}
	}
	get()
	get()
	if fetches != 1 {
		t.Errorf("two gets within the TTL fetched %d times, want 1", fetches)
	}
	now = now.Add(refTTL)
	get()
	if fetches != 2 {
		t.Errorf("a get after the TTL fetched %d times in all, want 2", fetches)
	}
	failed := errors.New("no such folder")
	if _, err := r.get("other", func() (cachedObject, error) { return cachedObject{}, failed }); !errors.Is(err, failed) {
		t.Errorf("a failed fetch returned %v", err)
	}
	if _, ok := r.entries["other"]; ok {
		t.Error("a failed fetch was cached")
	}
	// Any other error keeps the entries; an object gone drops them all.
	if err := r.forgetIfGone(failed); !errors.Is(err, failed) || len(r.entries) != 1 {
		t.Errorf("an unrelated error: %v, %d entries left, want 1", err, len(r.entries))
	}
	gone := soap.WrapVimFault(&types.ManagedObjectNotFound{Obj: types.ManagedObjectReference{Type: "VirtualMachine", Value: "vm-1"}})
	if r.forgetIfGone(gone); len(r.entries) != 0 {
		t.Errorf("ManagedObjectNotFound left %d entries", len(r.entries))
	}
}

// TestLookupsCached: a second machine built in the same place makes fewer
// vCenter calls than the first (the datacenter, template, pool, folder and
// networks are not looked up again); a template replaced under its name is
// used once the stale reference failed.
func TestLookupsCached(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	spec := func(i byte) providers.MachineSpec {
		return providers.MachineSpec{
			Name: "ns-cached-" + string('0'+i), InstanceUUID: "6f1c0e2a-8b7d-4c55-9a0e-1d2c3b4a5f7" + string('0'+i),
			Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512,
			NICs:       []providers.NIC{{Name: "eth0", Network: "VM Network"}},
			UserData:   []byte("#cloud-config\n"),
			PowerState: infrav1.PowerStatePoweredOn,
		}
	}
	var rec recorder
	build := func(i byte) float64 {
		t.Helper()
		before := totalCalls(t)
		if _, err := c.EnsureMachine(ctx, spec(i), rec.record); err != nil {
			t.Fatalf("building %d: %v", i, err)
		}
		return totalCalls(t) - before
	}
	first, second := build(0), build(1)
	t.Logf("vCenter calls: %v for the first build, %v for the second", first, second)
	if second >= first {
		t.Errorf("the second build made %v vCenter calls, the first %v: nothing was cached", second, first)
	}

	// The template is destroyed and made again under its name: the stale
	// reference fails one build, which forgets it; the next one builds.
	if err := destroyTemplate(ctx, c, tmpl); err != nil {
		t.Fatal(err)
	}
	if _, err := vsim.MarkTemplate(ctx, c.gc.Client, "DC0", tmpl); err != nil {
		t.Fatal(err)
	}
	if _, err := c.EnsureMachine(ctx, spec(2), rec.record); err == nil {
		t.Log("the build after the template was replaced found it at once")
	}
	if _, err := c.EnsureMachine(ctx, spec(2), rec.record); err != nil {
		t.Errorf("the build after a stale template reference failed again: %v", err)
	}
}

// totalCalls sums every vSphere method counted so far.
func totalCalls(t *testing.T) float64 {
	t.Helper()
	var sum float64
	for _, n := range callsPerMethod(t) {
		sum += n
	}
	return sum
}

// callsPerMethod are every vSphere method's counts so far.
func callsPerMethod(t *testing.T) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric, 256)
	providers.BackendRequests.Collect(ch)
	close(ch)
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["backend"] == "vsphere" {
			out[labels["method"]] += pb.GetCounter().GetValue()
		}
	}
	return out
}

// destroyTemplate destroys the template named name in DC0.
func destroyTemplate(ctx context.Context, c *Client, name string) error {
	l, err := c.locate(ctx, "DC0")
	if err != nil {
		return err
	}
	vm, err := l.f.VirtualMachine(ctx, name)
	if err != nil {
		return err
	}
	task, err := vm.Destroy(ctx)
	if err != nil {
		return err
	}
	return task.Wait(ctx)
}
