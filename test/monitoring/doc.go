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

// Package monitoring proves artifacts/monitoring against the running
// binaries: the controller and the Proxmox provider (on the in-repo
// simulator) are driven until every series the alert rules and the
// dashboard read exists, scraped as Prometheus would, and each query is
// parsed with Prometheus's own PromQL parser (promcheck) and checked
// against what they export. It is a separate module so that Prometheus's
// and the Prometheus operator's weight (and the Go version they ask for)
// stays out of the banlieue binary's dependencies.
package monitoring
