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

// Package monitoring proves artifacts/monitoring against the shipped
// Deployments running: the controller's and the Proxmox VE provider's (on
// the in-repo simulator, the fastest backend to run for real) run as pods
// of the release image on a real node (devenv.NodeSuite), with their
// metrics Services. They are driven until every series the alert rules
// and the dashboard read exists, and scraped as Prometheus scrapes them
// for the shipped ServiceMonitor: the Services it selects, their
// EndpointSlices, each pod's address on its port, with its scheme, TLS
// settings and a token bound to banlieue-metrics-reader. Each query is
// parsed with Prometheus's own PromQL parser (promcheck) and checked
// against what the targets export, merged.
//
// banlieue's API server runs as a process, as in test/e2e/node: it is no
// ServiceMonitor target and no series the artifacts read is its own, and
// running it as pods would add its etcd StatefulSet on volumes and its
// rollout to every run for nothing this package checks. Nothing here
// kills or pauses a component, which is what process mode is kept for.
//
// It is a separate module so that Prometheus's and the Prometheus
// operator's weight (and the Go version they ask for) stays out of the
// banlieue binary's dependencies.
package monitoring
