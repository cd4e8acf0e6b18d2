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

func init() {
	metrics.Registry.MustRegister(BackendRequests)
}
