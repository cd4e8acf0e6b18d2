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

	"k8s.io/client-go/kubernetes"

	"github.com/firestoned/banlieue/pkg/bootstrap"
)

// GrantCredentials does, as this environment's administrator, what an
// administrator of the static install does for a Provider of the
// environment's namespace naming Secrets or ConfigMaps (kind "secrets" or
// "configmaps") other than the shipped ones: it names them in class's
// credentials Role.
func (e *Env) GrantCredentials(ctx context.Context, class, kind string, names ...string) error {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	found, err := bootstrap.NameCredentials(ctx, cs, Namespace, class, kind, names...)
	if err == nil && !found {
		err = fmt.Errorf("no Role %s/%s: the static install's RBAC is not applied", Namespace, bootstrap.CredentialsRole(class))
	}
	return err
}
