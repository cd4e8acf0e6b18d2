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
	"os"
	"path/filepath"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/console"
)

// consoleTokenTTL is the life of the API server's console token here: a
// pod's projected token is refreshed by its kubelet; the environment's
// outlives any test run or a day of make run instead.
const consoleTokenTTL = 48 * 60 * 60

// consoleToken writes the API server's token for console endpoints, as
// its Deployment's projected volume holds it (audience
// console.Audience, the ServiceAccount banlieue-apiserver), and returns
// its path.
func (e *Env) consoleToken(ctx context.Context) (string, error) {
	client, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return "", err
	}
	for _, obj := range []struct {
		create func() error
		what   string
	}{
		{func() error {
			_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: APIServerNamespace}}, metav1.CreateOptions{})
			return err
		}, "namespace " + APIServerNamespace},
		{func() error {
			_, err := client.CoreV1().ServiceAccounts(APIServerNamespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: ServiceAccount}}, metav1.CreateOptions{})
			return err
		}, "ServiceAccount " + ServiceAccount},
	} {
		if err := obj.create(); err != nil && !apierrors.IsAlreadyExists(err) {
			return "", fmt.Errorf("creating %s: %w", obj.what, err)
		}
	}
	tr, err := client.CoreV1().ServiceAccounts(APIServerNamespace).CreateToken(ctx, ServiceAccount, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{Audiences: []string{console.Audience}, ExpirationSeconds: ptr.To[int64](consoleTokenTTL)}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting the API server's console token: %w", err)
	}
	path := filepath.Join(e.cfg.Dir, "kubeconfigs", "console.token")
	if err := os.WriteFile(path, []byte(tr.Status.Token), 0o600); err != nil {
		return "", err
	}
	return path, nil
}
