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

package proxmox

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// The migration tests run a vcsim and the shipped vSphere provider
// Deployment (as pods, reaching vcsim on the bridge's gateway) beside the
// package's Proxmox VE simulator and provider: Providers mig-vsphere
// and mig-proxmox (labels mig=yes, backend=vsphere|proxmox), image
// mig-image (a source on each), class mig-class (eth0 from IPPool
// mig-pool; one interface: vcsim refuses to customize a clone whose NIC
// count the template does not have, NicSettingMismatch).
var (
	migOnce  sync.Once
	migSim   *vcsim.Simulator
	migSetup error
)

const migPassword = "migrate"

func migrationBackends(t *testing.T) {
	t.Helper()
	migOnce.Do(func() { migSetup = startMigrationBackends() })
	if migSetup != nil {
		t.Fatal(migSetup)
	}
	waitProvider(t, "mig-vsphere", "InventoryWalked")
	waitProvider(t, "mig-proxmox", "InventoryWalked")
}

func startMigrationBackends() error {
	ctx := context.Background()
	var err error
	// Closed with the test binary: every migration test uses it. The
	// provider's pods reach it on the bridge's gateway, which its
	// certificate names; the test reads it on loopback.
	if migSim, err = vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 1, Template: "banlieue-guest", Username: "admin@vsphere.local",
		Password: migPassword, DHCP: true, ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}}); err != nil {
		return err
	}
	endpoint, err := env.ExposeURL(migSim.Endpoint)
	if err != nil {
		return err
	}
	// Its inventory re-walked every 2s rather than 5m, as the Proxmox VE
	// provider's (proxmoxSettings).
	if err := env.ApplyProvider(root, "vsphere", `{"data":{"BANLIEUE_RESYNC":"2s"}}`); err != nil {
		return err
	}
	if err := env.RolledOut(ctx, ns, 2*time.Minute, "banlieue-provider-vsphere"); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mig-vsphere-creds", Namespace: ns},
		StringData: map[string]string{"username": "admin@vsphere.local", "password": migPassword}}); err != nil {
		return err
	}
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", "mig-vsphere-creds"); err != nil {
		return err
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "mig-proxmox-token", Namespace: ns},
		StringData: map[string]string{"tokenID": sim.TokenID, "tokenSecret": sim.Secret}}); err != nil {
		return err
	}
	if err := env.GrantCredentials(ctx, "proxmox", "secrets", "mig-proxmox-token"); err != nil {
		return err
	}
	vp := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "mig-vsphere", Namespace: ns, Labels: map[string]string{"mig": "yes", "backend": "vsphere"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: "mig-vsphere-creds"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(migSim.CABundle)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
			},
		},
	}
	pp := migProxmoxProvider("mig-proxmox", "proxmox")
	pool := &infrav1.IPPool{ObjectMeta: metav1.ObjectMeta{Name: "mig-pool"}, Spec: infrav1.IPPoolSpec{
		Addresses: []string{"192.168.160.10-192.168.160.30"}, Prefix: 24, Gateway: "192.168.160.1"}}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "mig-image"}, Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{
		{ProviderClass: "vsphere", Kind: v1alpha1.ImageSourceTemplate, Ref: "banlieue-guest"},
		{ProviderClass: "proxmox", Kind: v1alpha1.ImageSourceTemplate, Ref: "debian-12-cloud"},
	}}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "mig-class"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 20, StorageClass: "gold", Provisioning: "thin"}}},
		Network: &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{
			{Name: "eth0", NetworkClass: "prod", IPAM: v1alpha1.IPAMConfig{Pool: &v1alpha1.IPPoolReference{Name: "mig-pool"}}},
		}},
	}}
	for _, o := range []client.Object{vp, pp, pool, img, class} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// migProxmoxProvider is a Provider of the package's simulator, labelled
// mig=yes and backend.
func migProxmoxProvider(name, backend string) *v1alpha1.Provider {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"mig": "yes", "backend": backend}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
			Connection: v1alpha1.ProviderConnection{Endpoint: simEndpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: "mig-proxmox-token"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CA)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr0"}}},
			},
		},
	}
	return p
}

// migVM creates VM name on backend (its providerSelector), eth0 at
// static (from the pool when ""), and waits for it to be Ready there.
func migVM(t *testing.T, name, backend, static string, mutate func(*v1alpha1.VirtualMachine)) *v1alpha1.VirtualMachine {
	t.Helper()
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "mig-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "mig-image"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"mig": "yes", "backend": backend}}},
	}}
	if static != "" {
		vm.Spec.NetworkOverrides = []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
			Address: static, Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}}
	}
	if mutate != nil {
		mutate(vm)
	}
	if err := c.Create(context.Background(), vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteVM(t, vm) })
	waitVM(t, vm, "Ready on "+backend, 2*time.Minute, readyOn("mig-"+backend))
	return vm
}

func deleteVM(t *testing.T, vm *v1alpha1.VirtualMachine) {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, vm); err != nil && !apierrors.IsNotFound(err) {
		t.Error(err)
		return
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), &v1alpha1.VirtualMachine{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM %s still there (%v)", vm.Name, err)
		}
		return nil
	})
}

func waitVM(t *testing.T, vm *v1alpha1.VirtualMachine, what string, timeout time.Duration, ok func(*v1alpha1.VirtualMachine) error) {
	t.Helper()
	eventually(t, timeout, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if err := ok(vm); err != nil {
			return fmt.Errorf("%s: %w (migration %+v, conditions %+v)", what, err, vm.Status.Migration, vm.Status.Conditions)
		}
		return nil
	})
}

// readyOn: the VM is Ready on Provider name, no migration in progress.
func readyOn(name string) func(*v1alpha1.VirtualMachine) error {
	return func(vm *v1alpha1.VirtualMachine) error {
		if s := vm.Status.Scheduled; s == nil || s.Provider != name {
			return fmt.Errorf("scheduled %+v, want %s", vm.Status.Scheduled, name)
		}
		if vm.Status.Migration != nil {
			return fmt.Errorf("still migrating")
		}
		if !meta.IsStatusConditionTrue(vm.Status.Conditions, v1alpha1.VirtualMachineReady) {
			return fmt.Errorf("not Ready")
		}
		return nil
	}
}

// migrating: Migrating=False with reason.
func migrating(reason string) func(*v1alpha1.VirtualMachine) error {
	return func(vm *v1alpha1.VirtualMachine) error {
		c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != reason || vm.Status.Migration != nil {
			return fmt.Errorf("Migrating %+v, want False %s", c, reason)
		}
		return nil
	}
}

// targetMachine waits for vm's migration to have built its target machine
// (of type obj) and returns its name.
func targetMachine(t *testing.T, vm *v1alpha1.VirtualMachine, obj client.Object) string {
	t.Helper()
	var name string
	waitVM(t, vm, "migration target built", time.Minute, func(vm *v1alpha1.VirtualMachine) error {
		mig := vm.Status.Migration
		if mig == nil {
			return fmt.Errorf("no migration")
		}
		name = mig.InfrastructureRef.Name
		return c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj)
	})
	return name
}

// gone waits for the machine name (of type obj) to be deleted.
func gone(t *testing.T, name string, obj client.Object) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%T %s still there (%v)", obj, name, err)
		}
		return nil
	})
}

func setSelector(t *testing.T, vm *v1alpha1.VirtualMachine, backend string) {
	t.Helper()
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.Placement.ProviderSelector.MatchLabels["backend"] = backend
	if err := c.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
}

// event waits for an Event of reason about vm.
func event(t *testing.T, vm *v1alpha1.VirtualMachine, reason string) eventsv1.Event {
	t.Helper()
	var found eventsv1.Event
	eventually(t, 30*time.Second, func() error {
		var events eventsv1.EventList
		if err := c.List(context.Background(), &events, client.InNamespace(ns)); err != nil {
			return err
		}
		for _, e := range events.Items {
			if e.Regarding.Kind == "VirtualMachine" && e.Regarding.Name == vm.Name && e.Reason == reason {
				found = e
				return nil
			}
		}
		return fmt.Errorf("no Event %s about VM %s", reason, vm.Name)
	})
	return found
}

// poolAddress is the address vm's eth0 claimed from mig-pool.
func poolAddress(t *testing.T, vm *v1alpha1.VirtualMachine) string {
	t.Helper()
	claim := &ipamv1.IPAddressClaim{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vm.Name + "-eth0"}, claim); err != nil {
		t.Fatal(err)
	}
	address := &ipamv1.IPAddress{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: claim.Status.AddressRef.Name}, address); err != nil {
		t.Fatal(err)
	}
	return address.Spec.Address
}

func hasAddress(addresses []v1alpha1.MachineAddress, typ v1alpha1.MachineAddressType, address string) bool {
	return slices.ContainsFunc(addresses, func(a v1alpha1.MachineAddress) bool { return a.Type == typ && a.Address == address })
}

// hasHostName: a machine reports host name as its Hostname address.
func hasHostName(addresses []infrav1.MachineAddress, name string) bool {
	return slices.ContainsFunc(addresses, func(a infrav1.MachineAddress) bool { return a.Type == "Hostname" && a.Address == name })
}

// pveVM is the simulator's VM of machine name.
func pveVM(name string) (map[string]any, bool) {
	for _, v := range sim.VMs() {
		if v.Name == providers.BackendName(ns, name) {
			return v.Config, true
		}
	}
	return nil, false
}

// TestMigrationKeepsAddressesAndHostName (issue 32): a VM on Proxmox VE
// with a pool address moves to vSphere when its providerSelector changes,
// and back to Proxmox VE when annotated. The target machine of each
// migration has the address in its spec and the VM's host name (not its
// own name, VM-HASH): the vSphere guest is customized with them (vcsim
// reports them), the Proxmox VE VM's ipconfig0 carries the address; the
// address claim is the same all along. (TestMigrationTimesOut carries a
// static address.)
func TestMigrationKeepsAddressesAndHostName(t *testing.T) {
	ctx := context.Background()
	migrationBackends(t)
	vm := migVM(t, "keep-vm", "proxmox", "", nil)
	pool := poolAddress(t, vm)
	if !strings.HasPrefix(pool, "192.168.160.") {
		t.Fatalf("pool address %q", pool)
	}
	source := vm.Status.InfrastructureRef.Name
	// A snapshot taken here stays with this machine (issue 34).
	before := newSnapshot("keep-before", vm.Name, false)
	if err := c.Create(ctx, before); err != nil {
		t.Fatal(err)
	}
	ready(t, before)

	// Proxmox VE → vSphere, on a drift.
	setSelector(t, vm, "vsphere")
	vsm := &infrav1.VSphereMachine{}
	name := targetMachine(t, vm, vsm)
	if name == "keep-vm" {
		t.Fatalf("the target machine is named like the VM")
	}
	// Built with the address from the start: the clone customizes the
	// guest with it once (a spec corrected after the cutover is too late).
	if len(vsm.Spec.Network) != 1 || vsm.Spec.Network[0].Static == nil || vsm.Spec.Network[0].Static.Address != pool {
		t.Errorf("VSphereMachine %s created with network %+v, want eth0 at %s", name, vsm.Spec.Network, pool)
	}
	waitVM(t, vm, "migrated to vSphere", 3*time.Minute, readyOn("mig-vsphere"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, vsm); err != nil {
		t.Fatal(err)
	}
	if vsm.Spec.HostName != "keep-vm" {
		t.Errorf("VSphereMachine %s spec.hostName %q, want keep-vm", name, vsm.Spec.HostName)
	}
	if len(vsm.Spec.Network) != 1 || vsm.Spec.Network[0].Static == nil || vsm.Spec.Network[0].Static.Address != pool {
		t.Errorf("VSphereMachine %s network %+v, want eth0 at %s", name, vsm.Spec.Network, pool)
	}
	if !hasHostName(vsm.Status.Addresses, "keep-vm") || !hasAddress(vm.Status.Addresses, v1alpha1.MachineHostName, "keep-vm") {
		t.Errorf("host name: VSphereMachine addresses %+v, VM addresses %+v, want Hostname keep-vm", vsm.Status.Addresses, vm.Status.Addresses)
	}
	eventually(t, time.Minute, func() error {
		m, err := vcsim.ReadVM(ctx, migSim.Endpoint, "admin@vsphere.local", migPassword, "DC0", providers.BackendName(ns, name))
		if err != nil || m == nil || m.Guest == nil {
			return fmt.Errorf("vcsim VM %s: %+v (%v)", name, m, err)
		}
		if m.Guest.HostName != "keep-vm" || m.Guest.IpAddress != pool {
			return fmt.Errorf("vcsim guest host name %q, address %q; want keep-vm, %s", m.Guest.HostName, m.Guest.IpAddress, pool)
		}
		return nil
	})
	gone(t, source, &infrav1.ProxmoxMachine{})
	if _, ok := pveVM(source); ok {
		t.Errorf("the Proxmox VE VM of %s survived the migration", source)
	}
	snapshotsAfterMigration(t, vm, before, source)

	// vSphere → Proxmox VE, asked for: anywhere but where it is.
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.Placement.ProviderSelector.MatchLabels = map[string]string{"mig": "yes"}
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, "banlieue.io/migrate", "true")
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	pm := &infrav1.ProxmoxMachine{}
	back := targetMachine(t, vm, pm)
	if len(pm.Spec.Network) != 1 || pm.Spec.Network[0].Static == nil || pm.Spec.Network[0].Static.Address != pool {
		t.Errorf("ProxmoxMachine %s created with network %+v, want eth0 at %s", back, pm.Spec.Network, pool)
	}
	waitVM(t, vm, "migrated back to Proxmox VE", 3*time.Minute, readyOn("mig-proxmox"))
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: back}, pm); err != nil {
		t.Fatal(err)
	}
	if pm.Spec.HostName != "keep-vm" || !hasHostName(pm.Status.Addresses, "keep-vm") {
		t.Errorf("ProxmoxMachine %s spec.hostName %q, addresses %+v; want host name keep-vm", back, pm.Spec.HostName, pm.Status.Addresses)
	}
	config, ok := pveVM(back)
	if !ok {
		t.Fatalf("no Proxmox VE VM for %s", back)
	}
	if v, want := fmt.Sprint(config["ipconfig0"]), "ip="+pool+"/24,gw=192.168.160.1"; !strings.Contains(v, want) {
		t.Errorf("Proxmox VE VM %s: ipconfig0 = %q, want %q in it", back, v, want)
	}
	if got := poolAddress(t, vm); got != pool {
		t.Errorf("pool address %s after two migrations, was %s", got, pool)
	}
	gone(t, name, &infrav1.VSphereMachine{})
}

// TestMigrationTimesOut (issue 32): a VM on vSphere whose selector moves
// it to Proxmox VE, where no clone succeeds: after
// migrationTimeoutSeconds the target ProxmoxMachine is deleted, the VM
// stays Ready on vSphere (Migrating=False, MigrationTimedOut, an Event),
// and the drift does not start it again at once; once the wait is over
// (and clones work again), it does and succeeds: the new ProxmoxMachine
// has the VM's static address and host name.
func TestMigrationTimesOut(t *testing.T) {
	migrationBackends(t)
	const timeout = 15
	vm := migVM(t, "slow-vm", "vsphere", "192.0.2.62", func(vm *v1alpha1.VirtualMachine) {
		vm.Spec.MigrationTimeoutSeconds = ptr.To[int32](timeout)
	})
	sim.FailTasks("qmclone", "clone failed: simulated storage outage")
	defer sim.FailTasks("qmclone", "")
	setSelector(t, vm, "proxmox")
	name := targetMachine(t, vm, &infrav1.ProxmoxMachine{})
	started := vm.Status.Migration.StartTime
	if started == nil {
		t.Fatalf("status.migration.startTime not set: %+v", vm.Status.Migration)
	}
	waitVM(t, vm, "timed out", 2*timeout*time.Second, migrating("MigrationTimedOut"))
	timedOut := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating)
	if d := timedOut.LastTransitionTime.Sub(started.Time); d < timeout*time.Second {
		t.Errorf("timed out %s after it started, before its %ds", d, timeout)
	}
	gone(t, name, &infrav1.ProxmoxMachine{})
	if err := readyOn("mig-vsphere")(vm); err != nil {
		t.Errorf("after the timeout: %v", err)
	}
	if e := event(t, vm, "MigrationTimedOut"); e.Type != corev1.EventTypeWarning || !strings.Contains(e.Note, name) {
		t.Errorf("Event %s %q", e.Type, e.Note)
	}
	// The drift is still there: no new migration during the wait.
	for end := time.Now().Add(timeout * time.Second / 2); time.Now().Before(end); time.Sleep(time.Second) {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(vm), vm); err != nil {
			t.Fatal(err)
		}
		if err := migrating("MigrationTimedOut")(vm); err != nil {
			t.Fatalf("right after the timeout: %v", err)
		}
	}
	sim.FailTasks("qmclone", "")
	waitVM(t, vm, "migrated after the wait", 2*time.Minute, readyOn("mig-proxmox"))
	if c := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineMigrating); c.Reason != "Migrated" {
		t.Errorf("Migrating %+v, want Migrated", c)
	}
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: vm.Status.InfrastructureRef.Name}, pm); err != nil {
		t.Fatal(err)
	}
	if len(pm.Spec.Network) != 1 || pm.Spec.Network[0].Static == nil || pm.Spec.Network[0].Static.Address != "192.0.2.62" || pm.Spec.HostName != "slow-vm" {
		t.Errorf("ProxmoxMachine %s network %+v, host name %q; want eth0 at 192.0.2.62, slow-vm", pm.Name, pm.Spec.Network, pm.Spec.HostName)
	}
	if config, ok := pveVM(pm.Name); !ok || !strings.Contains(fmt.Sprint(config["ipconfig0"]), "ip=192.0.2.62/24,gw=192.0.2.1") {
		t.Errorf("Proxmox VE VM %s: ipconfig0 = %v", pm.Name, config["ipconfig0"])
	}
}

// TestMigrationTargetVanishes (issue 32): the Provider a migration builds
// on is deleted mid-migration: the target machine is deleted (so the
// Provider, which waits for its machines, goes), the VM stays on vSphere,
// Migrating=False NoTarget.
func TestMigrationTargetVanishes(t *testing.T) {
	ctx := context.Background()
	migrationBackends(t)
	p := migProxmoxProvider("vanishing-proxmox", "vanishing")
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitProvider(t, p.Name, "InventoryWalked")
	vm := migVM(t, "orphan-vm", "vsphere", "192.0.2.63", nil)
	sim.FailTasks("qmclone", "clone failed: simulated storage outage")
	defer sim.FailTasks("qmclone", "")
	setSelector(t, vm, "vanishing")
	name := targetMachine(t, vm, &infrav1.ProxmoxMachine{})
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitVM(t, vm, "cancelled", time.Minute, migrating("NoTarget"))
	gone(t, name, &infrav1.ProxmoxMachine{})
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.Provider{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Provider %s still there (%v)", p.Name, err)
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if err := readyOn("mig-vsphere")(vm); err != nil {
		t.Errorf("after the cancel: %v", err)
	}
	event(t, vm, "NoTarget")
}

// TestMigrationDriftReverted (issue 32): a VM's selector moves it from
// vSphere to Proxmox VE, then back before the target is Ready: the
// migration is cancelled (the target deleted, Migrating=False
// DriftReverted), the VM stays Ready on vSphere.
func TestMigrationDriftReverted(t *testing.T) {
	migrationBackends(t)
	vm := migVM(t, "fickle-vm", "vsphere", "192.0.2.64", nil)
	sim.FailTasks("qmclone", "clone failed: simulated storage outage")
	defer sim.FailTasks("qmclone", "")
	source := vm.Status.InfrastructureRef.Name
	setSelector(t, vm, "proxmox")
	name := targetMachine(t, vm, &infrav1.ProxmoxMachine{})
	setSelector(t, vm, "vsphere")
	waitVM(t, vm, "cancelled", time.Minute, migrating("DriftReverted"))
	gone(t, name, &infrav1.ProxmoxMachine{})
	if err := readyOn("mig-vsphere")(vm); err != nil || vm.Status.InfrastructureRef.Name != source {
		t.Errorf("after the cancel: %v, machine %s (was %s)", err, vm.Status.InfrastructureRef.Name, source)
	}
	event(t, vm, "DriftReverted")
}

// snapshotsAfterMigration (issue 34): the snapshot taken on the source
// machine is Stale once the VM runs elsewhere and a restore to it is
// refused by name; on vSphere (vcsim) a new snapshot is taken and a
// restore to it is done.
func snapshotsAfterMigration(t *testing.T, vm *v1alpha1.VirtualMachine, before *v1alpha1.VirtualMachineSnapshot, source string) {
	t.Helper()
	eventually(t, time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(before), before); err != nil {
			return err
		}
		c := meta.FindStatusCondition(before.Status.Conditions, v1alpha1.SnapshotReady)
		if c == nil || c.Reason != v1alpha1.SnapshotReasonStale || before.Status.ReadyToUse || !strings.Contains(c.Message, source) {
			return fmt.Errorf("snapshot taken before the migration: readyToUse %v, Ready %+v; want Stale naming %s", before.Status.ReadyToUse, c, source)
		}
		return nil
	})
	refused(t, newRestore("to-stale", vm.Name, before.Name), "spec.snapshotName", "Stale")
	after := newSnapshot("keep-after", vm.Name, false)
	if err := c.Create(context.Background(), after); err != nil {
		t.Fatal(err)
	}
	ready(t, after)
	if !strings.HasPrefix(after.Status.BackendRef, "snapshot-") {
		t.Errorf("vSphere snapshot ref %q, want a snapshot MoRef", after.Status.BackendRef)
	}
	r := newRestore("to-after", vm.Name, after.Name)
	if err := c.Create(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	restored(t, r, v1alpha1.RestoreDone)
}
