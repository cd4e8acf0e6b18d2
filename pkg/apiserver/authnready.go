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
package apiserver

import (
	"errors"
	"net/http"
	"strings"

	"k8s.io/apiserver/pkg/authentication/authenticatorfactory"
	"k8s.io/apiserver/pkg/server/healthz"
)

// FrontProxyLoaded reports whether the front proxy's configuration (its
// CA and header names, which kube-apiserver publishes in the
// kube-system/extension-apiserver-authentication ConfigMap) has been read.
// Until then every request kube-apiserver forwards would fail to
// authenticate: a client watching through the aggregator right when
// banlieue (re)starts would be told 401 Unauthorized and give up.
func FrontProxyLoaded(rh *authenticatorfactory.RequestHeaderConfig) func() bool {
	return func() bool {
		return rh.CAContentProvider != nil && len(rh.CAContentProvider.CurrentCABundleContent()) > 0 &&
			rh.UsernameHeaders != nil && len(rh.UsernameHeaders.Value()) > 0
	}
}

// WithFrontProxyLoaded answers 503 with Retry-After (which clients retry)
// instead of a 401 while loaded is false; health endpoints pass.
func WithFrontProxyLoaded(h http.Handler, loaded func() bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !loaded() && !isHealthCheck(r.URL.Path) {
			w.Header().Set("Retry-After", "1")
			http.Error(w, "banlieue is starting: the front proxy's authentication configuration is not loaded yet", http.StatusServiceUnavailable)
			return
		}
		h.ServeHTTP(w, r)
	})
}

// FrontProxyReadyz fails /readyz until loaded holds.
func FrontProxyReadyz(loaded func() bool) healthz.HealthChecker {
	return healthz.NamedCheck("front-proxy-authentication", func(*http.Request) error {
		if !loaded() {
			return errors.New("the front proxy's authentication configuration is not loaded yet")
		}
		return nil
	})
}

func isHealthCheck(path string) bool {
	for _, p := range []string{"/healthz", "/livez", "/readyz"} {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
