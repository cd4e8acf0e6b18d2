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

package provider

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of the Providers and image imports a provider process serves,
// on its /metrics. A Provider is labelled namespace/name (one series per
// Provider and status or reason: bounded by the Providers); no VM or
// image names.
var (
	// ProviderReady is kube-state-metrics' shape of a condition: 1 for
	// the status the Provider's Ready condition has, 0 for the other two.
	ProviderReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "banlieue_provider_ready",
		Help: "Ready condition of each Provider this process serves: 1 for its status (True, False, Unknown), 0 for the others.",
	}, []string{"provider", "status"})
	// ProviderReadyReason is 1 for the reason of the Provider's Ready
	// condition, with no series for its other reasons.
	ProviderReadyReason = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "banlieue_provider_ready_reason",
		Help: "Reason of the Ready condition of each Provider this process serves (InventoryWalked, ConnectFailed, ...): 1 for the current one.",
	}, []string{"provider", "reason"})
	// ImageImportBytes counts the bytes imports have read from their
	// sources, as they read them.
	ImageImportBytes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_provider_image_import_bytes_total",
		Help: "Bytes of VMImage imports read from their sources and written to the backend, by backend.",
	}, []string{"backend"})
	// ImageImportDuration times each import attempt, from opening its
	// source to its artifact built (or the attempt failed).
	ImageImportDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "banlieue_provider_image_import_duration_seconds",
		Help: "Duration of VMImage import attempts (fetch, build and any install), by backend and result (success, failure).",
		// From a small cloud image on a LAN to an installer's build VM
		// (importTimeout bounds all of it).
		Buckets: []float64{1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200},
	}, []string{"backend", "result"})
)

func init() {
	metrics.Registry.MustRegister(ProviderReady, ProviderReadyReason, ImageImportBytes, ImageImportDuration)
}

// readiness remembers the Ready reason each Provider is exported with,
// so a changed reason's old series goes.
type readiness struct {
	mu      sync.Mutex
	reasons map[string]string
}

// set exports provider's Ready condition.
func (r *readiness) set(provider string, cond metav1.Condition) {
	for _, s := range []metav1.ConditionStatus{metav1.ConditionTrue, metav1.ConditionFalse, metav1.ConditionUnknown} {
		v := 0.0
		if cond.Status == s {
			v = 1
		}
		ProviderReady.WithLabelValues(provider, string(s)).Set(v)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.reasons == nil {
		r.reasons = map[string]string{}
	}
	ProviderReadyReason.WithLabelValues(provider, cond.Reason).Set(1)
	if old, ok := r.reasons[provider]; ok && old != cond.Reason {
		ProviderReadyReason.DeleteLabelValues(provider, old)
	}
	r.reasons[provider] = cond.Reason
}

// forget deletes provider's series: it is gone.
func (r *readiness) forget(provider string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.reasons, provider)
	ProviderReady.DeletePartialMatch(prometheus.Labels{"provider": provider})
	ProviderReadyReason.DeletePartialMatch(prometheus.Labels{"provider": provider})
}

// observeImport records one import attempt of backend that started at
// start and ended with err.
func observeImport(backend string, start time.Time, err error) {
	result := "success"
	if err != nil {
		result = "failure"
	}
	ImageImportDuration.WithLabelValues(backend, result).Observe(time.Since(start).Seconds())
}
