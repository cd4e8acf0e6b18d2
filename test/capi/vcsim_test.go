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
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
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
// VSphereMachine is built by banlieue's vSphere provider (the binary, as a
// process) in vcsim: the VM gets the Machine's bootstrap data as
// guestinfo.userdata, the Machine reaches Provisioned with the VM's BIOS
// UUID as providerID and the guest's address; deleting the Machine
// destroys the VM.
func TestMachineOnVCSim(t *testing.T) {
	ctx := context.Background()
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 2, Template: "ubuntu-22.04-cloudinit",
		Username: simUser, Password: simPassword, DHCP: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sim.Close()
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "capi-vcsim-creds", Namespace: devenv.Namespace},
		StringData: map[string]string{"username": simUser, "password": simPassword}}); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-vsphere", Namespace: devenv.Namespace},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.Endpoint,
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
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}}}
	if err := c.Create(ctx, img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	proc, err := env.StartVSphereProvider("provider-vsphere", 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer proc.Kill()
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(p.Status.Conditions, v1alpha1.ProviderReady) {
			return fmt.Errorf("Provider not Ready: %+v", p.Status.Conditions)
		}
		return nil
	})

	ns := newNamespace(t, "capi-vcsim")
	// The namespace consents to the provider reading its Machines'
	// bootstrap data (the RoleBinding README documents).
	if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-userdata", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-userdata"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-provider-vsphere", Namespace: devenv.Namespace}}}); err != nil {
		t.Fatal(err)
	}
	createCluster(t, ctx, ns, "c3")
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
	vsm.Spec.Cluster = "DC0_C1"
	if err := c.Create(ctx, vsm); err != nil {
		t.Fatal(err)
	}
	machine := &clusterv1.Machine{
		ObjectMeta: metav1.ObjectMeta{Name: "m3", Namespace: ns},
		Spec: clusterv1.MachineSpec{
			ClusterName:       "c3",
			Bootstrap:         clusterv1.Bootstrap{DataSecretName: ptr.To("m3-bootstrap")},
			InfrastructureRef: clusterv1.ContractVersionedObjectReference{APIGroup: infrav1.GroupName, Kind: "VSphereMachine", Name: "m3"},
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
