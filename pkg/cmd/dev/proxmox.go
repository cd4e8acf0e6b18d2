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

package dev

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers/proxmox"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

const (
	proxmoxProvider = "lab-proxmox"
	proxmoxImage    = "debian-12-proxmox"
)

// ProxmoxVersion is the release the development simulator answers as:
// 8.4, the first to take disk images as import content (spec.import).
const ProxmoxVersion = "8.4.1"

// ProxmoxNodes are the simulator's nodes pve1-pve3 (pvesim's defaults)
// with import content on local, where imported images are uploaded.
func ProxmoxNodes() []pvesim.NodeSpec {
	var out []pvesim.NodeSpec
	for _, n := range []string{"pve1", "pve2", "pve3"} {
		out = append(out, pvesim.NodeSpec{Name: n, Bridges: []string{"vmbr0", "vmbr1"}, Storages: []pvesim.StorageSpec{
			{Name: "local", Type: "dir", Content: []string{"iso", "vztmpl", "backup", "snippets", "images", "import"}},
			{Name: "local-lvm", Type: "lvmthin", Content: []string{"images", "rootdir"}},
		}})
	}
	return out
}

// ProxmoxACL is what the simulator lets its token do: the documented
// least-privilege grants (proxmox.Grants) for its version, seeds on local.
func ProxmoxACL() []pvesim.ACL {
	var acl []pvesim.ACL
	for _, g := range proxmox.Grants(8, "local") {
		acl = append(acl, pvesim.ACL{Path: g.Path, Privileges: g.Privileges})
	}
	return acl
}

// proxmoxConsoleUser opens the simulated VMs' serial consoles.
const proxmoxConsoleUser = "console@pve"

// startProxmox starts the Proxmox VE simulator (3 nodes, template
// debian-12-cloud on pve1; its token holding only ProxmoxACL) with a
// Provider lab-proxmox of banlieue-system on it, the token in Secret
// lab-proxmox-token, and a VMImage of its template.
func startProxmox(ctx context.Context, env *devenv.Env, comps *components) (*pvesim.Simulator, error) {
	// The serial console's user (kubectl banlieue console): Proxmox VE
	// 8.x takes no API token at the console's handshake; it may open
	// VMs' consoles and nothing else.
	consolePassword := rand.Text()
	sim := pvesim.New(pvesim.Options{ACL: ProxmoxACL(), Version: ProxmoxVersion, Nodes: ProxmoxNodes(),
		Users:      []pvesim.User{{ID: proxmoxConsoleUser, Password: consolePassword, ACL: []pvesim.ACL{{Path: "/vms", Privileges: []string{"VM.Console"}}}}},
		ServingIPs: comps.servingIPs()})
	endpoint, err := comps.reach(sim.URL)
	if err != nil {
		sim.Close()
		return nil, err
	}
	c, err := adminClient(env)
	if err != nil {
		sim.Close()
		return nil, err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: proxmoxProvider + "-token", Namespace: devenv.Namespace}}
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: proxmoxProvider, Namespace: devenv.Namespace}}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: proxmoxImage}}
	for _, step := range []struct {
		what string
		obj  client.Object
		f    controllerutil.MutateFn
	}{
		{"the token Secret", secret, func() error {
			secret.Data = map[string][]byte{"tokenID": []byte(sim.TokenID), "tokenSecret": []byte(sim.Secret),
				"consoleUsername": []byte(proxmoxConsoleUser), "consolePassword": []byte(consolePassword)}
			return nil
		}},
		{"the Provider", p, func() error {
			p.Labels = map[string]string{"env": "lab", "backend": "proxmox"}
			p.Spec = v1alpha1.ProviderSpec{
				ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
				Connection: v1alpha1.ProviderConnection{Endpoint: endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: secret.Name},
					CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CA)}},
				Capabilities: v1alpha1.ProviderCapabilities{
					StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
					NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr0"}}},
					Features:       []string{"efiSecureBoot", "vtpm"},
				},
			}
			return nil
		}},
		{"the VMImage", img, func() error {
			img.Spec.Sources = []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: v1alpha1.ImageSourceTemplate, Ref: "debian-12-cloud"}}
			return nil
		}},
	} {
		if _, err := controllerutil.CreateOrUpdate(ctx, c, step.obj, step.f); err != nil {
			sim.Close()
			return nil, fmt.Errorf("applying %s: %w", step.what, err)
		}
	}
	return sim, nil
}

const proxmoxMessage = `
A simulated Proxmox VE cluster (banlieue's pvesim: nodes pve1-pve3, template
debian-12-cloud) runs at %s; Provider %s points at it and the
Proxmox provider drives it. A VM there: set the placement of any VM to
{providerSelector: {matchLabels: {backend: proxmox}}} and imageRef %s.

  %s get provider %s -n banlieue-system
`
