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

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func provider(name, secret string, mutate func(*v1alpha1.ProviderSpec)) *v1alpha1.Provider {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"dc": "dc1", "env": "prod"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{
				Endpoint:       endpoint,
				CredentialsRef: v1alpha1.LocalObjectReference{Name: secret},
				CABundle:       &v1alpha1.CABundleSource{Inline: string(caPEM)},
			},
		},
	}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

// ensureImage makes sure a VMImage has the template as its vSphere
// source: a Provider builds only templates some image publishes.
func ensureImage(t *testing.T, template string) {
	t.Helper()
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: template},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: template}}}}
	if err := c.Create(context.Background(), img); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// publishing is a Provider mutation publishing these port groups and
// datastores as network and storage targets.
func publishing(portGroups, datastores []string) func(*v1alpha1.ProviderSpec) {
	return func(s *v1alpha1.ProviderSpec) {
		for i, pg := range portGroups {
			s.Capabilities.NetworkClasses = append(s.Capabilities.NetworkClasses,
				v1alpha1.NetworkClassCapability{Name: fmt.Sprintf("net-%d", i), Target: v1alpha1.NetworkTarget{PortGroup: pg}})
		}
		for i, ds := range datastores {
			s.Capabilities.StorageClasses = append(s.Capabilities.StorageClasses,
				v1alpha1.StorageClassCapability{Name: fmt.Sprintf("storage-%d", i), Target: v1alpha1.StorageTarget{Datastore: ds}})
		}
	}
}

func secret(t *testing.T, namespace, name string, data map[string]string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace}, StringData: data}
	if err := c.Create(context.Background(), s); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names a Providers' namespace Secret in the provider's credentials
	// Role as they create it.
	if namespace == ns {
		if err := env.GrantCredentials(context.Background(), "vsphere", "secrets", name); err != nil {
			t.Fatal(err)
		}
	}
}

// waitReady waits for the Provider's Ready condition to have reason.
func waitReady(t *testing.T, name, reason string) *v1alpha1.Provider {
	t.Helper()
	p := &v1alpha1.Provider{}
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return false, nil
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady)
		last = fmt.Sprintf("%+v", cond)
		return cond != nil && cond.Reason == reason, nil
	})
	if err != nil {
		t.Fatalf("Provider %s: Ready condition %s, want reason %s", name, last, reason)
	}
	return p
}

func TestProviderReadyWithSixFailureDomains(t *testing.T) {
	secret(t, ns, "vsphere-creds", map[string]string{"username": user, "password": password})
	if err := c.Create(context.Background(), provider("prod-vsphere", "vsphere-creds", nil)); err != nil {
		t.Fatal(err)
	}
	p := waitReady(t, "prod-vsphere", "InventoryWalked")
	if len(p.Status.FailureDomains) != 6 {
		t.Fatalf("failure domains: %+v", p.Status.FailureDomains)
	}
	fd := p.Status.FailureDomains[0]
	if fd.Name != "prod-vsphere-dc0-dc0-c0" || fd.Datacenter != "DC0" || fd.Cluster != "DC0_C0" || fd.Labels["name"] != fd.Name {
		t.Errorf("first failure domain %+v", fd)
	}
	if cond := meta.FindStatusCondition(p.Status.Conditions, "Ready"); cond.Status != metav1.ConditionTrue || cond.ObservedGeneration != p.Generation {
		t.Errorf("Ready %+v", cond)
	}
}

func TestProviderReasons(t *testing.T) {
	ctx := context.Background()
	secret(t, ns, "no-password", map[string]string{"username": user})
	secret(t, ns, "wrong-password", map[string]string{"username": user, "password": "nope"})
	secret(t, ns, "good", map[string]string{"username": user, "password": password})
	// A Secret of the right name in another namespace must not be used.
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"}}); err != nil {
		t.Fatal(err)
	}
	secret(t, "elsewhere", "only-elsewhere", map[string]string{"username": user, "password": password})
	// Named in the credentials Role but absent from the namespace: missing,
	// not forbidden. not-named exists and is not named: forbidden.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", "no-such-secret", "only-elsewhere"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-named", Namespace: ns},
		StringData: map[string]string{"username": user, "password": password}}); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name, secret, reason, message string
		mutate                        func(*v1alpha1.ProviderSpec)
	}{
		{"missing", "no-such-secret", "SecretMissing", "does not exist", nil},
		{"not-granted", "not-named", "SecretForbidden", "may not read Secret " + ns + "/not-named", nil},
		{"other-namespace", "only-elsewhere", "SecretMissing", ns + "/only-elsewhere does not exist", nil},
		{"invalid", "no-password", "SecretInvalid", "username and password", nil},
		{"bad-creds", "wrong-password", "ConnectFailed", "logging in", nil},
		{"bad-tls", "good", "ConnectFailed", "certificate", func(s *v1alpha1.ProviderSpec) { s.Connection.CABundle = nil }},
		{"bad-endpoint", "good", "ConnectFailed", "<address>", func(s *v1alpha1.ProviderSpec) { s.Connection.Endpoint = "https://127.0.0.1:1/sdk" }},
		{"insecure", "good", "InventoryWalked", "6 failure domains", func(s *v1alpha1.ProviderSpec) {
			s.Connection.CABundle, s.Connection.InsecureSkipTLSVerify = nil, true
		}},
		{"overrides", "good", "InventoryWalked", "6 failure domains", func(s *v1alpha1.ProviderSpec) {
			s.FailureDomainNameOverrides = []v1alpha1.FailureDomainNameOverride{{Datacenter: "DC1", Cluster: "DC1_C2", Name: "cluster-01"},
				{Datacenter: "DC1", Cluster: "DC1_C9", Name: "typo"}}
		}},
		{"collision", "good", "FailureDomainNameCollision", `"collision-dc0-dc0-c1"`, func(s *v1alpha1.ProviderSpec) {
			s.FailureDomainNameOverrides = []v1alpha1.FailureDomainNameOverride{{Datacenter: "DC0", Cluster: "DC0_C0", Name: "collision-dc0-dc0-c1"}}
		}},
	}
	for _, tc := range cases {
		if err := c.Create(ctx, provider(tc.name, tc.secret, tc.mutate)); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := waitReady(t, tc.name, tc.reason)
			cond := meta.FindStatusCondition(p.Status.Conditions, "Ready")
			if !strings.Contains(cond.Message, tc.message) {
				t.Errorf("message %q lacks %q", cond.Message, tc.message)
			}
			if strings.Contains(cond.Message, password) {
				t.Errorf("the password leaked into the status")
			}
			// Tenants read Providers: no endpoint or address in them (the
			// pods reach vcsim at the node's gateway).
			if strings.Contains(cond.Message, "127.0.0.1") || strings.Contains(cond.Message, env.NodeGateway()) ||
				strings.Contains(cond.Message, "https://") || strings.Contains(cond.Message, user) {
				t.Errorf("the endpoint or the user name leaked into the status: %q", cond.Message)
			}
			if tc.name == "overrides" {
				found := false
				for _, fd := range p.Status.FailureDomains {
					found = found || (fd.Name == "cluster-01" && fd.Datacenter == "DC1" && fd.Cluster == "DC1_C2" && fd.Labels["name"] == "cluster-01")
				}
				if !found {
					t.Errorf("override not applied: %+v", p.Status.FailureDomains)
				}
				// The failure domains carry their location as labels.
				for _, fd := range p.Status.FailureDomains {
					if fd.Labels["datacenter"] != fd.Datacenter || fd.Labels["cluster"] != fd.Cluster {
						t.Errorf("failure domain %s has labels %v, want its datacenter and cluster", fd.Name, fd.Labels)
					}
				}
				// An override of a location vCenter does not have renames
				// nothing, and says so.
				unused := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderOverridesApplied)
				if unused == nil || unused.Status != metav1.ConditionFalse || unused.Reason != v1alpha1.ProviderReasonOverrideUnused ||
					!strings.Contains(unused.Message, "spec.failureDomainNameOverrides[1]") || strings.Contains(unused.Message, "[0]") {
					t.Errorf("OverridesApplied = %+v, want False OverrideUnused naming spec.failureDomainNameOverrides[1] only", unused)
				}
			}
		})
	}

	// Fixing the Secret heals the Provider without a restart.
	s := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "no-password"}, s); err != nil {
		t.Fatal(err)
	}
	s.StringData = map[string]string{"password": password}
	if err := c.Update(ctx, s); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "invalid", "InventoryWalked")
}

// TestInventoryFailed: login works but walking the inventory fails (vcsim
// fault injection on property retrieval) → InventoryFailed; it heals once
// the fault is gone.
func TestInventoryFailed(t *testing.T) {
	secret(t, ns, "walk-creds", map[string]string{"username": user, "password": password})
	model.Service.AddFaultRule(&simulator.FaultInjectionRule{
		MethodName: "RetrievePropertiesEx", ObjectType: "*", ObjectName: "*",
		Probability: 1, FaultType: simulator.FaultTypeGeneric, Message: "injected inventory failure", Enabled: true,
	})
	removed := false
	remove := func() {
		if !removed {
			removed = model.Service.RemoveFaultRule(0)
		}
	}
	defer remove()
	if err := c.Create(context.Background(), provider("walk-fails", "walk-creds", nil)); err != nil {
		t.Fatal(err)
	}
	p := waitReady(t, "walk-fails", "InventoryFailed")
	if cond := meta.FindStatusCondition(p.Status.Conditions, "Ready"); !strings.Contains(cond.Message, "injected inventory failure") {
		t.Errorf("message %q", cond.Message)
	}
	remove()
	waitReady(t, "walk-fails", "InventoryWalked")
}
