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

// Package metricstest reads a Prometheus text endpoint the way a test
// needs it: one authenticated GET (Get, Scrape), the exposition parsed
// with expfmt into Families, and look-ups of a family's series by labels
// (Find, Matching, Value) or of what a family exports at all (Require,
// LabelNames), which the e2e tests and the monitoring artifacts' checker
// (test/monitoring) share.
package metricstest

import (
	"crypto/tls"
	"fmt"
	"io"
	"maps"
	"net/http"
	"slices"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// client reads metrics and probe endpoints. Certificates are not
// verified: every controller-runtime manager's metrics certificate is
// self-signed, a scraper authenticates the server by network path and
// the server authenticates the scraper by its token.
var client = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}

// Get GETs url (http or https), with token as a bearer token unless it is
// empty, and returns the status code and body whatever the code: the
// tests of the endpoints' authentication want the 401s and 403s.
func Get(url, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	// The text format, which Parse reads, whatever the server prefers.
	req.Header.Set("Accept", string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, "", fmt.Errorf("GET %s: reading the body: %w", url, err)
	}
	return resp.StatusCode, string(body), nil
}

// Scrape GETs a metrics endpoint with token and parses what it serves; an
// answer other than 200 is an error (with the start of its body).
func Scrape(url, token string) (Families, error) {
	code, body, err := Get(url, token)
	if err != nil {
		return nil, err
	}
	if code != http.StatusOK {
		return nil, fmt.Errorf("GET %s: HTTP %d: %.300s", url, code, body)
	}
	f, err := Parse(strings.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", url, err)
	}
	return f, nil
}

// Families are a scrape's metric families by name.
type Families map[string]*dto.MetricFamily

// Parse reads the Prometheus text exposition format.
func Parse(r io.Reader) (Families, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	mfs, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parsing the exposition: %w", err)
	}
	return mfs, nil
}

// Matching are the series of family name whose labels include labels
// (other labels may be there too).
func (f Families) Matching(name string, labels map[string]string) []*dto.Metric {
	var out []*dto.Metric
	for _, m := range f[name].GetMetric() {
		have := labelMap(m)
		ok := true
		for k, v := range labels {
			if got, found := have[k]; !found || got != v {
				ok = false
				break
			}
		}
		if ok {
			out = append(out, m)
		}
	}
	return out
}

// Find is the series of family name with exactly these labels, nil when
// there is none.
func (f Families) Find(name string, labels map[string]string) *dto.Metric {
	for _, m := range f[name].GetMetric() {
		if maps.Equal(labelMap(m), labels) {
			return m
		}
	}
	return nil
}

// Count is how many series of family name have labels among theirs.
func (f Families) Count(name string, labels map[string]string) int {
	return len(f.Matching(name, labels))
}

// Histogram is the one histogram series of family name with labels among
// its labels; nil when there is none or more than one.
func (f Families) Histogram(name string, labels map[string]string) *dto.Histogram {
	if ms := f.Matching(name, labels); len(ms) == 1 {
		return ms[0].GetHistogram()
	}
	return nil
}

// Value is the one series of family name with labels among its labels,
// as Value reads it; false when there is none or more than one.
func (f Families) Value(name string, labels map[string]string) (float64, bool) {
	ms := f.Matching(name, labels)
	if len(ms) != 1 {
		return 0, false
	}
	return Value(ms[0])
}

// Value is a gauge's, counter's or untyped metric's value, or a
// histogram's or summary's count of observations.
func Value(m *dto.Metric) (float64, bool) {
	switch {
	case m.Gauge != nil:
		return m.GetGauge().GetValue(), true
	case m.Counter != nil:
		return m.GetCounter().GetValue(), true
	case m.Untyped != nil:
		return m.GetUntyped().GetValue(), true
	case m.Histogram != nil:
		return float64(m.GetHistogram().GetSampleCount()), true
	case m.Summary != nil:
		return float64(m.GetSummary().GetSampleCount()), true
	}
	return 0, false
}

// LabelNames are the labels any series of family name has, with the ones
// its type implies in a query: le of a histogram's _bucket series and
// quantile of a summary's. Nil when the family is not exported.
func (f Families) LabelNames(name string) map[string]bool {
	mf, ok := f[name]
	if !ok {
		return nil
	}
	out := map[string]bool{}
	switch mf.GetType() {
	case dto.MetricType_HISTOGRAM, dto.MetricType_GAUGE_HISTOGRAM:
		out[model.BucketLabel] = true
	case dto.MetricType_SUMMARY:
		out[model.QuantileLabel] = true
	}
	for _, m := range mf.GetMetric() {
		for _, l := range m.GetLabel() {
			out[l.GetName()] = true
		}
	}
	return out
}

// MissingError says a metric, or one of its labels, is not exported.
type MissingError struct {
	// Metric is the family's name.
	Metric string
	// Label is the missing label; empty when the family itself is.
	Label string
	// Have are the labels the family exports (LabelNames), sorted; nil
	// when the family is missing.
	Have []string
}

func (e *MissingError) Error() string {
	if e.Label == "" {
		return fmt.Sprintf("metric %s is not exported", e.Metric)
	}
	return fmt.Sprintf("metric %s has no label %q (it has %s)", e.Metric, e.Label, strings.Join(e.Have, ", "))
}

// Require fails with a *MissingError when family name is not exported or
// none of its series has one of labels (LabelNames).
func (f Families) Require(name string, labels ...string) error {
	have := f.LabelNames(name)
	if have == nil {
		return &MissingError{Metric: name}
	}
	for _, l := range labels {
		if !have[l] {
			return &MissingError{Metric: name, Label: l, Have: slices.Sorted(maps.Keys(have))}
		}
	}
	return nil
}

// Merge are the families of f and more; a family in both has the series
// of both (a query reads every target's scrape as one).
func (f Families) Merge(more Families) Families {
	out := Families{}
	for _, src := range []Families{f, more} {
		for name, mf := range src {
			if have, ok := out[name]; ok {
				merged := &dto.MetricFamily{Name: have.Name, Help: have.Help, Type: have.Type, Unit: have.Unit}
				merged.Metric = append(slices.Clone(have.Metric), mf.Metric...)
				out[name] = merged
				continue
			}
			out[name] = mf
		}
	}
	return out
}

func labelMap(m *dto.Metric) map[string]string {
	out := make(map[string]string, len(m.GetLabel()))
	for _, l := range m.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}
