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

package metricstest

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// exposition is what a banlieue process serves, cut down: a gauge with an
// empty label value, a counter, a histogram.
const exposition = `# HELP banlieue_virtualmachines VMs.
# TYPE banlieue_virtualmachines gauge
banlieue_virtualmachines{phase="Ready",provider="ns/a"} 2
banlieue_virtualmachines{phase="Unschedulable",provider=""} 1
# HELP banlieue_scheduling_failures_total Failures.
# TYPE banlieue_scheduling_failures_total counter
banlieue_scheduling_failures_total{reason="ClassNotFound"} 3
# HELP banlieue_virtualmachine_ready_seconds Ready.
# TYPE banlieue_virtualmachine_ready_seconds histogram
banlieue_virtualmachine_ready_seconds_bucket{provider="ns/a",le="1"} 1
banlieue_virtualmachine_ready_seconds_bucket{provider="ns/a",le="+Inf"} 2
banlieue_virtualmachine_ready_seconds_sum{provider="ns/a"} 2.5
banlieue_virtualmachine_ready_seconds_count{provider="ns/a"} 2
`

func TestLookups(t *testing.T) {
	f, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		family string
		labels map[string]string
		count  int     // Matching
		value  float64 // Value, when count is 1
		exact  bool    // Find finds labels as they are
	}{
		{"a gauge by all its labels", "banlieue_virtualmachines", map[string]string{"phase": "Ready", "provider": "ns/a"}, 1, 2, true},
		{"a gauge by some", "banlieue_virtualmachines", map[string]string{"phase": "Unschedulable"}, 1, 1, false},
		{"an empty label value is a value", "banlieue_virtualmachines", map[string]string{"provider": ""}, 1, 1, false},
		{"no labels: every series", "banlieue_virtualmachines", nil, 2, 0, false},
		{"a value no series has", "banlieue_virtualmachines", map[string]string{"phase": "Pending"}, 0, 0, false},
		{"a label no series has", "banlieue_virtualmachines", map[string]string{"node": ""}, 0, 0, false},
		{"a counter", "banlieue_scheduling_failures_total", map[string]string{"reason": "ClassNotFound"}, 1, 3, true},
		{"a histogram's count", "banlieue_virtualmachine_ready_seconds", map[string]string{"provider": "ns/a"}, 1, 2, true},
		{"a missing family", "banlieue_nothing", nil, 0, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := f.Count(tc.family, tc.labels); got != tc.count {
				t.Errorf("Count = %d, want %d", got, tc.count)
			}
			v, ok := f.Value(tc.family, tc.labels)
			if ok != (tc.count == 1) || v != tc.value {
				t.Errorf("Value = %v, %v; want %v, %v", v, ok, tc.value, tc.count == 1)
			}
			if got := f.Find(tc.family, tc.labels) != nil; got != tc.exact {
				t.Errorf("Find found %v, want %v", got, tc.exact)
			}
		})
	}
	h := f.Histogram("banlieue_virtualmachine_ready_seconds", map[string]string{"provider": "ns/a"})
	if h.GetSampleSum() != 2.5 || len(h.GetBucket()) != 2 {
		t.Errorf("Histogram = %v", h)
	}
}

// TestRequire: a family and its labels are found, le is a histogram's
// label, and a missing family or label is reported as a *MissingError
// naming it.
func TestRequire(t *testing.T) {
	f, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		family string
		labels []string
		want   *MissingError // nil: no error
	}{
		{"labels of some series each", "banlieue_virtualmachines", []string{"phase", "provider"}, nil},
		{"a histogram's le", "banlieue_virtualmachine_ready_seconds", []string{"provider", "le"}, nil},
		{"the family alone", "banlieue_scheduling_failures_total", nil, nil},
		{"a missing family", "banlieue_virtualmachine_scheduling_seconds", []string{"provider"},
			&MissingError{Metric: "banlieue_virtualmachine_scheduling_seconds"}},
		{"a missing label", "banlieue_scheduling_failures_total", []string{"reason", "provider"},
			&MissingError{Metric: "banlieue_scheduling_failures_total", Label: "provider", Have: []string{"reason"}}},
		{"no le on a gauge", "banlieue_virtualmachines", []string{"le"},
			&MissingError{Metric: "banlieue_virtualmachines", Label: "le", Have: []string{"phase", "provider"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := f.Require(tc.family, tc.labels...)
			if tc.want == nil {
				if err != nil {
					t.Fatalf("Require: %v", err)
				}
				return
			}
			var missing *MissingError
			if !errors.As(err, &missing) {
				t.Fatalf("Require = %v, want a *MissingError", err)
			}
			if missing.Metric != tc.want.Metric || missing.Label != tc.want.Label || strings.Join(missing.Have, ",") != strings.Join(tc.want.Have, ",") {
				t.Errorf("Require = %+v, want %+v", missing, tc.want)
			}
			if !strings.Contains(err.Error(), tc.want.Metric) || !strings.Contains(err.Error(), tc.want.Label) {
				t.Errorf("%q does not name %s and %q", err, tc.want.Metric, tc.want.Label)
			}
		})
	}
}

// TestScrape: the bearer token is sent, the text format asked for, and an
// answer other than 200 or an unparsable one is an error.
func TestScrape(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.Header.Get("Authorization") {
		case "Bearer good":
			if !strings.HasPrefix(r.Header.Get("Accept"), "text/plain") {
				http.Error(w, "want text/plain, got "+r.Header.Get("Accept"), http.StatusNotAcceptable)
				return
			}
			_, _ = w.Write([]byte(exposition))
		case "Bearer garbled":
			_, _ = w.Write([]byte("banlieue_virtualmachines{phase=\n"))
		default:
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
		}
	}))
	defer srv.Close()
	for _, tc := range []struct {
		token   string
		wantErr string
	}{
		{"good", ""},
		{"", "HTTP 401"},
		{"garbled", "parsing the exposition"},
	} {
		f, err := Scrape(srv.URL+"/metrics", tc.token)
		switch {
		case tc.wantErr == "" && err != nil:
			t.Errorf("token %q: %v", tc.token, err)
		case tc.wantErr == "" && f.Require("banlieue_virtualmachines", "phase") != nil:
			t.Errorf("token %q: scraped %v", tc.token, f)
		case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
			t.Errorf("token %q: error %v, want %q", tc.token, err, tc.wantErr)
		}
	}
}

// TestMerge: two targets' scrapes read as one keep both's series.
func TestMerge(t *testing.T) {
	a, err := Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	b, err := Parse(strings.NewReader("# TYPE banlieue_virtualmachines gauge\nbanlieue_virtualmachines{phase=\"Ready\",provider=\"ns/b\"} 4\n" +
		"# TYPE banlieue_provider_sessions gauge\nbanlieue_provider_sessions{backend=\"proxmox\"} 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	m := a.Merge(b)
	if n := m.Count("banlieue_virtualmachines", map[string]string{"phase": "Ready"}); n != 2 {
		t.Errorf("%d Ready series merged, want 2", n)
	}
	if err := m.Require("banlieue_provider_sessions", "backend"); err != nil {
		t.Error(err)
	}
	if n := a.Count("banlieue_virtualmachines", nil); n != 2 {
		t.Errorf("Merge changed its receiver: %d series", n)
	}
}
