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

package monitoring

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/firestoned/banlieue/pkg/metricstest"
)

// TestSecureMetrics: every target the shipped ServiceMonitor has scraped
// (the controller's and the Proxmox VE provider's pods, leaders and
// standbys) answers only callers kube-apiserver authenticates (401
// otherwise) and authorizes for get on /metrics (403 otherwise): the
// scraper's token, bound to the shipped banlieue-metrics-reader, reads
// them; a ServiceAccount without that binding does not.
func TestSecureMetrics(t *testing.T) {
	ctx := context.Background()
	const stranger = "metrics-stranger"
	if out, err := env.Kubectl("", "-n", ns, "create", "serviceaccount", stranger); err != nil {
		t.Fatalf("kubectl create serviceaccount: %v: %s", err, out)
	}
	t.Cleanup(func() { _, _ = env.Kubectl("", "-n", ns, "delete", "serviceaccount", stranger) })
	strangerToken, err := env.Kubectl("", "-n", ns, "create", "token", stranger)
	if err != nil {
		t.Fatalf("kubectl create token: %v: %s", err, strangerToken)
	}
	sm, err := shippedServiceMonitor()
	if err != nil {
		t.Fatal(err)
	}
	targets, err := discover(ctx, sm)
	if err != nil {
		t.Fatal(err)
	}
	if len(targets) == 0 {
		t.Fatal("the ServiceMonitor finds no target")
	}
	for _, tg := range targets {
		for _, c := range []struct {
			who, token string
			want       int
		}{
			{"no token", "", http.StatusUnauthorized},
			// controller-runtime's filter answers a token kube-apiserver
			// does not recognise with 500 "Authentication failed".
			{"a bad token", "not-a-token", http.StatusInternalServerError},
			{"a ServiceAccount without banlieue-metrics-reader", strings.TrimSpace(strangerToken), http.StatusForbidden},
			{"a ServiceAccount bound to banlieue-metrics-reader", scraperToken, http.StatusOK},
		} {
			code, body, err := metricstest.Get(tg.URL, c.token)
			if err != nil {
				t.Fatalf("pod %s, %s: %v", tg.Pod, c.who, err)
			}
			if code != c.want {
				t.Errorf("pod %s, %s: HTTP %d, want %d: %.200s", tg.Pod, c.who, code, c.want, body)
			}
			if got := strings.Contains(body, "controller_runtime_"); got != (code == http.StatusOK) {
				t.Errorf("pod %s, %s: HTTP %d, controller-runtime metrics in the body: %v", tg.Pod, c.who, code, got)
			}
		}
	}
	t.Logf("%d targets", len(targets))
}
