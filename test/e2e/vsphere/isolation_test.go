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

// Tenant isolation on the shared vCenter credentials: what a VSphereMachine
// written by hand may make the provider do, how backend names stay apart
// across namespaces, and how deleting a Provider that machines still use
// completes.

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

func createNamespace(t *testing.T, name string) {
	t.Helper()
	if err := c.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// tenantMachine is a powered-on VSphereMachine in namespace served by
// provider (namespace/name), in DC0/DC0_C1 from the seed template.
func tenantMachine(namespace, name, provider string, mutate func(*infrav1.VSphereMachine)) *infrav1.VSphereMachine {
	vsm := &infrav1.VSphereMachine{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace,
			Annotations: map[string]string{infrav1.ProviderAnnotation: provider}},
		Spec: infrav1.VSphereMachineSpec{Template: "ubuntu-22.04-cloudinit", Datacenter: "DC0", Cluster: "DC0_C1",
			CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOn}},
	}
	if mutate != nil {
		mutate(vsm)
	}
	return vsm
}

// waitMachineIn waits for the machine's Ready condition to have reason.
func waitMachineIn(t *testing.T, namespace, name, reason string) *infrav1.VSphereMachine {
	t.Helper()
	return waitCondition(t, namespace, name, infrav1.ReadyCondition, reason)
}

// vcHasInstance tells whether vcsim holds a VM with this instance UUID,
// in any datacenter.
func vcHasInstance(t *testing.T, uuid string) bool {
	t.Helper()
	ctx := context.Background()
	ref, err := object.NewSearchIndex(vcLogin(t).Client).FindByUuid(ctx, nil, uuid, true, ptr.To(true))
	if err != nil {
		t.Fatal(err)
	}
	return ref != nil
}

// homeDeployment is the Deployment serving namespace rogue-home.
const homeDeployment = "banlieue-provider-vsphere-rogue-home"

// runHomeProvider runs the shipped provider Deployment a second time,
// renamed, with one replica, serving namespace home (its
// BANLIEUE_NAMESPACE, which wins over the ConfigMap's), until the test
// ends. It serves no console: none of its machines is asked for one.
func runHomeProvider(t *testing.T, home string) {
	t.Helper()
	ctx := context.Background()
	const component = "provider-vsphere-rogue-home"
	patch := `[
	  {"op":"replace","path":"/metadata/name","value":"` + homeDeployment + `"},
	  {"op":"replace","path":"/metadata/labels/app.kubernetes.io~1component","value":"` + component + `"},
	  {"op":"replace","path":"/spec/replicas","value":1},
	  {"op":"replace","path":"/spec/selector/matchLabels/app.kubernetes.io~1component","value":"` + component + `"},
	  {"op":"replace","path":"/spec/template/metadata/labels/app.kubernetes.io~1component","value":"` + component + `"},
	  {"op":"add","path":"/spec/template/spec/containers/0/env",
	   "value":[{"name":"BANLIEUE_NAMESPACE","value":"` + home + `"},{"name":"BANLIEUE_CONSOLE_BIND_ADDRESS","value":"0"}]}
	]`
	file := filepath.Join(root, "artifacts", "deploy", "providers", "vsphere", "deployment.yaml")
	if err := env.ApplyPatched(file, "json", patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if out, err := env.Kubectl("", "-n", ns, "delete", "deployment", homeDeployment, "--wait=true", "--timeout=60s"); err != nil {
			t.Errorf("deleting %s: %v: %s", homeDeployment, err, out)
		}
	})
	if err := env.FollowLogs(ns, "app.kubernetes.io/component="+component, component); err != nil {
		t.Fatal(err)
	}
	if err := env.RolloutStatus(ctx, ns, homeDeployment, 2*time.Minute); err != nil {
		t.Fatal(err)
	}
}

// TestRogueMachinesRefused: VSphereMachines written by hand in a tenant
// namespace that ask for more than their Provider publishes (a Provider of
// another namespace, an unknown datacenter, a datastore or port group
// outside its capabilities, another VM as template) are refused before any
// backend call: Ready=False with a reason naming the field, a Warning
// Event, and vcsim never sees them (no VM by name or instance UUID). They
// never got a finalizer, so deleting them completes at once, with no
// backend call that could fail forever.
func TestRogueMachinesRefused(t *testing.T) {
	ctx := context.Background()
	const rogue, home = "rogue", "rogue-home"
	createNamespace(t, rogue)
	servingProvider(t, "rogue-vsphere", publishing([]string{"VM Network"}, []string{"LocalDS_0"}))

	// A second provider serves the Providers of namespace rogue-home, as
	// a team running its own would (the shipped namespace ClusterRole
	// bound there): its Provider is not for namespace rogue.
	createNamespace(t, home)
	if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-vsphere", Namespace: home},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-vsphere-namespace"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-provider-vsphere", Namespace: ns}}}); err != nil {
		t.Fatal(err)
	}
	secret(t, home, "home-creds", map[string]string{"username": user, "password": password})
	homeProvider := provider("home-vsphere", "home-creds", publishing([]string{"VM Network"}, nil))
	homeProvider.Namespace = home
	if err := c.Create(ctx, homeProvider); err != nil {
		t.Fatal(err)
	}
	runHomeProvider(t, home)

	shared := ns + "/rogue-vsphere"
	machines := []struct {
		m      *infrav1.VSphereMachine
		reason string
	}{
		{tenantMachine(rogue, "foreign-provider", home+"/home-vsphere", nil), "ProviderNotAllowed"},
		{tenantMachine(rogue, "unknown-datacenter", shared, func(m *infrav1.VSphereMachine) { m.Spec.Datacenter = "DC9" }), "FailureDomainNotPublished"},
		{tenantMachine(rogue, "foreign-datastore", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.Disks = []infrav1.VSphereDisk{{Name: "root", SizeGiB: 10, Datastore: "LocalDS_9"}}
		}), "DatastoreNotPublished"},
		{tenantMachine(rogue, "foreign-portgroup", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.Network = []infrav1.VSphereNetworkDevice{{Name: "eth0", PortGroup: "DC0_DVPG0", DHCP4: true}}
		}), "PortGroupNotPublished"},
		{tenantMachine(rogue, "someone-elses-vm", shared, func(m *infrav1.VSphereMachine) { m.Spec.Template = "DC0_C0_RP0_VM0" }), "TemplateNotPublished"},
		// A resource pool or folder the finder would take as it is: an
		// absolute path into another cluster, a managed object reference
		// (issue 31: cloned into an unpublished cluster).
		{tenantMachine(rogue, "absolute-pool", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.ResourcePool = "/DC0/host/DC0_C0/Resources"
		}), "OutsideFailureDomain"},
		{tenantMachine(rogue, "moref-folder", shared, func(m *infrav1.VSphereMachine) { m.Spec.Folder = "Folder:group-v3" }), "OutsideFailureDomain"},
		// Features the Provider does not advertise.
		{tenantMachine(rogue, "hot-add", shared, func(m *infrav1.VSphereMachine) { m.Spec.CPUHotAdd = true }), "FeatureNotPublished"},
		{tenantMachine(rogue, "vtpm", shared, func(m *infrav1.VSphereMachine) {
			m.Spec.Firmware, m.Spec.TPMEnabled = infrav1.FirmwareEFI, true
		}), "FeatureNotPublished"},
		{tenantMachine(rogue, "secure-boot", shared, func(m *infrav1.VSphereMachine) { m.Spec.Firmware = infrav1.FirmwareEFISecure }), "FeatureNotPublished"},
	}
	for _, x := range machines {
		if err := c.Create(ctx, x.m); err != nil {
			t.Fatal(err)
		}
	}
	// One more names a Provider that does not exist: nothing is done for
	// it (no finalizer, no VM), and it too must delete at once.
	orphan := tenantMachine(rogue, "no-provider", ns+"/no-such-provider", nil)
	if err := c.Create(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	for _, x := range machines {
		vsm := waitMachineIn(t, rogue, x.m.Name, x.reason)
		cond := meta.FindStatusCondition(vsm.Status.Conditions, infrav1.ReadyCondition)
		if cond.Status != metav1.ConditionFalse || !containsAll(cond.Message, "spec.") && !containsAll(cond.Message, "metadata.annotations") {
			t.Errorf("%s: Ready %s %q does not name the field", vsm.Name, cond.Status, cond.Message)
		}
		if len(vsm.Finalizers) > 0 {
			t.Errorf("%s: a refused machine holds finalizers %v", vsm.Name, vsm.Finalizers)
		}
		if vcHasInstance(t, string(vsm.UID)) {
			t.Errorf("%s: vcsim holds a VM with its instance UUID", vsm.Name)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(orphan), orphan); err != nil || len(orphan.Finalizers) > 0 || vcHasInstance(t, string(orphan.UID)) {
		t.Errorf("the machine of a missing Provider: %v, finalizers %v", err, orphan.Finalizers)
	}
	for _, dc := range []string{"DC0", "DC1"} {
		if got := vcVMNames(t, dc, providers.BackendName(rogue, "")); len(got) > 0 {
			t.Errorf("vcsim %s holds rogue VMs %v", dc, got)
		}
	}
	eventually(t, time.Minute, func() error {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(rogue)); err != nil {
			return err
		}
		warned := map[string]string{}
		for _, e := range list.Items {
			if e.Type == corev1.EventTypeWarning {
				warned[e.Regarding.Name] = e.Reason
			}
		}
		for _, x := range machines {
			if warned[x.m.Name] != x.reason {
				return fmt.Errorf("no %s Warning Event for %s (%v)", x.reason, x.m.Name, warned)
			}
		}
		return nil
	})

	// Publishing what one asked for admits it, without touching it: the
	// refusal is looked at again.
	p := &v1alpha1.Provider{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "rogue-vsphere"}, p); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(p.DeepCopy())
	publishing([]string{"DC0_DVPG0"}, nil)(&p.Spec)
	p.Spec.Capabilities.NetworkClasses[len(p.Spec.Capabilities.NetworkClasses)-1].Name = "dvpg"
	if err := c.Patch(ctx, p, patch); err != nil {
		t.Fatal(err)
	}
	waitMachineIn(t, rogue, "foreign-portgroup", "PoweredOn")

	// Built, its location is fixed: a delete looks for the VM there, and
	// an edited datacenter let the finalizer go with the VM running.
	built := &infrav1.VSphereMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: rogue, Name: "foreign-portgroup"}, built); err != nil {
		t.Fatal(err)
	}
	for field, move := range map[string]func(*infrav1.VSphereMachine){
		"datacenter":   func(m *infrav1.VSphereMachine) { m.Spec.Datacenter, m.Spec.Cluster = "DC1", "DC1_C0" },
		"resourcePool": func(m *infrav1.VSphereMachine) { m.Spec.ResourcePool = "elsewhere" },
	} {
		// A merge patch, without the resourceVersion: the provider may
		// write the machine meanwhile, and the answer must be the rule.
		moved := built.DeepCopy()
		move(moved)
		if err := c.Patch(ctx, moved, client.MergeFrom(built)); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
			t.Errorf("editing the %s of a built machine: %v, want Invalid: immutable", field, err)
		}
	}
	// Sizes are bounded: kube-apiserver refuses what no VM can be.
	huge := tenantMachine(rogue, "huge", shared, func(m *infrav1.VSphereMachine) {
		m.Spec.Disks = []infrav1.VSphereDisk{{Name: "root", SizeGiB: 1 << 30}}
	})
	if err := c.Create(ctx, huge); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "sizeGiB") {
		t.Errorf("a disk of 2^30 GiB: %v, want Invalid on its sizeGiB", err)
	}

	// Deleting them completes, without a backend call for those never built.
	if err := c.DeleteAllOf(ctx, &infrav1.VSphereMachine{}, client.InNamespace(rogue)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		var list infrav1.VSphereMachineList
		if err := c.List(ctx, &list, client.InNamespace(rogue)); err != nil {
			return err
		}
		if len(list.Items) > 0 {
			return fmt.Errorf("%d refused machines not deleted yet", len(list.Items))
		}
		return nil
	})
	if lines, err := reconcileErrors("provider-vsphere*", "rogue"); err != nil || len(lines) > 0 {
		t.Errorf("reconcile errors about the rogue machines (%v): %v", err, lines)
	}
}

// TestNamesNeverCollide: team/a-db and team-a/db, joined with a hyphen,
// were one vCenter name; both now become Ready in one failure domain, each
// with its own readable VM name, shown in status.vmName.
func TestNamesNeverCollide(t *testing.T) {
	ctx := context.Background()
	servingProvider(t, "names-vsphere", nil)
	pairs := [][2]string{{"team", "a-db"}, {"team-a", "db"}}
	for _, p := range pairs {
		createNamespace(t, p[0])
		if err := c.Create(ctx, tenantMachine(p[0], p[1], ns+"/names-vsphere", nil)); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range pairs {
		vsm := waitMachineIn(t, p[0], p[1], "PoweredOn")
		want := p[0] + "." + p[1]
		if vsm.Status.VMName != want {
			t.Errorf("%s/%s: status.vmName %q, want %q", p[0], p[1], vsm.Status.VMName, want)
		}
		if m := vcVM(t, "DC0", want); m == nil || m.Config.InstanceUuid != string(vsm.UID) {
			t.Errorf("%s/%s: vcsim VM %s missing or not its own", p[0], p[1], want)
		}
	}
	for _, p := range pairs {
		if err := c.Delete(ctx, &infrav1.VSphereMachine{ObjectMeta: metav1.ObjectMeta{Name: p[1], Namespace: p[0]}}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, func() error {
		for _, p := range pairs {
			if m := vcVM(t, "DC0", p[0]+"."+p[1]); m != nil {
				return fmt.Errorf("%s.%s still in vcsim", p[0], p[1])
			}
		}
		return nil
	})
}

// TestProviderDeletionWaitsForMachines: a Provider deleted while machines
// use it stays (finalizer banlieue.io/provider-protection) with
// Ready=False, reason Deleting, naming them; deleting their namespace then
// destroys their VMs through it, the namespace goes, and so does the
// Provider. Nothing is left hanging.
func TestProviderDeletionWaitsForMachines(t *testing.T) {
	ctx := context.Background()
	const team = "team-del"
	createNamespace(t, team)
	servingProvider(t, "del-vsphere", nil)
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: "del-vsphere", Namespace: ns}}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if len(p.Finalizers) == 0 {
			return fmt.Errorf("the Provider has no protection finalizer yet")
		}
		return nil
	})
	for _, name := range []string{"del-0", "del-1"} {
		if err := c.Create(ctx, tenantMachine(team, name, ns+"/del-vsphere", nil)); err != nil {
			t.Fatal(err)
		}
	}
	var uids []string
	for _, name := range []string{"del-0", "del-1"} {
		uids = append(uids, string(waitMachineIn(t, team, name, "PoweredOn").UID))
	}

	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady)
		if p.DeletionTimestamp.IsZero() || cond == nil || cond.Reason != "Deleting" || !containsAll(cond.Message, team+"/del-0", team+"/del-1") {
			return fmt.Errorf("deleted Provider: deletionTimestamp %v, Ready %+v", p.DeletionTimestamp, cond)
		}
		return nil
	})

	if err := c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: team}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKey{Name: team}, &corev1.Namespace{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there: %v", team, err)
		}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.Provider{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Provider still there: %v", err)
		}
		return nil
	})
	for _, uid := range uids {
		if vcHasInstance(t, uid) {
			t.Errorf("vcsim still holds the VM of machine %s", uid)
		}
	}
}
