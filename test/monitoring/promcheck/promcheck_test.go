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

package promcheck

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/firestoned/banlieue/pkg/metricstest"
)

// exposition is a scrape cut down to what the queries below read.
const exposition = `# TYPE banlieue_provider_ready gauge
banlieue_provider_ready{provider="ns/a",status="True"} 1
banlieue_provider_ready{provider="ns/a",status="False"} 0
# TYPE banlieue_provider_ready_reason gauge
banlieue_provider_ready_reason{provider="ns/a",reason="InventoryWalked"} 1
# TYPE banlieue_virtualmachine_ready_seconds histogram
banlieue_virtualmachine_ready_seconds_bucket{provider="ns/a",le="+Inf"} 1
banlieue_virtualmachine_ready_seconds_sum{provider="ns/a"} 3
banlieue_virtualmachine_ready_seconds_count{provider="ns/a"} 1
# TYPE banlieue_scheduling_failures_total counter
banlieue_scheduling_failures_total{reason="ClassNotFound"} 1
`

// TestCheck: queries reading only exported metrics and labels pass, and
// the crafted failures are each reported naming the query, the metric and
// the label: a rule querying a metric nobody exports, one grouping by a
// label its metric lacks, and the other places a label is read.
func TestCheck(t *testing.T) {
	families, err := metricstest.Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, expr string
		want       []Finding // nil: passes
	}{
		{"a histogram through its buckets", `histogram_quantile(0.95, sum by (provider, le) (rate(banlieue_virtualmachine_ready_seconds_bucket{provider=~"$provider"}[$__rate_interval])))`, nil},
		{"a histogram's count", `sum(rate(banlieue_virtualmachine_ready_seconds_count[5m]))`, nil},
		{"on and group_left", `banlieue_provider_ready_reason * on(provider) group_left(status) banlieue_provider_ready`, nil},
		{"a label made by label_replace", `sum by (p) (label_replace(banlieue_provider_ready, "p", "$1", "provider", "(.*)"))`, nil},
		{"a target label", `sum by (pod) (banlieue_provider_ready)`, nil},
		{"label_values", `label_values(banlieue_provider_ready, provider)`, nil},
		{"a name matcher", `{__name__="banlieue_provider_ready", status="True"}`, nil},
		{"a missing metric", `sum by (provider) (rate(banlieue_provider_missing_total[5m])) > 0`,
			[]Finding{{Metric: "banlieue_provider_missing_total"}}},
		{"grouping by a missing label", `sum by (backend) (rate(banlieue_scheduling_failures_total[5m])) > 0`,
			[]Finding{{Metric: "banlieue_scheduling_failures_total", Label: "backend", Use: "by"}}},
		{"a missing label in a matcher", `banlieue_provider_ready{phase="Ready"}`,
			[]Finding{{Metric: "banlieue_provider_ready", Label: "phase", Use: "matcher"}}},
		{"without a missing label", `sum without (node) (banlieue_provider_ready)`,
			[]Finding{{Metric: "banlieue_provider_ready", Label: "node", Use: "without"}}},
		{"on a label one side lacks", `banlieue_provider_ready and on(reason) banlieue_provider_ready_reason`,
			[]Finding{{Metric: "banlieue_provider_ready", Label: "reason", Use: "on"}}},
		{"an aggregation's output lacks the label", `sum by (provider) (sum by (status) (banlieue_provider_ready))`,
			[]Finding{{Metric: "banlieue_provider_ready", Label: "provider", Use: "by"}}},
		{"label_replace from a missing label", `label_replace(banlieue_provider_ready, "b", "$1", "backend", "(.*)")`,
			[]Finding{{Metric: "banlieue_provider_ready", Label: "backend", Use: "label_replace source"}}},
		{"histogram_quantile over what has no le", `histogram_quantile(0.9, sum by (provider) (rate(banlieue_virtualmachine_ready_seconds_bucket[5m])))`,
			[]Finding{{Metric: "banlieue_virtualmachine_ready_seconds", Label: "le", Use: "histogram_quantile"}}},
		{"label_values of a missing label", `label_values(banlieue_provider_ready, backend)`,
			[]Finding{{Metric: "banlieue_provider_ready", Label: "backend", Use: "label_values"}}},
		{"not PromQL", `sum by (provider (banlieue_provider_ready)`, []Finding{{}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Check(families, []Query{{Source: "rule Crafted", Expr: tc.expr}})
			if len(got) != len(tc.want) {
				t.Fatalf("%d findings %v, want %d %v", len(got), got, len(tc.want), tc.want)
			}
			for i, f := range got {
				w := tc.want[i]
				if f.Source != "rule Crafted" || f.Metric != w.Metric || f.Label != w.Label || f.Use != w.Use {
					t.Errorf("finding %+v, want %+v", f, w)
				}
				if msg := f.Error(); !strings.Contains(msg, "rule Crafted") || !strings.Contains(msg, w.Metric) || !strings.Contains(msg, w.Label) {
					t.Errorf("%q does not name the rule, %s and %q", msg, w.Metric, w.Label)
				}
			}
		})
	}
}

// TestExpandGrafana: Grafana's variables become what parses.
func TestExpandGrafana(t *testing.T) {
	for in, want := range map[string]string{
		`rate(x{provider=~"$provider"}[$__rate_interval])`:    `rate(x{provider=~".*"}[5m])`,
		`increase(x{backend=~"${backend:regex}"}[$__range])`:  `increase(x{backend=~".*"}[1h])`,
		`sum_over_time(x[$__interval]) * on() group_left() y`: `sum_over_time(x[1m]) * on() group_left() y`,
		`label_replace(x, "a", "$1", "b", "(.*)")`:            `label_replace(x, "a", "$1", "b", "(.*)")`,
	} {
		if got := ExpandGrafana(in); got != want {
			t.Errorf("ExpandGrafana(%s) = %s, want %s", in, got, want)
		}
	}
}

// TestCraftedRuleFile: a PrometheusRule file with both crafted failures
// goes through the same path as the shipped one (strict decoding, every
// expr checked) and both are reported; a field the operator's type does
// not have fails the decoding.
func TestCraftedRuleFile(t *testing.T) {
	families, err := metricstest.Parse(strings.NewReader(exposition))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "rules.yaml")
	rules := `apiVersion: monitoring.coreos.com/v1
kind: PrometheusRule
metadata: { name: crafted }
spec:
  groups:
    - name: crafted
      rules:
        - alert: MissingMetric
          expr: banlieue_nothing_total > 0
          for: 5m
        - alert: MissingLabel
          expr: sum by (backend) (banlieue_provider_ready) == 0
          for: 5m
`
	if err := os.WriteFile(file, []byte(rules), 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := Rules(file)
	if err != nil {
		t.Fatal(err)
	}
	got := Check(families, RuleQueries(r))
	if len(got) != 2 ||
		got[0].Source != "rule crafted/alert MissingMetric" || got[0].Metric != "banlieue_nothing_total" ||
		got[1].Source != "rule crafted/alert MissingLabel" || got[1].Metric != "banlieue_provider_ready" || got[1].Label != "backend" {
		t.Errorf("findings %v: want MissingMetric's banlieue_nothing_total and MissingLabel's backend", got)
	}
	if err := os.WriteFile(file, []byte(strings.Replace(rules, "for: 5m", "fore: 5m", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Rules(file); err == nil || !strings.Contains(err.Error(), "fore") {
		t.Errorf("an unknown field decoded: %v", err)
	}
}
