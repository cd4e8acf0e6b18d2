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
package main

import (
	"maps"
	"testing"
)

const metricsBefore = `# HELP apiserver_request_total Counter of apiserver requests.
apiserver_request_total{code="201",component="apiserver",dry_run="",group="infrastructure.banlieue.io",resource="vspheremachines",scope="resource",subresource="",verb="POST",version="v1alpha1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="GET",version="v1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 7
`

const metricsAfter = `apiserver_request_total{code="201",component="apiserver",dry_run="",group="infrastructure.banlieue.io",resource="vspheremachines",scope="resource",subresource="",verb="POST",version="v1alpha1"} 20
apiserver_request_total{code="409",component="apiserver",dry_run="",group="infrastructure.banlieue.io",resource="vspheremachines",scope="resource",subresource="",verb="POST",version="v1alpha1"} 4
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="secrets",scope="resource",subresource="",verb="GET",version="v1"} 24
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="namespace",subresource="",verb="WATCH",version="v1"} 900
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="",scope="cluster",subresource="",verb="LIST",version=""} 50
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="leases",scope="resource",subresource="",verb="PUT",version="v1"} 1
`

const banlieueBefore = `apiserver_request_total{code="201",component="apiserver",dry_run="",group="banlieue.io",resource="virtualmachines",scope="resource",subresource="",verb="POST",version="v1alpha1"} 0
apiserver_request_total{code="200",component="apiserver",dry_run="",group="banlieue.io",resource="virtualmachines",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 3
`

const banlieueAfter = `apiserver_request_total{code="201",component="apiserver",dry_run="",group="banlieue.io",resource="virtualmachines",scope="resource",subresource="",verb="POST",version="v1alpha1"} 10
apiserver_request_total{code="200",component="apiserver",dry_run="",group="banlieue.io",resource="virtualmachines",scope="resource",subresource="status",verb="PATCH",version="v1alpha1"} 23
`

// TestRequestsPerVM: the counts of 10 VMs' provisioning, crafted, come
// out per VM by kind: refused creates apart, watches, discovery and rare
// kinds left out, banlieue's marked, the user's own creates not counted.
func TestRequestsPerVM(t *testing.T) {
	got := requestsPerVM(parseRequestCounts(metricsBefore), parseRequestCounts(metricsAfter), parseRequestCounts(banlieueBefore), parseRequestCounts(banlieueAfter), 10)
	want := map[string]float64{
		"POST infrastructure.banlieue.io/vspheremachines":       1,
		"POST infrastructure.banlieue.io/vspheremachines (409)": 0.4,
		"GET secrets": 2,
		"PATCH banlieue.io/virtualmachines/status (banlieue)": 2,
		"PUT leases": 0.1,
	}
	if !maps.Equal(got, want) {
		t.Errorf("per VM %v\nwant %v", got, want)
	}
	if n := totalRequests(got); n != 5.5 {
		t.Errorf("total %v, want 5.5", n)
	}
	// A count that did not grow (or a counter reset) is no request.
	if got := requestsPerVM(parseRequestCounts(metricsAfter), parseRequestCounts(metricsBefore), nil, nil, 10); len(got) != 0 {
		t.Errorf("counts going down gave %v", got)
	}
}

// TestExtrapolate: the projection continues the measured line, and a
// falling one stays flat (a cost is never projected to shrink).
func TestExtrapolate(t *testing.T) {
	for _, c := range []struct{ na, va, nb, vb, n, want float64 }{
		{10_000, 100, 50_000, 500, 100_000, 1000},
		{10_000, 8, 50_000, 6, 100_000, 6},
		{50_000, 0, 50_000, 500, 100_000, 1000}, // one size: proportional
	} {
		if got := extrapolate(c.na, c.va, c.nb, c.vb, c.n); got != c.want {
			t.Errorf("extrapolate(%v) = %v, want %v", c, got, c.want)
		}
	}
}

// TestPricedFloor: machine creates priced as CRD creates, machine writes
// (status too) as CRD updates, VM writes as aggregated updates; Events,
// Secret reads and refused creates at nothing. A change of any count
// changes the floor by that row's price.
func TestPricedFloor(t *testing.T) {
	cpu := func(kube, banlieue, etcd float64) map[string]float64 {
		return map[string]float64{"kube-apiserver": kube, "banlieue": banlieue, "etcd": etcd}
	}
	crud := []Result{
		{Path: "C CRD", Verb: "create", CPUms: cpu(6, 0, 1)},        // 7
		{Path: "C CRD", Verb: "update", CPUms: cpu(8, 0, 2)},        // 10
		{Path: "A aggregated", Verb: "update", CPUms: cpu(2, 3, 1)}, // 6
		{Path: "B direct", Verb: "update", CPUms: cpu(0, 50, 50)},   // not a priced row
	}
	perVM := map[string]float64{
		"POST infrastructure.banlieue.io/vspheremachines":         1,
		"POST infrastructure.banlieue.io/vspheremachines (409)":   0.5,
		"PATCH infrastructure.banlieue.io/vspheremachines":        1,
		"PATCH infrastructure.banlieue.io/vspheremachines/status": 3,
		"PATCH banlieue.io/virtualmachines/status (banlieue)":     2,
		"POST events.k8s.io/events":                               2,
		"GET secrets":                                             1,
	}
	if got, want := pricedFloor(crud, perVM), 7+4*10+2*6.0; got != want {
		t.Errorf("floor %v, want %v", got, want)
	}
	perVM["PATCH banlieue.io/virtualmachines/status (banlieue)"] = 3
	if got, want := pricedFloor(crud, perVM), 7+4*10+3*6.0; got != want {
		t.Errorf("one VM write more: floor %v, want %v", got, want)
	}
	if got := pricedFloor(nil, perVM); got != 0 {
		t.Errorf("without CRUD rows: floor %v, want 0 (not priced)", got)
	}
}

// TestGroupProviders: the fleet's vSphere provider processes are summed,
// every other process left out.
func TestGroupProviders(t *testing.T) {
	f := &Fleet{VMs: 10,
		RSS:      map[string]float64{"provider-vsphere-00": 100, "provider-vsphere-01": 300, "kube-apiserver": 5000, "provider-libvirt": 7},
		RSSPerVM: map[string]float64{"provider-vsphere-00": 2, "provider-vsphere-01": 4, "kube-apiserver": 50},
		CPUms:    map[string]float64{"provider-vsphere-00": 1.5, "provider-vsphere-01": 2.5, "kube-apiserver": 9}}
	if g := groupProviders(f); g != (providerGroup{processes: 2, rss: 400, rssPerVM: 6, cpuMs: 4}) {
		t.Errorf("grouped %+v, want 2 processes, RSS 400, 6 per VM, 4 ms", g)
	}
}

// TestSessionCounts: successful logins and every reconnect are read from a
// provider's /metrics, failed logins left out.
func TestSessionCounts(t *testing.T) {
	body := `banlieue_provider_session_logins_total{backend="vsphere",result="success"} 3
banlieue_provider_session_logins_total{backend="vsphere",result="failure"} 5
banlieue_provider_session_reconnects_total{backend="vsphere"} 2
`
	if s := parseSessions(body); s != (Sessions{Logins: 3, Reconnects: 2}) {
		t.Errorf("read %+v, want 3 logins and 2 reconnects", s)
	}
}
