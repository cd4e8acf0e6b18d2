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

package virtualmachine

import (
	"maps"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/placement"
)

func loadVM(ns, name string, placed *banlieue.ScheduledPlacement) *banlieue.VirtualMachine {
	return &banlieue.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(ns + "/" + name), Labels: map[string]string{"app": name}},
		Status: banlieue.VirtualMachineStatus{Scheduled: placed}}
}

// TestPlacedStore: the scheduling load's store counts and lists scheduled
// VMs only, follows a VM scheduled, moved and unscheduled, and a relist
// replaces everything it knew.
func TestPlacedStore(t *testing.T) {
	s := newPlacedStore()
	lab := &banlieue.ScheduledPlacement{Provider: "lab", FailureDomain: "a"}
	other := &banlieue.ScheduledPlacement{Provider: "lab", FailureDomain: "b"}
	labA, labB := placement.Key("t1/lab", "a"), placement.Key("t1/lab", "b")
	check := func(step string, counts map[string]int, peers int) {
		t.Helper()
		if got := s.placed.Counts(""); !maps.Equal(got, counts) {
			t.Errorf("%s: counts %v, want %v", step, got, counts)
		}
		if got := len(s.peers("t1", "")); got != peers {
			t.Errorf("%s: %d peers in t1, want %d", step, got, peers)
		}
	}
	if s.HasSynced() {
		t.Error("synced before any list")
	}
	_ = s.Replace([]any{loadVM("t1", "a", lab), loadVM("t1", "b", nil)}, "1")
	if !s.HasSynced() {
		t.Error("not synced after the first list")
	}
	check("listed", map[string]int{labA: 1}, 1)
	if len(s.byNamespace["t1"]) != 1 {
		t.Errorf("an unscheduled VM is kept: %v", s.byNamespace)
	}
	_ = s.Update(loadVM("t1", "b", lab))
	check("b scheduled", map[string]int{labA: 2}, 2)
	if p := s.peers("t1", "t1/a"); len(p) != 1 || p[0].Name != "b" || p[0].Labels["app"] != "b" || p[0].Provider != "t1/lab" {
		t.Errorf("peers of a: %+v, want b alone", p)
	}
	_ = s.Update(loadVM("t1", "b", other))
	check("b moved", map[string]int{labA: 1, labB: 1}, 2)
	_ = s.Update(loadVM("t1", "a", nil))
	check("a unscheduled", map[string]int{labB: 1}, 1)
	_ = s.Delete(loadVM("t1", "b", other))
	check("b deleted", map[string]int{}, 0)
	_ = s.Add(loadVM("t1", "c", lab))
	_ = s.Replace([]any{loadVM("t2", "d", lab)}, "9")
	check("relisted", map[string]int{placement.Key("t2/lab", "a"): 1}, 0)
	if len(s.byNamespace) != 1 {
		t.Errorf("after the relist the store holds %v, want t2 alone", s.byNamespace)
	}
}
