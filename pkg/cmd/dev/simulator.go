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
	"encoding/hex"
	"fmt"
	"io/fs"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/artifacts/examples"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

const (
	seedProviderFile = "provider.yaml"
	simUser          = "administrator@vsphere.local"
	// What the simulator calls the seed Provider's datastore and port group.
	simDatastore = "LocalDS_0"
	simPortGroup = "VM Network"
	simTemplate  = "ubuntu-22.04-cloudinit"
)

// startSimulator starts a simulated vCenter shaped like the seed guide's
// (2 datacenters x 3 clusters, the seed template in each) with a fresh
// password, stores it in the seed Provider's credentials Secret, and
// creates or updates the seed Provider pointed at the simulator: its
// endpoint and CA, and the simulator's names for the datastore and port
// group its storage and network classes target. comps reach it where
// they run (the node's bridge gateway for pods).
func startSimulator(ctx context.Context, env *devenv.Env, comps *components) (*vcsim.Simulator, error) {
	buf := make([]byte, 16)
	if _, err := rand.Read(buf); err != nil {
		return nil, err
	}
	password := hex.EncodeToString(buf)
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 2, Clusters: 3, Template: simTemplate, Username: simUser, Password: password, DHCP: true,
		ServingIPs: comps.servingIPs()})
	if err != nil {
		return nil, fmt.Errorf("starting the simulated vCenter: %w", err)
	}
	endpoint, err := comps.reach(sim.Endpoint)
	if err != nil {
		sim.Close()
		return nil, err
	}
	sim.ReachedAt(endpoint)
	if err := pointSeedProvider(ctx, env, sim, endpoint, password); err != nil {
		sim.Close()
		return nil, err
	}
	return sim, nil
}

func pointSeedProvider(ctx context.Context, env *devenv.Env, sim *vcsim.Simulator, endpoint, password string) error {
	c, err := adminClient(env)
	if err != nil {
		return err
	}
	want, err := seedProvider(sim, endpoint)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: want.Spec.Connection.CredentialsRef.Name, Namespace: want.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, secret, func() error {
		secret.Data = map[string][]byte{"username": []byte(simUser), "password": []byte(password)}
		return nil
	}); err != nil {
		return fmt.Errorf("writing the credentials Secret: %w", err)
	}
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: want.Name, Namespace: want.Namespace}}
	if _, err := controllerutil.CreateOrUpdate(ctx, c, p, func() error {
		p.Labels, p.Spec = want.Labels, want.Spec
		return nil
	}); err != nil {
		return fmt.Errorf("applying the seed Provider: %w", err)
	}
	return nil
}

func seedProvider(sim *vcsim.Simulator, endpoint string) (*v1alpha1.Provider, error) {
	data, err := fs.ReadFile(examples.FS, seedProviderFile)
	if err != nil {
		return nil, err
	}
	p := &v1alpha1.Provider{}
	if err := yaml.Unmarshal(data, p); err != nil {
		return nil, fmt.Errorf("%s: %w", seedProviderFile, err)
	}
	p.Spec.Connection.Endpoint = endpoint
	p.Spec.Connection.CABundle = &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}
	p.Spec.Connection.InsecureSkipTLSVerify = false
	for i := range p.Spec.Capabilities.StorageClasses {
		p.Spec.Capabilities.StorageClasses[i].Target.Datastore = simDatastore
	}
	for i := range p.Spec.Capabilities.NetworkClasses {
		p.Spec.Capabilities.NetworkClasses[i].Target.PortGroup = simPortGroup
	}
	return p, nil
}

func adminClient(env *devenv.Env) (client.Client, error) {
	scheme, err := controllers.Scheme()
	if err != nil {
		return nil, err
	}
	return client.New(env.Admin, client.Options{Scheme: scheme})
}
