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

package console

import (
	"context"
	"fmt"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/utils/ptr"
)

// tokenLife is how long a console token lives; one is requested again
// once less than tokenRenew of it is left (a session outlives its token:
// the token is only checked at the attach).
const (
	tokenLife  = time.Hour
	tokenRenew = 10 * time.Minute
)

// Tokens are the API server's tokens for console endpoints, one audience
// per Provider, requested for its own ServiceAccount (TokenRequest: it
// mints nothing it is not already).
type Tokens struct {
	// ServiceAccounts are those of the API server's namespace; Name is its
	// own.
	ServiceAccounts corev1client.ServiceAccountInterface
	Name            string

	mu     sync.Mutex
	cached map[string]cachedToken
}

type cachedToken struct {
	token   string
	expires time.Time
}

// Token is a token of audience, from the cache while it has long to live.
func (t *Tokens) Token(ctx context.Context, audience string) (string, error) {
	t.mu.Lock()
	c, ok := t.cached[audience]
	t.mu.Unlock()
	if ok && time.Until(c.expires) > tokenRenew {
		return c.token, nil
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	tr, err := t.ServiceAccounts.CreateToken(ctx, t.Name, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
		Audiences: []string{audience}, ExpirationSeconds: ptr.To(int64(tokenLife / time.Second))}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token of audience %s for ServiceAccount %s: %w", audience, t.Name, err)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.cached == nil {
		t.cached = map[string]cachedToken{}
	}
	t.cached[audience] = cachedToken{token: tr.Status.Token, expires: tr.Status.ExpirationTimestamp.Time}
	return tr.Status.Token, nil
}
