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

// Package promcheck checks the monitoring artifacts' PromQL (rules, dashboard
// targets and variables) against what the binaries export: every metric
// selected and every label read must be in a scrape.
package promcheck

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/metricstest"
)

// Query is one PromQL expression of the artifacts and where it is.
type Query struct {
	// Source names it: "rule BanlieueProviderUnready", "panel \"Sessions
	// open\" target B", "variable provider".
	Source string
	Expr   string
}

// Finding is a query reading something the binaries do not export (or
// that does not parse).
type Finding struct {
	Source string
	// Metric is the family read; empty for a parse error.
	Metric string
	// Label is the label read; empty when the metric itself is missing.
	Label string
	// How the label is used: "matcher", "by", "without", "on",
	// "ignoring", "group_left", "label_replace source"...
	Use    string
	Detail string
}

func (f Finding) Error() string {
	switch {
	case f.Metric == "" && f.Label == "":
		return fmt.Sprintf("%s: %s", f.Source, f.Detail)
	case f.Label == "":
		return fmt.Sprintf("%s: metric %s is not exported", f.Source, f.Metric)
	}
	return fmt.Sprintf("%s: label %q (%s) is not exported by %s%s", f.Source, f.Label, f.Use, f.Metric, f.Detail)
}

// TargetLabels are the labels Prometheus adds to every series it scrapes
// through a ServiceMonitor: a query may read them though no binary
// exports them.
var TargetLabels = []string{"job", "instance", "namespace", "service", "pod", "container", "endpoint"}

// grafanaDurations stand for Grafana's interval variables, which PromQL
// does not know: any duration parses the same way.
var grafanaDurations = map[string]string{"__rate_interval": "5m", "__interval": "1m", "__range": "1h"}

var grafanaVariable = regexp.MustCompile(`\$\{([A-Za-z_][A-Za-z0-9_]*)(?::[A-Za-z]+)?\}|\$([A-Za-z_][A-Za-z0-9_]*)`)

// ExpandGrafana replaces Grafana's variables in expr before it is parsed:
// $__rate_interval, $__interval and $__range by a duration, any other
// ($provider, ${backend}) by .*, as their "All" value is (they appear in
// regex matchers, =~"$provider"). $1 (label_replace's replacement) is no
// variable: a Grafana variable's name does not start with a digit.
func ExpandGrafana(expr string) string {
	return grafanaVariable.ReplaceAllStringFunc(expr, func(v string) string {
		m := grafanaVariable.FindStringSubmatch(v)
		name := m[1] + m[2]
		if d, ok := grafanaDurations[name]; ok {
			return d
		}
		return ".*"
	})
}

// promql is Prometheus's own parser with its default functions, as a
// Prometheus server without experimental features parses rules.
var promql = parser.NewParser(parser.Options{})

// labelValues is Grafana's label_values(SELECTOR, LABEL) variable query,
// which is not PromQL: its selector and label are checked apart.
var labelValues = regexp.MustCompile(`^\s*label_values\((.*),\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*$`)

// Check parses each query with Prometheus's parser and reports every
// metric it selects that families lack, and every label it reads (in a
// matcher, a by/without/on/ignoring/group_left/group_right list, as
// label_replace's source) that the series it applies to do not have. A
// histogram's _bucket, _sum and _count read its family.
func Check(families metricstest.Families, queries []Query) []Finding {
	var out []Finding
	for _, q := range queries {
		expr := ExpandGrafana(q.Expr)
		label := ""
		if m := labelValues.FindStringSubmatch(expr); m != nil {
			expr, label = m[1], m[2]
		}
		e, err := promql.ParseExpr(expr)
		if err != nil {
			out = append(out, Finding{Source: q.Source, Detail: fmt.Sprintf("parsing %q: %v", expr, err)})
			continue
		}
		c := checker{families: families, source: q.Source}
		have := c.labels(e)
		if label != "" {
			c.need(have, label, "label_values")
		}
		out = append(out, c.findings...)
	}
	return out
}

// labelSet is what labels an expression's series can have, and which
// metrics they come from (for the message).
type labelSet struct {
	names   map[string]bool
	metrics []string
	// unknown: the set could not be worked out (a missing metric, already
	// reported); nothing more is reported about it.
	unknown bool
}

func (s labelSet) with(names ...string) labelSet {
	out := labelSet{names: maps.Clone(s.names), metrics: s.metrics, unknown: s.unknown}
	if out.names == nil {
		out.names = map[string]bool{}
	}
	for _, n := range names {
		out.names[n] = true
	}
	return out
}

func union(a, b labelSet) labelSet {
	out := a.with(slices.Collect(maps.Keys(b.names))...)
	out.metrics = append(slices.Clone(a.metrics), b.metrics...)
	out.unknown = a.unknown || b.unknown
	return out
}

type checker struct {
	families metricstest.Families
	source   string
	findings []Finding
}

func (c *checker) need(s labelSet, label, use string) {
	if s.unknown || s.names[label] {
		return
	}
	detail := ""
	if len(s.names) > 0 {
		detail = " (it has " + strings.Join(slices.Sorted(maps.Keys(s.names)), ", ") + ")"
	}
	metric := strings.Join(s.metrics, ", ")
	if metric == "" {
		metric = "the expression"
	}
	c.findings = append(c.findings, Finding{Source: c.source, Metric: metric, Label: label, Use: use, Detail: detail})
}

// family maps a selected series name to its exported family: a
// histogram's or summary's _bucket, _sum and _count to the family.
func (c *checker) family(name string) (string, bool) {
	if _, ok := c.families[name]; ok {
		return name, true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		base, ok := strings.CutSuffix(name, suffix)
		if !ok {
			continue
		}
		if mf, ok := c.families[base]; ok && (suffix != "_bucket" || mf.GetType().String() == "HISTOGRAM" || mf.GetType().String() == "GAUGE_HISTOGRAM") {
			return base, true
		}
	}
	return "", false
}

// labels are the labels e's series can have, reporting what e reads and
// its operands lack on the way.
func (c *checker) labels(e parser.Expr) labelSet {
	switch e := e.(type) {
	case *parser.VectorSelector:
		return c.selector(e)
	case *parser.MatrixSelector:
		return c.labels(e.VectorSelector)
	case *parser.SubqueryExpr:
		return c.labels(e.Expr)
	case *parser.ParenExpr:
		return c.labels(e.Expr)
	case *parser.UnaryExpr:
		return c.labels(e.Expr)
	case *parser.StepInvariantExpr:
		return c.labels(e.Expr)
	case *parser.NumberLiteral, *parser.StringLiteral:
		return labelSet{names: map[string]bool{}}
	case *parser.AggregateExpr:
		return c.aggregate(e)
	case *parser.BinaryExpr:
		return c.binary(e)
	case *parser.Call:
		return c.call(e)
	}
	c.findings = append(c.findings, Finding{Source: c.source, Detail: fmt.Sprintf("the checker does not know %T (%s)", e, e)})
	return labelSet{unknown: true}
}

func (c *checker) selector(v *parser.VectorSelector) labelSet {
	name := v.Name
	for _, m := range v.LabelMatchers {
		if m.Name == model.MetricNameLabel && m.Type == labels.MatchEqual {
			name = m.Value
		}
	}
	if name == "" {
		c.findings = append(c.findings, Finding{Source: c.source, Detail: fmt.Sprintf("%s selects no metric by name", v)})
		return labelSet{unknown: true}
	}
	family, ok := c.family(name)
	if !ok {
		c.findings = append(c.findings, Finding{Source: c.source, Metric: name})
		return labelSet{unknown: true}
	}
	s := labelSet{names: c.families.LabelNames(family), metrics: []string{family}}.with(TargetLabels...)
	for _, m := range v.LabelMatchers {
		if m.Name != model.MetricNameLabel {
			c.need(s, m.Name, "matcher")
		}
	}
	return s
}

func (c *checker) aggregate(a *parser.AggregateExpr) labelSet {
	inner := c.labels(a.Expr)
	if a.Param != nil {
		c.labels(a.Param)
	}
	use := "by"
	if a.Without {
		use = "without"
	}
	for _, l := range a.Grouping {
		c.need(inner, l, use)
	}
	switch a.Op {
	case parser.TOPK, parser.BOTTOMK, parser.LIMITK, parser.LIMIT_RATIO:
		return inner // the series themselves
	}
	var out labelSet
	switch {
	case a.Without:
		out = inner.with()
		for _, l := range a.Grouping {
			delete(out.names, l)
		}
	default:
		out = labelSet{metrics: inner.metrics, unknown: inner.unknown}.with(a.Grouping...)
	}
	if a.Op == parser.COUNT_VALUES {
		if s, ok := a.Param.(*parser.StringLiteral); ok {
			out = out.with(s.Val)
		}
	}
	return out
}

func (c *checker) binary(b *parser.BinaryExpr) labelSet {
	lhs, rhs := c.labels(b.LHS), c.labels(b.RHS)
	lScalar, rScalar := b.LHS.Type() == parser.ValueTypeScalar, b.RHS.Type() == parser.ValueTypeScalar
	switch {
	case lScalar && rScalar:
		return labelSet{names: map[string]bool{}}
	case lScalar:
		return rhs
	case rScalar:
		return lhs
	}
	if m := b.VectorMatching; m != nil {
		use := "ignoring"
		if m.On {
			use = "on"
		}
		for _, l := range m.MatchingLabels {
			c.need(lhs, l, use)
			c.need(rhs, l, use)
		}
		switch m.Card {
		case parser.CardManyToOne:
			for _, l := range m.Include {
				c.need(rhs, l, "group_left")
			}
			return lhs.with(m.Include...)
		case parser.CardOneToMany:
			for _, l := range m.Include {
				c.need(lhs, l, "group_right")
			}
			return rhs.with(m.Include...)
		}
	}
	if b.Op == parser.LOR {
		return union(lhs, rhs)
	}
	return lhs
}

func (c *checker) call(f *parser.Call) labelSet {
	args := make([]labelSet, len(f.Args))
	for i, a := range f.Args {
		args[i] = c.labels(a)
	}
	str := func(i int) string {
		if i < len(f.Args) {
			if s, ok := f.Args[i].(*parser.StringLiteral); ok {
				return s.Val
			}
		}
		return ""
	}
	switch f.Func.Name {
	case "histogram_quantile":
		// Its buckets' le is read, and goes.
		c.need(args[1], model.BucketLabel, "histogram_quantile")
		out := args[1].with()
		delete(out.names, model.BucketLabel)
		return out
	case "label_replace":
		// label_replace(v, dst, replacement, src, regex)
		if src := str(3); src != "" {
			c.need(args[0], src, "label_replace source")
		}
		return args[0].with(str(1))
	case "label_join":
		// label_join(v, dst, separator, src...)
		for i := 3; i < len(f.Args); i++ {
			c.need(args[0], str(i), "label_join source")
		}
		return args[0].with(str(1))
	case "vector", "time", "scalar", "pi":
		return labelSet{names: map[string]bool{}}
	}
	// rate, increase, *_over_time, abs, clamp...: their vector argument's
	// labels.
	for i, a := range f.Args {
		if t := a.Type(); t == parser.ValueTypeVector || t == parser.ValueTypeMatrix {
			return args[i]
		}
	}
	return labelSet{names: map[string]bool{}}
}

// Rules reads a PrometheusRule, unknown fields failing as the API server
// would refuse them.
func Rules(path string) (*monitoringv1.PrometheusRule, error) {
	r := &monitoringv1.PrometheusRule{}
	return r, decodeStrict(path, r)
}

// ServiceMonitor reads a ServiceMonitor strictly.
func ServiceMonitor(path string) (*monitoringv1.ServiceMonitor, error) {
	sm := &monitoringv1.ServiceMonitor{}
	return sm, decodeStrict(path, sm)
}

func decodeStrict(path string, into any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, into); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// RuleQueries are the rules' expressions, named by alert or record.
func RuleQueries(r *monitoringv1.PrometheusRule) []Query {
	var out []Query
	for _, g := range r.Spec.Groups {
		for _, rule := range g.Rules {
			name := "alert " + rule.Alert
			if rule.Record != "" {
				name = "record " + rule.Record
			}
			out = append(out, Query{Source: "rule " + g.Name + "/" + name, Expr: rule.Expr.String()})
		}
	}
	return out
}

// Dashboard is the part of a Grafana dashboard that queries Prometheus.
type Dashboard struct {
	Title      string  `json:"title"`
	Panels     []Panel `json:"panels"`
	Templating struct {
		List []Variable `json:"list"`
	} `json:"templating"`
}

// Panel is a dashboard panel (rows hold panels of their own when
// collapsed).
type Panel struct {
	Title   string   `json:"title"`
	Type    string   `json:"type"`
	Targets []Target `json:"targets"`
	Panels  []Panel  `json:"panels"`
}

// Target is a panel's query.
type Target struct {
	RefID string `json:"refId"`
	Expr  string `json:"expr"`
}

// Variable is a templating variable; a query variable's query is a
// string or an object with a query field, depending on Grafana's version.
type Variable struct {
	Name  string          `json:"name"`
	Type  string          `json:"type"`
	Query json.RawMessage `json:"query"`
}

// ReadDashboard reads a dashboard's JSON.
func ReadDashboard(path string) (*Dashboard, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	d := &Dashboard{}
	if err := json.NewDecoder(bytes.NewReader(data)).Decode(d); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// Queries are the dashboard's targets' expressions and its query
// variables' queries.
func (d *Dashboard) Queries() []Query {
	var out []Query
	var walk func(ps []Panel)
	walk = func(ps []Panel) {
		for _, p := range ps {
			for _, t := range p.Targets {
				out = append(out, Query{Source: fmt.Sprintf("panel %q target %s", p.Title, t.RefID), Expr: t.Expr})
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var q struct {
			Query string `json:"query"`
		}
		if err := json.Unmarshal(v.Query, &q); err != nil {
			_ = json.Unmarshal(v.Query, &q.Query)
		}
		out = append(out, Query{Source: "variable " + v.Name, Expr: q.Query})
	}
	return out
}
