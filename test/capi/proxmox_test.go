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
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

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
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// TestMachineOnProxmox: a Cluster API Machine whose infrastructureRef is a
// ProxmoxMachine is built by banlieue's Proxmox provider (the shipped
// Deployment's pods) on the Proxmox VE simulator, and reaches Provisioned
// through Cluster API's own reconcilers with proxmox://<UID> as providerID
// and the guest agent's address; deleting the Machine destroys the VM.
func TestMachineOnProxmox(t *testing.T) {
	ctx := context.Background()
	sim, p := startProxmoxProvider(t, ctx, "capi-proxmox", map[string]string{"capi": "proxmox"})

	ns := newNamespace(t, "capi-proxmox")
	bindUserData(t, ctx, ns, "proxmox")
	// banlieue's controller serves the ProxmoxCluster: it aggregates the
	// Provider's failure domains, and gives the machine below, which names
	// none, its Machine's.
	createInfraCluster(t, ctx, &infrav1.ProxmoxCluster{ObjectMeta: metav1.ObjectMeta{Name: "c5", Namespace: ns},
		Spec: infrav1.ProxmoxClusterSpec{CommonClusterSpec: infrav1.CommonClusterSpec{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"capi": "proxmox"}}}}},
		"ProxmoxCluster", failureDomainNames(p))
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "m5-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte("#cloud-config\nruncmd: [echo capi-bootstrap-m5]\n")}}); err != nil {
		t.Fatal(err)
	}
	pm := &infrav1.ProxmoxMachine{
		ObjectMeta: metav1.ObjectMeta{Name: "m5", Namespace: ns, Labels: map[string]string{clusterv1.ClusterNameLabel: "c5"}},
		Spec: infrav1.ProxmoxMachineSpec{
			CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 2, MemoryMiB: 2048},
			Template:          "debian-12-cloud",
			Disks:             []infrav1.ProxmoxDisk{{Name: "root", SizeGiB: 16, Storage: "local-lvm"}},
			Network:           []infrav1.ProxmoxNetworkDevice{{Name: "eth0", Bridge: "vmbr0", DHCP4: true}},
		},
	}
	if err := c.Create(ctx, pm); err != nil {
		t.Fatal(err)
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m5", Namespace: ns},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c5",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("m5-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "ProxmoxMachine", Name: "m5"},
			FailureDomain:     p.Status.FailureDomains[1].Name,
		},
	}
	if err := c.Create(ctx, machine); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(machine), machine); err != nil {
			return err
		}
		if machine.Status.Phase != string(clusterv1.MachinePhaseProvisioned) {
			return fmt.Errorf("phase %q", machine.Status.Phase)
		}
		for _, a := range machine.Status.Addresses {
			if a.Type == clusterv1.MachineInternalIP && strings.HasPrefix(a.Address, "10.20.") {
				return nil
			}
		}
		return fmt.Errorf("no InternalIP yet: %+v", machine.Status.Addresses)
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(pm), pm); err != nil {
		t.Fatal(err)
	}
	if pm.Spec.FailureDomain != machine.Spec.FailureDomain {
		t.Errorf("ProxmoxMachine failure domain %q, want its Machine's %q", pm.Spec.FailureDomain, machine.Spec.FailureDomain)
	}
	if machine.Spec.ProviderID != "proxmox://"+string(pm.UID) {
		t.Errorf("Machine providerID %q, ProxmoxMachine UID %s", machine.Spec.ProviderID, pm.UID)
	}
	name := providers.BackendName(ns, "m5")
	var node string
	for _, v := range sim.VMs() {
		if v.Name == name {
			node = v.Node
		}
	}
	if node != p.Status.FailureDomains[1].Host {
		t.Errorf("VM %s on node %q, want the failure domain's %s", name, node, p.Status.FailureDomains[1].Host)
	}

	if err := c.Delete(ctx, machine); err != nil {
		t.Fatal(err)
	}
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pm), pm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ProxmoxMachine still there (%v)", err)
		}
		for _, v := range sim.VMs() {
			if v.Name == name {
				return fmt.Errorf("the simulator still has %s", name)
			}
		}
		return nil
	})
}

// startProxmoxProvider starts a Proxmox VE simulator that the provider's
// pods reach (its port exposed on the node's bridge gateway, its
// certificate naming that address), a Provider named name (labelled
// labels) of its two nodes with its credentials granted by name, and the
// VMImage publishing its template; it waits until banlieue's Proxmox
// provider (the package's pods) reports the Provider Ready. The Provider
// is deleted, then the simulator closed, when the test ends.
func startProxmoxProvider(t *testing.T, ctx context.Context, name string, labels map[string]string) (*pvesim.Simulator, *v1alpha1.Provider) {
	t.Helper()
	sim := pvesim.New(pvesim.Options{TaskDelay: 50 * time.Millisecond, AgentDelay: 200 * time.Millisecond,
		ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}})
	t.Cleanup(sim.Close)
	endpoint, err := env.ExposeURL(sim.URL)
	if err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	p, err := env.NewProxmoxProvider(ctx, c, devenv.ProxmoxProvider{Name: name, Labels: labels,
		Endpoint: endpoint, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: sim.Secret, Secret: name + "-token", Grant: true,
		Capabilities: v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr0"}}},
		}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { devenv.DeleteProvider(context.Background(), c, p) })
	// Machines may clone only templates a VMImage publishes.
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "capi-debian"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "debian-12-cloud"}}}}
	if err := c.Create(ctx, img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	waitProviderReady(t, ctx, p)
	return sim, p
}
