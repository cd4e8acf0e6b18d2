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

package controllers

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/healthz"
)

// TestHealthHandler: a standby (elected open) is live and ready and its
// /readyz?verbose says standby; once elected it says leading; unsynced
// caches make it unready, the leader line still there.
func TestHealthHandler(t *testing.T) {
	elected := make(chan struct{})
	var synced error = errors.New("caches not synced")
	h := HealthHandler(map[string]healthz.Checker{"informers": func(*http.Request) error { return synced }}, Leadership(elected))
	get := func(path string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, path, nil))
		return w.Code, w.Body.String()
	}

	if code, _ := get("/healthz"); code != http.StatusOK {
		t.Errorf("/healthz: %d", code)
	}
	code, body := get("/readyz?verbose")
	if code != http.StatusInternalServerError || !strings.Contains(body, "[-]informers failed") || !strings.Contains(body, "[+]leader ok: standby (waiting for the lease)") {
		t.Errorf("unsynced standby: %d %q", code, body)
	}

	synced = nil
	if code, body := get("/readyz"); code != http.StatusOK || body != "ok" {
		t.Errorf("standby /readyz: %d %q", code, body)
	}
	code, body = get("/readyz?verbose")
	if code != http.StatusOK || !strings.Contains(body, "[+]leader ok: standby (waiting for the lease)\n") || !strings.Contains(body, "[+]informers ok") {
		t.Errorf("standby /readyz?verbose: %d %q", code, body)
	}
	if code, body := get("/readyz/leader"); code != http.StatusOK || body != "ok" {
		t.Errorf("/readyz/leader: %d %q", code, body)
	}

	close(elected)
	code, body = get("/readyz?verbose")
	if code != http.StatusOK || !strings.Contains(body, "[+]leader ok: leading\n") {
		t.Errorf("leader /readyz?verbose: %d %q", code, body)
	}
}
