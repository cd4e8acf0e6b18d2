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
package e2e

import (
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/metricstest"
)

// TestSecureMetrics: the controller's and a provider's metrics endpoints
// answer only callers kube-apiserver authenticates (401 otherwise) and
// authorizes for get on /metrics (403 otherwise): a ServiceAccount bound to
// the shipped banlieue-metrics-reader reads them, another does not.
func TestSecureMetrics(t *testing.T) {
	const ns = "metrics-e2e"
	mustKC(t, "create", "namespace", ns)
	t.Cleanup(func() { kc(t, "delete", "namespace", ns, "--wait=false") })
	mustKC(t, "-n", ns, "create", "serviceaccount", "scraper")
	mustKC(t, "-n", ns, "create", "serviceaccount", "stranger")
	mustKC(t, "create", "clusterrolebinding", "metrics-e2e-scraper", "--clusterrole=banlieue-metrics-reader", "--serviceaccount="+ns+":scraper")
	t.Cleanup(func() { kc(t, "delete", "clusterrolebinding", "metrics-e2e-scraper") })
	// The provider serves this namespace's (absent) Providers, as a
	// namespace bound to its namespace role.
	mustKC(t, "-n", ns, "create", "rolebinding", "provider", "--clusterrole=banlieue-provider-vsphere-namespace", "--serviceaccount=banlieue-system:banlieue-provider-vsphere")
	scraper := strings.TrimSpace(mustKC(t, "-n", ns, "create", "token", "scraper"))
	stranger := strings.TrimSpace(mustKC(t, "-n", ns, "create", "token", "stranger"))

	for _, tc := range []struct {
		name  string
		start func(flags ...string) error
	}{
		{"controller", func(flags ...string) error {
			// The pool controller only: this package's other tests expect
			// no scheduler.
			_, err := env.StartController(9, append(flags, "--controllers=ippool")...)
			return err
		}},
		{"provider", func(flags ...string) error {
			// A namespace without Providers: it serves nothing else.
			_, err := env.StartProvider("vsphere", "provider-metrics", time.Minute, append(flags, "--namespace="+ns, "--leader-elect=false")...)
			return err
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			port, err := loopback.FreePort()
			if err != nil {
				t.Fatal(err)
			}
			url := "https://127.0.0.1:" + strconv.Itoa(port) + "/metrics"
			if err := tc.start("--metrics-bind-address=127.0.0.1:" + strconv.Itoa(port)); err != nil {
				t.Fatal(err)
			}
			eventually(t, time.Minute, func() error { _, _, err := metricstest.Get(url, ""); return err })
			for _, c := range []struct {
				who, token string
				want       int
			}{
				{"no token", "", http.StatusUnauthorized},
				// controller-runtime's filter answers a token kube-apiserver
				// does not recognise with 500 "Authentication failed".
				{"a bad token", "not-a-token", http.StatusInternalServerError},
				{"a ServiceAccount without banlieue-metrics-reader", stranger, http.StatusForbidden},
				{"a ServiceAccount bound to banlieue-metrics-reader", scraper, http.StatusOK},
			} {
				code, body, err := metricstest.Get(url, c.token)
				if err != nil {
					t.Fatalf("%s: %v", c.who, err)
				}
				if code != c.want {
					t.Errorf("%s: HTTP %d, want %d: %.200s", c.who, code, c.want, body)
				}
				if code == http.StatusOK && !strings.Contains(body, "controller_runtime_") {
					t.Errorf("%s: no controller-runtime metrics in %.300s", c.who, body)
				}
				if code != http.StatusOK && strings.Contains(body, "controller_runtime_") {
					t.Errorf("%s: HTTP %d came with metrics", c.who, code)
				}
			}
		})
	}
}
