// Package monitoring proves artifacts/monitoring against the running
// binaries: the controller and the Proxmox provider (on the in-repo
// simulator) are driven until every series the alert rules and the
// dashboard read exists, scraped as Prometheus would, and each query is
// parsed with Prometheus's own PromQL parser (promcheck) and checked
// against what they export. It is a separate module so that Prometheus's
// and the Prometheus operator's weight (and the Go version they ask for)
// stays out of the banlieue binary's dependencies.
package monitoring
