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

package providers

import (
	"context"
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// BackendRequests counts the calls providers make to their backends' own
// APIs (a vCenter's SOAP methods, say), by backend and method, on the
// process's /metrics: what a provider costs the vCenter it drives, which
// no Kubernetes metric shows.
var BackendRequests = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "banlieue_provider_backend_requests_total",
	Help: "Calls made to backend APIs, by backend and method.",
}, []string{"backend", "method"})

// Metrics of the calls through Bounded (one per Backend method or
// optional interface method: operation is the Go method's name, a fixed
// set) and of the session caches. Labels are bounded: the backend class,
// the operation, an error kind, a login result.
var (
	// BackendCallDuration times every bounded call, whatever its result.
	BackendCallDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_provider_backend_call_duration_seconds",
		Help: "Duration of the provider's calls to its backend (each Backend operation, deadline included), by backend and operation.",
		// From a cached lookup to a clone awaited for minutes (a machine
		// call's deadline is 15 minutes).
		Buckets: []float64{0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 900},
	}, []string{"backend", "operation"})
	// BackendCallErrors counts the bounded calls that failed, by kind
	// (ErrorKind).
	BackendCallErrors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_provider_backend_call_errors_total",
		Help: "Failed calls of the provider to its backend, by backend, operation and kind (timeout, canceled, connect, notfound, busy, degraded, other).",
	}, []string{"backend", "operation", "kind"})
	// SessionsOpen is the number of backend sessions a process's cache holds.
	SessionsOpen = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "banlieue_provider_sessions",
		Help: "Backend sessions the provider holds open (one per Provider at most), by backend.",
	}, []string{"backend"})
	// SessionLogins counts logins by result (success, failure).
	SessionLogins = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_provider_session_logins_total",
		Help: "Logins to a backend, by backend and result (success, failure).",
	}, []string{"backend", "result"})
	// SessionReconnects counts the logins of a Provider that had a
	// session (it died, or its settings or credentials changed).
	SessionReconnects = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_provider_session_reconnects_total",
		Help: "Logins to a backend for a Provider that had a session already (it died or its connection settings changed), by backend.",
	}, []string{"backend"})
)

// Error kinds of BackendCallErrors.
const (
	ErrorKindTimeout  = "timeout"
	ErrorKindCanceled = "canceled"
	ErrorKindConnect  = "connect"
	ErrorKindNotFound = "notfound"
	ErrorKindBusy     = "busy"
	ErrorKindDegraded = "degraded"
	ErrorKindOther    = "other"
)

// ErrorKind is the kind a backend call's error is counted as: timeout (a
// deadline ran out, Bounded's or the caller's), canceled (the caller
// gave up), connect (ErrConnect: the backend was not reached or refused
// the login), notfound (the VM, snapshot or console is not there), busy
// (another session holds the console), degraded (an inventory that
// missed some hosts), other. "" for nil and for ErrUserDataNeeded, which
// asks the caller to call again with user data and fails nothing.
func ErrorKind(err error) string {
	var degraded *DegradedError
	switch {
	case err == nil, errors.Is(err, ErrUserDataNeeded):
		return ""
	case errors.Is(err, ErrConnect):
		// Before timeout: a login that timed out is a connect failure.
		return ErrorKindConnect
	case errors.Is(err, context.DeadlineExceeded):
		return ErrorKindTimeout
	case errors.Is(err, context.Canceled):
		return ErrorKindCanceled
	case errors.Is(err, ErrNoMachine), errors.Is(err, ErrNoSnapshot), errors.Is(err, ErrNoConsole),
		errors.Is(err, ErrNoWebConsole), errors.Is(err, ErrNotPoweredOn):
		return ErrorKindNotFound
	case errors.Is(err, ErrConsoleBusy):
		return ErrorKindBusy
	case errors.As(err, &degraded):
		return ErrorKindDegraded
	}
	return ErrorKindOther
}

// observe records one call of operation on backend that started at
// start and ended with err. A backend without a class (one Bounded was
// not given, as in tests) records nothing.
func observe(backend, operation string, start time.Time, err error) {
	if backend == "" {
		return
	}
	BackendCallDuration.WithLabelValues(backend, operation).Observe(time.Since(start).Seconds())
	if kind := ErrorKind(err); kind != "" {
		BackendCallErrors.WithLabelValues(backend, operation, kind).Inc()
	}
}

func init() {
	metrics.Registry.MustRegister(BackendRequests, BackendCallDuration, BackendCallErrors, SessionsOpen, SessionLogins, SessionReconnects)
}
