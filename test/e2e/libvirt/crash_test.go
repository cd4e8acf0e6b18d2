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

package libvirt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/test/reliability/count"
)

// TestProviderCrashes SIGKILLs the libvirt provider (the leading pod's
// container, crashWhen) while it defines domains, while it starts them
// and while it deletes them; the kubelet starts it again each time.
// Every machine must end with exactly one domain (its UUID the object's
// UID), then with none and no volume after delete. The counts are taken
// from libvirt, not from the provider.
func TestProviderCrashes(t *testing.T) {
	ctx := context.Background()
	if err := c.Create(ctx, libvirtProvider("crash-libvirt", nil)); err != nil {
		t.Fatal(err)
	}
	fd := waitProviderReady(t, "crash-libvirt").Status.FailureDomains[0].Name
	ensureImage(t)
	l := lv(t)
	const n = 4
	uids := map[string]string{} // machine name → UID
	for i := range n {
		m := &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("crash-%d", i), Namespace: ns,
				Annotations: map[string]string{infrav1.ProviderAnnotation: ns + "/crash-libvirt"}},
			Spec: infrav1.LibvirtMachineSpec{Image: image,
				CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: fd, CPUs: 1, MemoryMiB: 128, PowerState: infrav1.PowerStatePoweredOn},
				Disks:             []infrav1.LibvirtDisk{{Name: "root", SizeGiB: 1}}},
		}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
		uids[m.Name] = string(m.UID)
	}

	// Mid-define: killed as soon as the first volume of these machines
	// exists, before all are defined; mid-start: killed as soon as a
	// defined domain is not running yet, or the first one runs.
	crashWhen(t, "define", func() (bool, string) {
		vols := 0
		for _, uid := range uids {
			vols += len(volumesOf(t, l, uid))
		}
		defined := len(domainsOf(t, l, uids))
		return vols > 0 && defined < n, fmt.Sprintf("%d volumes, %d of %d domains defined", vols, defined, n)
	})
	crashWhen(t, "start", func() (bool, string) {
		doms := domainsOf(t, l, uids)
		running := 0
		for _, d := range doms {
			if st, _, err := l.DomainGetState(d, 0); err == nil && golibvirt.DomainState(st) == golibvirt.DomainRunning {
				running++
			}
		}
		return len(doms) > 0 && running < n, fmt.Sprintf("%d defined, %d running", len(doms), running)
	})
	eventually(t, 3*time.Minute, func() error {
		for name := range uids {
			m := &infrav1.LibvirtMachine{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, m); err != nil {
				return err
			}
			if !meta.IsStatusConditionTrue(m.Status.Conditions, infrav1.ReadyCondition) {
				return fmt.Errorf("%s not Ready: %+v", name, m.Status.Conditions)
			}
		}
		return nil
	})
	checkDomains(t, l, uids, 1)

	// Mid-delete: killed as soon as the first domain is gone.
	for name := range uids {
		if err := c.Delete(ctx, &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	crashWhen(t, "delete", func() (bool, string) {
		left := len(domainsOf(t, l, uids))
		return left < n, fmt.Sprintf("%d of %d domains left", left, n)
	})
	eventually(t, 3*time.Minute, func() error {
		for name := range uids {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &infrav1.LibvirtMachine{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s still there (%v)", name, err)
			}
		}
		return nil
	})
	checkDomains(t, l, uids, 0)
	for name, uid := range uids {
		if left := volumesOf(t, l, uid); len(left) > 0 {
			t.Errorf("%s: volumes left behind: %v", name, left)
		}
	}
}

// crashWhen SIGKILLs the provider the moment when says so (polling
// libvirt every 50 ms for up to a minute): the main process of the
// leading pod's container, as the kernel's OOM killer or a node's crash
// would end it. The leader is found before the polling, so that the kill
// follows what when saw at once, and only once a replica holds the Lease
// afresh after the previous kill (the killed one's expires first): the
// kill hits the replica doing the work, not one waiting for the Lease.
// crashWhen returns once the kubelet has started the container again.
func crashWhen(t *testing.T, phase string, when func() (bool, string)) {
	t.Helper()
	ctx := context.Background()
	leader, holder := freshLeader(t)
	deadline := time.Now().Add(time.Minute)
	for {
		ok, state := when()
		if ok {
			took, err := env.CrashContainer(ctx, leader, 0, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			killedHolder = holder
			t.Logf("provider pod %s SIGKILLed mid-%s: %s (running again %s later)", leader.Name, phase, state, took.Round(time.Millisecond))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("mid-%s never observed (last: %s)", phase, state)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// killedHolder is the Lease holder identity (pod name, "_", a UUID of
// the process) of the provider replica crashWhen last killed.
var killedHolder string

// freshLeader waits until a libvirt provider replica other than the one
// crashWhen last killed holds the provider's Lease, and returns its pod
// and holder identity.
func freshLeader(t *testing.T) (*corev1.Pod, string) {
	t.Helper()
	ctx := context.Background()
	var holder string
	eventually(t, time.Minute, func() error {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "banlieue-provider-libvirt"}, l); err != nil {
			return err
		}
		if holder = ptr.Deref(l.Spec.HolderIdentity, ""); holder == "" || holder == killedHolder {
			return fmt.Errorf("the Lease is held by %q, the killed replica or none", holder)
		}
		return nil
	})
	leader, err := env.ProviderLeader(ctx, "libvirt")
	if err != nil {
		t.Fatal(err)
	}
	return leader, holder
}

// domainsOf lists the domains whose UUID is one of uids'.
func domainsOf(t *testing.T, l *golibvirt.Libvirt, uids map[string]string) []golibvirt.Domain {
	t.Helper()
	want := map[string]bool{}
	for _, u := range uids {
		want[u] = true
	}
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []golibvirt.Domain
	for _, d := range doms {
		if want[uuid.UUID(d.UUID).String()] {
			out = append(out, d)
		}
	}
	return out
}

// checkDomains counts, from libvirt, the domains of each machine (by UUID
// and by name) and fails unless each has exactly want.
func checkDomains(t *testing.T, l *golibvirt.Libvirt, uids map[string]string, want int) {
	t.Helper()
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	for _, d := range doms {
		for name, uid := range uids {
			if uuid.UUID(d.UUID).String() == uid || strings.HasSuffix(d.Name, "."+name) {
				seen = append(seen, name)
			}
		}
	}
	sightings := count.Sightings(seen)
	extra, dups := count.Duplicated(sightings)
	if extra > 0 {
		t.Errorf("%d extra domains (machines %v)", extra, dups)
	}
	names := make([]string, 0, len(uids))
	for name := range uids {
		names = append(names, name)
	}
	if want == 1 {
		if missing := count.Missing(names, sightings); len(missing) > 0 {
			t.Errorf("machines without a domain: %v", missing)
		}
	} else if len(seen) > 0 {
		t.Errorf("domains left after delete: %v", seen)
	}
	t.Logf("domains per machine: %v (want %d each)", sightings, want)
}
