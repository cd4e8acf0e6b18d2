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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestProviderReasons: each way a Proxmox Provider cannot be Ready gives its
// reason, naming what to fix: no Secret, a Secret without the token keys,
// a token the API refuses, an endpoint nothing answers; and an image whose
// template no node has.
func TestProviderReasons(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, secret, endpoint string
		data                   map[string]string
		reason, message        string
	}{
		{"no-secret", "absent", "", nil, "SecretMissing", "does not exist"},
		{"bad-secret", "half", "", map[string]string{"tokenID": sim.TokenID}, "SecretInvalid", "tokenSecret"},
		{"bad-token-id", "not-a-token", "", map[string]string{"tokenID": "banlieue", "tokenSecret": "x"}, "SecretInvalid", "USER@REALM!TOKENID"},
		{"refused", "wrong", "", map[string]string{"tokenID": sim.TokenID, "tokenSecret": "wrong"}, "ConnectFailed", "token was refused"},
		{"unreachable", "proxmox-token", "https://127.0.0.1:1/api2/json", nil, "ConnectFailed", "<endpoint>"},
	} {
		if tc.data != nil {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tc.secret, Namespace: ns}, StringData: tc.data}
			if err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		p := proxmoxProvider(t, "reason-"+tc.name, "proxmox-token", nil)
		p.Spec.Connection.CredentialsRef.Name = tc.secret
		// Named in the credentials Role by the administrator, so that a
		// missing Secret reads as missing, not forbidden.
		if err := env.GrantCredentials(ctx, "proxmox", "secrets", tc.secret); err != nil {
			t.Fatal(err)
		}
		if tc.endpoint != "" {
			p.Spec.Connection.Endpoint = tc.endpoint
		}
		if err := c.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message) {
				return fmt.Errorf("%s: Ready %+v, want False/%s mentioning %q", tc.name, cond, tc.reason, tc.message)
			}
			return nil
		})
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	if err := c.Create(ctx, proxmoxProvider(t, "reason-images", "proxmox-token", nil)); err != nil {
		t.Fatal(err)
	}
	waitProvider(t, "reason-images", "InventoryWalked")
	missing := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "no-such-template"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "ubuntu-24.04"}}}}
	if err := c.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(missing), missing); err != nil {
			return err
		}
		for _, s := range missing.Status.PerProvider {
			if s.Provider == ns+"/reason-images" && !s.Ready && s.Reason == "TemplateNotFound" && strings.Contains(s.Message, "ubuntu-24.04") {
				return nil
			}
		}
		return fmt.Errorf("perProvider %+v, want TemplateNotFound on reason-images", missing.Status.PerProvider)
	})
	if err := c.Delete(ctx, &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "reason-images"}}); err != nil {
		t.Fatal(err)
	}
}
