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

package provider

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images/fetch"
	"github.com/firestoned/banlieue/pkg/providers"
)

// readyOf is the Provider's exported Ready: its status series and reason
// series, as "status=v" and "reason" lists.
func readyOf(t *testing.T, provider string) (statuses map[string]float64, reasons []string) {
	t.Helper()
	statuses = map[string]float64{}
	for _, m := range collect(t, ProviderReady) {
		if label(m, "provider") == provider {
			statuses[label(m, "status")] = m.GetGauge().GetValue()
		}
	}
	for _, m := range collect(t, ProviderReadyReason) {
		if label(m, "provider") == provider {
			if m.GetGauge().GetValue() != 1 {
				t.Errorf("reason %s of %s is %v, want 1", label(m, "reason"), provider, m.GetGauge().GetValue())
			}
			reasons = append(reasons, label(m, "reason"))
		}
	}
	return statuses, reasons
}

func collect(t *testing.T, c prometheus.Collector) []*dto.Metric {
	t.Helper()
	ch := make(chan prometheus.Metric, 100)
	go func() { c.Collect(ch); close(ch) }()
	var out []*dto.Metric
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		out = append(out, &d)
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestReadyMetrics: a Provider's Ready condition is exported as 1 for its
// status and 0 for the others, with exactly one reason series (a changed
// reason's old series goes); a Provider that goes leaves no series, and
// another Provider's stay.
func TestReadyMetrics(t *testing.T) {
	var r readiness
	r.set("ns/a", metav1.Condition{Status: metav1.ConditionFalse, Reason: "ConnectFailed"})
	r.set("ns/b", metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonInventoryWalked})
	st, reasons := readyOf(t, "ns/a")
	if st["True"] != 0 || st["False"] != 1 || st["Unknown"] != 0 || len(st) != 3 {
		t.Errorf("an unready Provider exports %v", st)
	}
	if len(reasons) != 1 || reasons[0] != "ConnectFailed" {
		t.Errorf("an unready Provider's reasons: %v", reasons)
	}
	r.set("ns/a", metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonInventoryWalked})
	st, reasons = readyOf(t, "ns/a")
	if st["True"] != 1 || st["False"] != 0 || st["Unknown"] != 0 {
		t.Errorf("a Provider become Ready exports %v", st)
	}
	if len(reasons) != 1 || reasons[0] != ReasonInventoryWalked {
		t.Errorf("a Provider become Ready has reasons %v: the old one stayed", reasons)
	}
	r.forget("ns/a")
	if st, reasons := readyOf(t, "ns/a"); len(st) != 0 || len(reasons) != 0 {
		t.Errorf("a Provider gone left series: %v, %v", st, reasons)
	}
	if st, reasons := readyOf(t, "ns/b"); st["True"] != 1 || len(reasons) != 1 {
		t.Errorf("another Provider's series went with it: %v, %v", st, reasons)
	}
	r.forget("ns/b")
}

// TestReadyMetricsDeletedProvider: the reconcile of a Provider that no
// longer exists deletes its series (and forgets its session).
func TestReadyMetricsDeletedProvider(t *testing.T) {
	scheme, err := controllers.Scheme()
	if err != nil {
		t.Fatal(err)
	}
	var forgotten []string
	r := &Reconciler{Client: fake.NewClientBuilder().WithScheme(scheme).Build(), Class: "proxmox",
		Forget: func(owner string) { forgotten = append(forgotten, owner) }}
	r.ready.set("ns/gone", metav1.Condition{Status: metav1.ConditionTrue, Reason: ReasonInventoryWalked})
	if st, _ := readyOf(t, "ns/gone"); st["True"] != 1 {
		t.Fatalf("not exported: %v", st)
	}
	if _, err := r.Reconcile(context.Background(), ctrl.Request{NamespacedName: types.NamespacedName{Namespace: "ns", Name: "gone"}}); err != nil {
		t.Fatal(err)
	}
	if st, reasons := readyOf(t, "ns/gone"); len(st) != 0 || len(reasons) != 0 {
		t.Errorf("a deleted Provider left series: %v, %v", st, reasons)
	}
	if len(forgotten) != 1 || forgotten[0] != "ns/gone" {
		t.Errorf("forgotten: %v", forgotten)
	}
}

// fakeImporter reads the whole body, failing when fail is set.
type fakeImporter struct {
	providers.ImageImporter
	fail bool
}

func (f fakeImporter) ImportImage(_ context.Context, _ failuredomain.Location, _ providers.ImageTarget, body io.Reader) (string, error) {
	if _, err := io.Copy(io.Discard, body); err != nil {
		return "", err
	}
	if f.fail {
		return "", providers.ErrInsufficientStorage
	}
	return "pool/img", nil
}

// TestImportMetrics: an import counts the bytes it reads under its
// backend, and each attempt is timed by result.
func TestImportMetrics(t *testing.T) {
	const class = "test-imports"
	body := strings.Repeat("x", 4096)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, body) }))
	defer srv.Close()
	r := &ImageReconciler{Class: class}
	sum := sha256.Sum256([]byte(body))
	src := fetch.Source{URL: srv.URL + "/img.qcow2", Checksum: "sha256:" + hex.EncodeToString(sum[:])}
	if _, err := r.runImport(&importJob{}, fakeImporter{}, failuredomain.Location{}, providers.ImageTarget{}, src); err != nil {
		t.Fatal(err)
	}
	if _, err := r.runImport(&importJob{}, fakeImporter{fail: true}, failuredomain.Location{}, providers.ImageTarget{}, src); err == nil {
		t.Fatal("the failing import succeeded")
	}
	if n := testutil.ToFloat64(ImageImportBytes.WithLabelValues(class)); n != 2*4096 {
		t.Errorf("%v bytes counted, want %d", n, 2*4096)
	}
	for _, result := range []string{"success", "failure"} {
		var m dto.Metric
		if err := ImageImportDuration.WithLabelValues(class, result).(prometheus.Metric).Write(&m); err != nil {
			t.Fatal(err)
		}
		if n := m.GetHistogram().GetSampleCount(); n != 1 {
			t.Errorf("%d %s imports timed, want 1", n, result)
		}
	}
}
