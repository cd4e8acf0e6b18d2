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
	"fmt"
	"net/http"

	"github.com/spf13/pflag"
	restclient "k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/metrics/filters"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// Serving is what every banlieue manager (controller, operator, providers)
// serves beside its controllers: metrics, health probes and, when asked,
// pprof.
type Serving struct {
	// MetricsAddr and HealthAddr: "0" disables.
	MetricsAddr, HealthAddr string
	// InsecureMetrics serves metrics over plain HTTP to anyone who can
	// reach the port. By default they are served over TLS to callers
	// kube-apiserver authenticates (TokenReview) and authorizes
	// (SubjectAccessReview for get on the /metrics non-resource URL), which
	// banlieue-metrics-reader grants.
	InsecureMetrics bool
	// PprofAddr serves /debug/pprof for profiling; "" or "0" disables.
	PprofAddr string
}

// AddFlags registers the serving flags with the component's defaults.
func (s *Serving) AddFlags(f *pflag.FlagSet) {
	f.StringVar(&s.MetricsAddr, "metrics-bind-address", s.MetricsAddr, "Address of the metrics endpoint (0 disables).")
	f.BoolVar(&s.InsecureMetrics, "metrics-insecure", s.InsecureMetrics,
		"Serve metrics over plain HTTP without authentication (default: HTTPS, callers authenticated and authorized by kube-apiserver for get on /metrics).")
	f.StringVar(&s.HealthAddr, "health-probe-bind-address", s.HealthAddr, "Address of /healthz and /readyz (0 disables).")
	f.StringVar(&s.PprofAddr, "pprof-bind-address", s.PprofAddr, "Address serving /debug/pprof (empty disables).")
}

// metrics are the metrics server's options. The secure server makes its
// own self-signed certificate: scrapers authenticate with a token and
// skip verification, as for any controller-runtime manager.
func (s Serving) metrics() metricsserver.Options {
	if s.InsecureMetrics {
		return metricsserver.Options{BindAddress: s.MetricsAddr}
	}
	return metricsserver.Options{BindAddress: s.MetricsAddr, SecureServing: true, FilterProvider: filters.WithAuthenticationAndAuthorization}
}

// NewManager builds every banlieue manager (controller, operator,
// providers) from o, so that they serve alike: Scheme's types, s's metrics
// and pprof, and s's probes through AddHealthServer, whose /readyz answers
// on a standby too and says whether the replica leads, instead of the
// manager's own probe server. With leader election the lease is given up
// when the manager stops, so that a standby takes over at once on a
// rolling update rather than when the lease expires: safe because each
// command exits as soon as its manager returns.
func (s Serving) NewManager(cfg *restclient.Config, o ctrl.Options) (ctrl.Manager, error) {
	scheme, err := Scheme()
	if err != nil {
		return nil, err
	}
	o.Scheme = scheme
	o.Metrics = s.metrics()
	o.HealthProbeBindAddress = "0"
	o.PprofBindAddress = s.PprofAddr
	o.LeaderElectionReleaseOnCancel = true
	mgr, err := ctrl.NewManager(cfg, o)
	if err != nil {
		return nil, err
	}
	if err := AddHealthServer(mgr, s.HealthAddr); err != nil {
		return nil, err
	}
	return mgr, nil
}

// cachesSynced fails until mgr's caches have synced.
func cachesSynced(mgr ctrl.Manager) healthz.Checker {
	return func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}
}
