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
	"bytes"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// LeaderCheck is the readyz check that says whether the replica leads.
const LeaderCheck = "leader"

// Leadership says whether elected (the manager's Elected()) is closed:
// "leading", or "standby (waiting for the lease)".
func Leadership(elected <-chan struct{}) func() string {
	return func() string {
		select {
		case <-elected:
			return "leading"
		default:
			return "standby (waiting for the lease)"
		}
	}
}

// HealthHandler serves /healthz (the process runs) and /readyz: ready once
// the caches have synced (informers), leading or not (leader): a standby is
// ready to take over. The leader check always passes; /readyz?verbose
// says which, on its line: "[+]leader ok: standby (waiting for the lease)".
// Individual checks answer at /readyz/<name> as controller-runtime's.
func HealthHandler(ready map[string]healthz.Checker, leadership func() string) http.Handler {
	live := &healthz.Handler{Checks: map[string]healthz.Checker{"ping": healthz.Ping}}
	checks := map[string]healthz.Checker{LeaderCheck: func(*http.Request) error { return nil }}
	for name, c := range ready {
		checks[name] = c
	}
	readyz := http.StripPrefix("/readyz", &healthz.Handler{Checks: checks})
	mux := http.NewServeMux()
	mux.Handle("/healthz", http.StripPrefix("/healthz", live))
	mux.Handle("/healthz/", http.StripPrefix("/healthz", live))
	annotated := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		var b buffered
		readyz.ServeHTTP(&b, req)
		for k, v := range b.header {
			w.Header()[k] = v
		}
		w.Header().Del("Content-Length")
		if b.code == 0 {
			b.code = http.StatusOK
		}
		w.WriteHeader(b.code)
		out := b.body.String()
		line := "[+]" + LeaderCheck + " ok\n"
		if strings.Contains(out, line) {
			out = strings.Replace(out, line, "[+]"+LeaderCheck+" ok: "+leadership()+"\n", 1)
		}
		_, _ = w.Write([]byte(out))
	})
	mux.Handle("/readyz", annotated)
	mux.Handle("/readyz/", annotated)
	return mux
}

// buffered holds a response to rewrite it.
type buffered struct {
	header http.Header
	code   int
	body   bytes.Buffer
}

func (b *buffered) Header() http.Header {
	if b.header == nil {
		b.header = http.Header{}
	}
	return b.header
}

func (b *buffered) WriteHeader(code int) {
	if b.code == 0 {
		b.code = code
	}
}

func (b *buffered) Write(p []byte) (int, error) { return b.body.Write(p) }

// AddHealthServer serves HealthHandler at addr ("" or "0": none) on mgr,
// on every replica (a standby answers too), instead of the manager's own
// probe server (whose verbose output cannot carry the leader's state).
// The caches' check is AddHealthChecks'.
func AddHealthServer(mgr ctrl.Manager, addr string) error {
	if addr == "" || addr == "0" {
		return nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("health probes on %s: %w", addr, err)
	}
	h := HealthHandler(map[string]healthz.Checker{"informers": cachesSynced(mgr)}, Leadership(mgr.Elected()))
	timeout := 5 * time.Second
	return mgr.Add(&manager.Server{
		Name:            "health probe",
		Server:          &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second},
		Listener:        ln,
		ShutdownTimeout: &timeout,
	})
}
