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
	"net"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// The tests of several backends run, beside the libvirt provider, the
// shipped vSphere provider Deployment (and TestOneManifestThreeBackends
// the Proxmox VE provider's), one per class serving the namespace as at
// a site, applied when a test first needs it. Each test brings its own
// simulator, which listens on loopback, is exposed on the node's gateway
// (where the provider pods reach it) and has a certificate naming that
// address; the test reads the simulator on loopback.

// shippedSettings are what this package changes of the shipped vSphere
// and Proxmox VE providers' ConfigMaps, as libvirtSettings does of the
// libvirt provider's: inventories re-walked every 2s rather than 5m, and
// Proxmox VE tasks polled every 50ms rather than 500ms, so clones settle
// fast.
var shippedSettings = map[string]string{
	"vsphere": `{"data":{"BANLIEUE_RESYNC":"2s"}}`,
	"proxmox": `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_TASK_POLL":"50ms"}}`,
}

// shipped says, per class, whether its shipped provider rolled out (nil)
// or why not; absent until a test first needs it.
var shipped = map[string]error{}

// shippedProvider runs the shipped provider Deployment of class, with
// shippedSettings, unless an earlier test did.
func shippedProvider(t *testing.T, class string) {
	t.Helper()
	err, done := shipped[class]
	if !done {
		if err = env.ApplyProvider(root, class, shippedSettings[class]); err == nil {
			err = env.RolledOut(context.Background(), ns, 2*time.Minute, "banlieue-provider-"+class)
		}
		shipped[class] = err
	}
	if err != nil {
		t.Fatal(err)
	}
}

// vsphereSite starts, for one test, a one-cluster vcsim holding the
// guest's template (its administrator's password password) and the
// shipped vSphere provider, and returns the simulator and its SDK URL as
// the provider's pods reach it. The simulator closes when the test ends.
func vsphereSite(t *testing.T, password string) (*vcsim.Simulator, string) {
	t.Helper()
	sim, err := vcsim.Start(context.Background(), vcsim.Config{Datacenters: 1, Clusters: 1, Template: "banlieue-guest",
		Username: "admin@vsphere.local", Password: password, DHCP: true, ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	shippedProvider(t, "vsphere")
	return sim, podURL(t, sim.Endpoint)
}

// proxmoxSite starts, for one test, a Proxmox VE simulator and the
// shipped Proxmox VE provider, and returns the simulator and its API as
// the provider's pods reach it. The simulator closes when the test ends.
func proxmoxSite(t *testing.T) (*pvesim.Simulator, string) {
	t.Helper()
	pve := pvesim.New(pvesim.Options{TaskDelay: 50 * time.Millisecond, AgentDelay: 200 * time.Millisecond,
		ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}})
	t.Cleanup(pve.Close)
	shippedProvider(t, "proxmox")
	return pve, podURL(t, pve.URL)
}

// createProvider creates p, deleted when the test ends, before its
// simulator closes (when the test started that first): the shipped
// provider goes on serving the namespace after the test, and would keep
// reporting a Provider whose backend is gone.
func createProvider(t *testing.T, p *v1alpha1.Provider) {
	t.Helper()
	if err := c.Create(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
}

// vsphereBeside starts, for one test, a vSphere site (vsphereSite) and
// creates a Ready Provider name of it (labels; network class prod on VM
// Network, its Secret name-creds with password).
func vsphereBeside(t *testing.T, name, password string, labels map[string]string) *vcsim.Simulator {
	t.Helper()
	ctx := context.Background()
	sim, endpoint := vsphereSite(t, password)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-creds", Namespace: ns},
		StringData: map[string]string{"username": "admin@vsphere.local", "password": password}}); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", name+"-creds"); err != nil {
		t.Fatal(err)
	}
	createProvider(t, &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: name + "-creds"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
			Capabilities: v1alpha1.ProviderCapabilities{NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}}},
		},
	})
	waitProviderReady(t, name)
	return sim
}
