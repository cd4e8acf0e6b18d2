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
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
)

// TestAntiAffinitySpread (in a file named to run after TestImageChecks,
// which needs the template not to exist yet): six VMs of one app, each required apart from the
// others by failure domain, land on the six failure domains the real
// provider publishes for vcsim, never two together; a seventh stays
// unscheduled with AntiAffinityUnsatisfied, and /placement says why for
// every domain.
func TestAntiAffinitySpread(t *testing.T) {
	ctx := context.Background()
	markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
	markTemplate(t, "DC1", "ubuntu-22.04-cloudinit")
	// Its own image (other tests create the template's namesake).
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "spread-image"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	secret(t, ns, "spread-vsphere-creds", map[string]string{"username": user, "password": password})
	p := provider("spread-vsphere", "spread-vsphere-creds", nil)
	p.Labels["spread"] = "yes"
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "spread-vsphere", "InventoryWalked")
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "spread-class"},
		Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := func(i int) *v1alpha1.VirtualMachine {
		return &v1alpha1.VirtualMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("spread-%d", i), Namespace: ns, Labels: map[string]string{"app": "spread"}},
			Spec: v1alpha1.VirtualMachineSpec{
				ClassRef: v1alpha1.LocalObjectReference{Name: "spread-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "spread-image"},
				DesiredPowerState: v1alpha1.PowerStatePoweredOff,
				Placement: &v1alpha1.Placement{
					ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spread": "yes"}},
					AntiAffinity: []v1alpha1.AntiAffinityTerm{{TopologyKey: v1alpha1.AntiAffinityFailureDomain,
						LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "spread"}}}},
				},
			},
		}
	}
	// All at once: the scheduler's workers must not put two together.
	for i := range 6 {
		if err := c.Create(ctx, vm(i)); err != nil {
			t.Fatal(err)
		}
	}
	domains := map[string]string{}
	eventually(t, time.Minute, func() error {
		clear(domains)
		for i := range 6 {
			v := &v1alpha1.VirtualMachine{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("spread-%d", i)}, v); err != nil {
				return err
			}
			if v.Status.Scheduled == nil {
				return fmt.Errorf("%s not scheduled: %+v", v.Name, v.Status.Conditions)
			}
			if other, taken := domains[v.Status.Scheduled.FailureDomain]; taken {
				t.Fatalf("%s and %s share failure domain %s", other, v.Name, v.Status.Scheduled.FailureDomain)
			}
			domains[v.Status.Scheduled.FailureDomain] = v.Name
		}
		return nil
	})
	if len(domains) != 6 {
		t.Fatalf("six VMs on %d failure domains", len(domains))
	}

	seventh := vm(6)
	if err := c.Create(ctx, seventh); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(seventh), seventh); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(seventh.Status.Conditions, v1alpha1.VirtualMachineScheduled)
		if cond == nil || cond.Reason != "AntiAffinityUnsatisfied" {
			return fmt.Errorf("Scheduled %+v, want AntiAffinityUnsatisfied", cond)
		}
		return nil
	})
	if seventh.Status.Scheduled != nil {
		t.Errorf("the seventh VM was placed: %+v", seventh.Status.Scheduled)
	}
	pl, err := clientset.NewForConfigOrDie(env.Admin).BanlieueV1alpha1().VirtualMachines(ns).GetPlacement(ctx, seventh.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	explained := 0
	for _, pp := range pl.Result.Providers {
		if pp.Provider != "spread-vsphere" {
			continue
		}
		for _, fd := range pp.FailureDomains {
			if !fd.Fits && strings.Contains(fd.Message, "required anti-affinity") && strings.Contains(fd.Message, domains[fd.Name]) {
				explained++
			}
		}
	}
	if pl.Result.Fits || pl.Result.Reason != "AntiAffinityUnsatisfied" || explained != 6 {
		t.Errorf("/placement: fits %v reason %s, %d of 6 failure domains explained: %+v", pl.Result.Fits, pl.Result.Reason, explained, pl.Result.Providers)
	}
	for i := range 7 {
		if err := c.Delete(ctx, vm(i)); err != nil {
			t.Error(err)
		}
	}
}
