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

package devenv

import (
	"context"
	"fmt"
	"net"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// ProxmoxProvider is a Provider of class proxmox in Namespace on a Proxmox
// VE API (a simulator's, in tests) and the Secret holding its API token.
// The API comes as values rather than a pvesim.Simulator: a test may hand
// out a wrong token secret, or an endpoint other than the simulator's own
// (its port exposed to pods).
type ProxmoxProvider struct {
	Name   string
	Labels map[string]string
	// Endpoint is the API's URL (https://HOST:PORT/api2/json); CA is the
	// PEM its serving certificate chains to.
	Endpoint             string
	CA                   []byte
	TokenID, TokenSecret string
	// Secret names the credentials Secret. One that exists is kept, so
	// tests can share one or bring their own with more keys.
	Secret string
	// Grant names Secret in the static install's credentials Role, as its
	// administrator does for a Secret other than the shipped one. Pods
	// reading the shipped Secret, or running as the operator's rendered
	// ServiceAccount, need no grant.
	Grant        bool
	Capabilities v1alpha1.ProviderCapabilities
}

// NewProxmoxProvider creates p's credentials Secret (granting it when
// p.Grant) through c and returns p's Provider, not created: callers change
// it first or create it when the test wants it.
func (e *Env) NewProxmoxProvider(ctx context.Context, c client.Client, p ProxmoxProvider) (*v1alpha1.Provider, error) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: p.Secret, Namespace: Namespace},
		StringData: map[string]string{"tokenID": p.TokenID, "tokenSecret": p.TokenSecret}}
	if err := c.Create(ctx, s); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating Secret %s/%s: %w", Namespace, p.Secret, err)
	}
	if p.Grant {
		if err := e.GrantCredentials(ctx, "proxmox", "secrets", p.Secret); err != nil {
			return nil, fmt.Errorf("granting Secret %s/%s to the proxmox provider: %w", Namespace, p.Secret, err)
		}
	}
	return &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: Namespace, Labels: p.Labels},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
			Connection: v1alpha1.ProviderConnection{Endpoint: p.Endpoint,
				CredentialsRef: v1alpha1.LocalObjectReference{Name: p.Secret},
				CABundle:       &v1alpha1.CABundleSource{Inline: string(p.CA)}},
			Capabilities: p.Capabilities,
		},
	}, nil
}

// PodsProxmoxSimulator starts a Proxmox VE simulator that pods of the real
// node reach: its port exposed on the bridge's gateway (ExposeURL), its
// certificate naming that address. It returns the simulator (close it when
// done) and the endpoint pods use.
func (e *Env) PodsProxmoxSimulator() (*pvesim.Simulator, string, error) {
	sim := pvesim.New(pvesim.Options{ServingIPs: []net.IP{net.ParseIP(e.NodeGateway())}})
	endpoint, err := e.ExposeURL(sim.URL)
	if err != nil {
		sim.Close()
		return nil, "", err
	}
	return sim, endpoint, nil
}
