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
package capi

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

const (
	simUser     = "administrator@vsphere.local"
	simPassword = "capi-REPLACE-ME"
)

// simVM reads a VM of the simulator by name; nil when absent.
func simVM(t *testing.T, sim *vcsim.Simulator, dc, name string) *mo.VirtualMachine {
	t.Helper()
	m, err := vcsim.ReadVM(context.Background(), sim.Endpoint, simUser, simPassword, dc, name)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestMachineOnVCSim: a Cluster API Machine whose infrastructureRef is a
// VSphereMachine is built by banlieue's vSphere provider (the shipped
// Deployment's pods) in vcsim: the VM gets the Machine's bootstrap data as
// guestinfo.userdata, the Machine reaches Provisioned with the VM's BIOS
// UUID as providerID and the guest's address; deleting the Machine
// destroys the VM.
func TestMachineOnVCSim(t *testing.T) {
	ctx := context.Background()
	sim, endpoint := startVCSim(t, vcsim.Config{Datacenters: 1, Clusters: 2, Template: "ubuntu-22.04-cloudinit",
		Username: simUser, Password: simPassword, DHCP: true})
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "capi-vcsim-creds", Namespace: devenv.Namespace},
		StringData: map[string]string{"username": simUser, "password": simPassword}}); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", "capi-vcsim-creds"); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-vsphere", Namespace: devenv.Namespace, Labels: map[string]string{"capi": "vcsim"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: endpoint,
				CredentialsRef: v1alpha1.LocalObjectReference{Name: "capi-vcsim-creds"},
				CABundle:       &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
			// The provider builds only what the Provider publishes.
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
			},
		},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devenv.DeleteProvider(context.Background(), c, p) })
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}}}
	if err := c.Create(ctx, img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitProviderReady(t, ctx, p)

	ns := newNamespace(t, "capi-vcsim")
	bindUserData(t, ctx, ns, "vsphere")
	// banlieue's controller, not the test, fills the VSphereCluster's
	// status from the Provider's failure domains.
	target := "" // the failure domain of cluster DC0_C1
	for _, fd := range p.Status.FailureDomains {
		if fd.Cluster == "DC0_C1" {
			target = fd.Name
		}
	}
	if target == "" {
		t.Fatalf("the Provider publishes no failure domain for DC0_C1: %+v", p.Status.FailureDomains)
	}
	createInfraCluster(t, ctx, &infrav1.VSphereCluster{ObjectMeta: metav1.ObjectMeta{Name: "c3", Namespace: ns},
		Spec: infrav1.VSphereClusterSpec{CommonClusterSpec: infrav1.CommonClusterSpec{
			ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"capi": "vcsim"}}}}}, "VSphereCluster", failureDomainNames(p))
	bootstrap := "#cloud-config\nhostname: m3\nruncmd: [kubeadm join]\n"
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "m3-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte(bootstrap)}}); err != nil {
		t.Fatal(err)
	}
	vsm := &infrav1.VSphereMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "m3", Namespace: ns,
			Annotations: map[string]string{infrav1.ProviderAnnotation: devenv.Namespace + "/capi-vsphere"}},
		Spec: machineSpec(),
	}
	// The machine names its Provider, so banlieue's controller leaves
	// its placement alone: it says its failure domain itself, as the
	// Machine does.
	vsm.Spec.FailureDomain, vsm.Spec.Datacenter, vsm.Spec.Cluster = target, "", ""
	if err := c.Create(ctx, vsm); err != nil {
		t.Fatal(err)
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m3", Namespace: ns},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c3",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("m3-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "VSphereMachine", Name: "m3"},
			FailureDomain:     target,
		},
	}
	if err := c.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}
	vmName := providers.BackendName(ns, "m3")
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(machine), machine); err != nil {
			return err
		}
		if machine.Status.Phase != string(clusterv1.MachinePhaseProvisioned) {
			return fmt.Errorf("phase %q", machine.Status.Phase)
		}
		for _, a := range machine.Status.Addresses {
			if a.Type == clusterv1.MachineInternalIP {
				return nil
			}
		}
		return fmt.Errorf("no InternalIP yet: %+v", machine.Status.Addresses)
	})
	m := simVM(t, sim, "DC0", vmName)
	if m == nil {
		t.Fatalf("no VM %s in vcsim", vmName)
	}
	if got := vmCluster(t, sim, "DC0", vmName); got != "DC0_C1" {
		t.Errorf("VM in cluster %q, want DC0_C1 (the Machine's failure domain %s)", got, target)
	}
	// Cluster API adopted our object: its cluster-name label and the
	// Machine as owner.
	if err := c.Get(ctx, client.ObjectKeyFromObject(vsm), vsm); err != nil {
		t.Fatal(err)
	}
	if vsm.Labels[clusterv1.ClusterNameLabel] != "c3" || !ownedByMachine(vsm.OwnerReferences, "m3") {
		t.Errorf("VSphereMachine not adopted: labels %v, owners %+v", vsm.Labels, vsm.OwnerReferences)
	}
	if machine.Spec.ProviderID != "vsphere://"+m.Config.Uuid {
		t.Errorf("Machine providerID %q, VM BIOS UUID %s", machine.Spec.ProviderID, m.Config.Uuid)
	}
	var userData string
	for _, o := range m.Config.ExtraConfig {
		if v := o.GetOptionValue(); v.Key == "guestinfo.userdata" {
			b, _ := base64.StdEncoding.DecodeString(v.Value.(string))
			userData = string(b)
		}
	}
	if userData != bootstrap {
		t.Errorf("guestinfo.userdata %q, want the Machine's bootstrap data", userData)
	}
	if m.Config.Hardware.NumCPU != 2 || m.Config.Hardware.MemoryMB != 4096 {
		t.Errorf("VM has %d CPUs and %d MiB, want the VSphereMachine's 2 and 4096", m.Config.Hardware.NumCPU, m.Config.Hardware.MemoryMB)
	}

	// Deleting the Machine deletes our object, which destroys the VM first.
	if err := c.Delete(ctx, machine); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vsm), vsm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VSphereMachine still there (%v)", err)
		}
		if simVM(t, sim, "DC0", vmName) != nil {
			return fmt.Errorf("vcsim still has %s", vmName)
		}
		return nil
	})
}

// startVCSim starts vcsim as cfg says, its certificate also naming the
// node's bridge gateway, where its port is exposed to the provider's pods;
// it returns the simulator (the test reads it on loopback) and the
// endpoint the pods use, and closes it when the test ends.
func startVCSim(t *testing.T, cfg vcsim.Config) (*vcsim.Simulator, string) {
	t.Helper()
	cfg.ServingIPs = []net.IP{net.ParseIP(env.NodeGateway())}
	sim, err := vcsim.Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	endpoint, err := env.ExposeURL(sim.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	return sim, endpoint
}

// vmCluster is the compute cluster the VM named name of datacenter dc runs
// in, as vcsim says ("" when there is no such VM).
func vmCluster(t *testing.T, sim *vcsim.Simulator, dc, name string) string {
	t.Helper()
	ctx := context.Background()
	gc, err := vcsim.Login(ctx, sim.Endpoint, simUser, simPassword)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = gc.Logout(ctx) }()
	f := find.NewFinder(gc.Client, false)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		t.Fatal(err)
	}
	f.SetDatacenter(d)
	vm, err := f.VirtualMachine(ctx, name)
	if err != nil {
		return ""
	}
	// The cluster whose resource pool the VM is in (vcsim leaves a clone on
	// its template's host; the pool is where vCenter runs it).
	pool, err := vm.ResourcePool(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var rp mo.ResourcePool
	if err := pool.Properties(ctx, pool.Reference(), []string{"owner"}, &rp); err != nil {
		t.Fatalf("resource pool of %s: %v", name, err)
	}
	var cluster mo.ManagedEntity
	if err := property.DefaultCollector(gc.Client).RetrieveOne(ctx, rp.Owner, []string{"name"}, &cluster); err != nil {
		t.Fatal(err)
	}
	return cluster.Name
}

// TestMachineDeploymentSpreads: a MachineDeployment of six replicas, its
// template naming no datacenter or cluster, against a VSphereCluster whose
// failure domains banlieue's controller aggregated from a shared Provider
// (2 datacenters x 3 clusters of vcsim): banlieue gives each machine the
// least used failure domain (Cluster API's MachineSets do not spread) and
// the real provider (the shipped Deployment's pods) builds each VM in its
// own compute cluster. The machines stay when the test ends, and so does
// their Provider, which they hold.
func TestMachineDeploymentSpreads(t *testing.T) {
	ctx := context.Background()
	sim, endpoint := startVCSim(t, vcsim.Config{Datacenters: 2, Clusters: 3, Template: "spread-template",
		Username: simUser, Password: simPassword, DHCP: true})
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "spread-creds", Namespace: devenv.Namespace},
		StringData: map[string]string{"username": simUser, "password": simPassword}}); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", "spread-creds"); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "spread-vsphere", Namespace: devenv.Namespace, Labels: map[string]string{"spread": "capi"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: endpoint,
				CredentialsRef: v1alpha1.LocalObjectReference{Name: "spread-creds"},
				CABundle:       &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
		},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "spread-template"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "spread-template"}}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}

	ns := newNamespace(t, "capi-spread")
	bindUserData(t, ctx, ns, "vsphere")
	// banlieue's controller, not the test, fills the VSphereCluster's status.
	vsc := &infrav1.VSphereCluster{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: ns},
		Spec: infrav1.VSphereClusterSpec{CommonClusterSpec: infrav1.CommonClusterSpec{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"spread": "capi"}},
			ControlPlaneEndpoint: infrav1.APIEndpoint{Host: "192.0.2.20", Port: 6443}}}}
	cluster := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "spread", Namespace: ns},
		Spec: clusterv1.ClusterSpec{InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "VSphereCluster", Name: "spread"}}}
	for _, o := range []client.Object{vsc, cluster} {
		if err := c.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(cluster), cluster); err != nil {
			return err
		}
		if len(cluster.Status.FailureDomains) != 6 {
			return fmt.Errorf("Cluster failure domains %+v", cluster.Status.FailureDomains)
		}
		return nil
	})
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "spread-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte("#cloud-config\n")}}); err != nil {
		t.Fatal(err)
	}
	// No datacenter, cluster, datastore or port group: the failure domain
	// and the template say where.
	tmpl := &infrav1.VSphereMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: infrav1.VSphereMachineTemplateSpec{Template: infrav1.VSphereMachineTemplateResource{Spec: infrav1.VSphereMachineSpec{
			Template: "spread-template", CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 1, MemoryMiB: 512},
			Network: []infrav1.VSphereNetworkDevice{{Name: "eth0", DHCP4: true}},
		}}}}
	if err := c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	md := newMachineDeployment(ns, "workers", "spread", "VSphereMachineTemplate", "spread-bootstrap", 6)
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	where := map[string]v1alpha1.FailureDomain{}
	for _, fd := range p.Status.FailureDomains {
		where[fd.Name] = fd
	}
	eventually(t, 4*time.Minute, func() error {
		var list infrav1.VSphereMachineList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(list.Items) != 6 {
			return fmt.Errorf("%d VSphereMachines; %s", len(list.Items), describeMD(ctx, ns, md.Name))
		}
		used := map[string]string{}
		for _, vsm := range list.Items {
			fd, ok := where[vsm.Spec.FailureDomain]
			if !ok {
				return fmt.Errorf("%s: failure domain %q", vsm.Name, vsm.Spec.FailureDomain)
			}
			if other, taken := used[fd.Name]; taken {
				t.Fatalf("%s and %s share failure domain %s", other, vsm.Name, fd.Name)
			}
			used[fd.Name] = vsm.Name
			if vsm.Spec.CPUs != 1 || vsm.Spec.Template != "spread-template" || vsm.Labels[clusterv1.ClusterNameLabel] != "spread" || !ownedByMachine(vsm.OwnerReferences, "") {
				return fmt.Errorf("%s: not cloned from the template and adopted yet: spec %+v, labels %v, owners %+v", vsm.Name, vsm.Spec, vsm.Labels, vsm.OwnerReferences)
			}
			if got := vmCluster(t, sim, fd.Datacenter, providers.BackendName(ns, vsm.Name)); got != fd.Cluster {
				return fmt.Errorf("%s: vcsim VM in cluster %q, want %s/%s", vsm.Name, got, fd.Datacenter, fd.Cluster)
			}
		}
		return nil
	})
}

// ownedByMachine: refs hold a Cluster API Machine named name (any name
// when "").
func ownedByMachine(refs []metav1.OwnerReference, name string) bool {
	for _, ref := range refs {
		if ref.Kind == "Machine" && ref.APIVersion == clusterv1.GroupVersion.String() && (name == "" || ref.Name == name) {
			return true
		}
	}
	return false
}
