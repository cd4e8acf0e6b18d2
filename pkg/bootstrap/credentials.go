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

package bootstrap

import (
	"context"
	"fmt"
	"slices"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
)

// CredentialsRole is the static install's Role naming the Secrets and
// ConfigMaps backend's provider may get in the Providers' namespace
// (artifacts/deploy/providers/BACKEND/rbac.yaml).
func CredentialsRole(backend string) string { return "banlieue-provider-" + backend + "-credentials" }

// NameCredentials names Secrets or ConfigMaps (kind "secrets" or
// "configmaps") in backend's credentials Role of namespace, as an
// administrator of the static install does for a Provider naming others
// than the shipped ones. found is false, and nothing is done, where there
// is no such Role (an operator install renders its grants itself).
func NameCredentials(ctx context.Context, cs kubernetes.Interface, namespace, backend, kind string, names ...string) (found bool, err error) {
	roles := cs.RbacV1().Roles(namespace)
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		role, err := roles.Get(ctx, CredentialsRole(backend), metav1.GetOptions{})
		if err != nil {
			return err
		}
		found = true
		i := slices.IndexFunc(role.Rules, func(r rbacv1.PolicyRule) bool { return slices.Equal(r.Resources, []string{kind}) })
		if i < 0 {
			return fmt.Errorf("it has no rule for %s", kind)
		}
		// An empty resourceNames grants every name: never write one.
		if len(role.Rules[i].ResourceNames) == 0 {
			return fmt.Errorf("its %s rule names nothing, which grants every name: fix it by hand", kind)
		}
		missing := slices.DeleteFunc(slices.Clone(names), func(n string) bool { return n == "" || slices.Contains(role.Rules[i].ResourceNames, n) })
		if len(missing) == 0 {
			return nil
		}
		role.Rules[i].ResourceNames = append(role.Rules[i].ResourceNames, missing...)
		_, err = roles.Update(ctx, role, metav1.UpdateOptions{})
		return err
	})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return found, fmt.Errorf("naming %s %v in Role %s/%s: %w", kind, names, namespace, CredentialsRole(backend), err)
	}
	return found, nil
}
