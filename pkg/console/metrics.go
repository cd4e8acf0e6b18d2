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
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Metrics of a provider's console endpoint, on its /metrics: sessions
// open, and attaches by result (no VM names: bounded labels).
var (
	sessionsOpen = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "banlieue_console_sessions",
		Help: "Console sessions open on this provider process.",
	})
	attaches = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "banlieue_console_attaches_total",
		Help: "Console attaches, by result: attached, busy, refused (authentication, not served), failed (the backend).",
	}, []string{"result"})
)

func init() {
	metrics.Registry.MustRegister(sessionsOpen, attaches)
}
