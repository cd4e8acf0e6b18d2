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
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
)

// CredentialsRole is the static install's Role naming the Secrets and
// ConfigMaps class's provider may read in the Providers' namespace
// (artifacts/deploy/providers/CLASS/rbac.yaml).
func CredentialsRole(class string) string { return "banlieue-provider-" + class + "-credentials" }

// GrantCredentials does what an administrator of the static install does
// for a Provider naming Secrets or ConfigMaps other than the shipped ones:
// it names them in class's credentials Role. Kinds are "secrets" or
// "configmaps".
func GrantCredentials(ctx context.Context, admin *restclient.Config, class, kind string, names ...string) error {
	cs, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	roles := cs.RbacV1().Roles(Namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		role, err := roles.Get(ctx, CredentialsRole(class), metav1.GetOptions{})
		if err != nil {
			return err
		}
		i := slices.IndexFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Equal(r.Resources, []string{kind}) })
		if i < 0 {
			return fmt.Errorf("role %s has no rule for %s", role.Name, kind)
		}
		before := len(role.Rules[i].ResourceNames)
		for _, n := range names {
			if !slices.Contains(role.Rules[i].ResourceNames, n) {
				role.Rules[i].ResourceNames = append(role.Rules[i].ResourceNames, n)
			}
		}
		if len(role.Rules[i].ResourceNames) == before {
			return nil
		}
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		return fmt.Errorf("naming %s %v in Role %s: %w", kind, names, CredentialsRole(class), err)
	}
	return nil
}

// GrantCredentials is the package's GrantCredentials as this environment's
// administrator.
func (e *Env) GrantCredentials(ctx context.Context, class, kind string, names ...string) error {
	return GrantCredentials(ctx, e.Admin, class, kind, names...)
}
