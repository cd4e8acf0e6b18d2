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
package bootstrap

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/apply"
	"github.com/firestoned/banlieue/pkg/bootstrap"
)

const apiService = "v1alpha1.banlieue.io"

// waiter waits for what was applied to run, printing a line whenever what
// it waits for changes, and failing with the last one at the timeout.
type waiter struct {
	a       *apply.Applier
	out     io.Writer
	timeout time.Duration
}

// until polls state (a line saying what is awaited, done when it is met).
func (w waiter) until(ctx context.Context, what string, state func(context.Context) (line string, done bool, err error)) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, w.timeout, true, func(ctx context.Context) (bool, error) {
		line, done, err := state(ctx)
		if err != nil {
			return false, err
		}
		if line != last {
			fmt.Fprintf(w.out, "%s: %s\n", what, line)
			last = line
		}
		return done, nil
	})
	if err != nil && errors.Is(err, context.DeadlineExceeded) {
		return fmt.Errorf("%s not ready within %s: %s", what, w.timeout, last)
	}
	return err
}

// rollouts waits until every Deployment has all its replicas updated and
// available.
func (w waiter) rollouts(ctx context.Context, deployments []*unstructured.Unstructured) error {
	for _, d := range deployments {
		what := "deployment/" + apply.Name(d)
		if err := w.until(ctx, what, func(ctx context.Context) (string, bool, error) {
			live, err := w.a.Get(ctx, d)
			if err != nil || live == nil {
				return "not found", false, err
			}
			want, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas")
			updated, _, _ := unstructured.NestedInt64(live.Object, "status", "updatedReplicas")
			available, _, _ := unstructured.NestedInt64(live.Object, "status", "availableReplicas")
			observed, _, _ := unstructured.NestedInt64(live.Object, "status", "observedGeneration")
			line := fmt.Sprintf("%d of %d replicas updated, %d available", updated, want, available)
			return line, observed >= live.GetGeneration() && updated == want && available == want, nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// apiService waits for banlieue.io to be served through kube-apiserver.
func (w waiter) apiService(ctx context.Context) error {
	obj := &unstructured.Unstructured{}
	obj.SetAPIVersion("apiregistration.k8s.io/v1")
	obj.SetKind("APIService")
	obj.SetName(apiService)
	return w.until(ctx, "apiservice/"+apiService, func(ctx context.Context) (string, bool, error) {
		live, err := w.a.Get(ctx, obj)
		if err != nil || live == nil {
			return "not registered (run banlieue bootstrap operator first)", false, err
		}
		return condition(live, "Available")
	})
}

// providerReady waits for a Provider's Ready condition.
func (w waiter) providerReady(ctx context.Context, p *unstructured.Unstructured) error {
	return w.until(ctx, "provider/"+apply.Name(p), func(ctx context.Context) (string, bool, error) {
		live, err := w.a.Get(ctx, p)
		if err != nil || live == nil {
			return "not found", false, err
		}
		return condition(live, "Ready")
	})
}

// condition describes status.conditions[type] as "Type=Status: Reason:
// message", done when True.
func condition(obj *unstructured.Unstructured, typ string) (string, bool, error) {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] != typ {
			continue
		}
		line := fmt.Sprintf("%s=%v", typ, m["status"])
		if r, _ := m["reason"].(string); r != "" {
			line += ": " + r
		}
		if msg, _ := m["message"].(string); msg != "" {
			line += ": " + msg
		}
		return line, m["status"] == string(metav1.ConditionTrue), nil
	}
	return typ + " not reported yet", false, nil
}

// storedCertificates reads the certificates of an earlier self-signed
// install; nil when there is none.
func storedCertificates(ctx context.Context, cfg *restclient.Config) (*bootstrap.Certificates, error) {
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	data := map[string]map[string][]byte{}
	for _, name := range bootstrap.SecretNames {
		s, err := cs.CoreV1().Secrets(bootstrap.APIServerNamespace).Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) && name == bootstrap.CASecret:
			return nil, nil
		case err != nil:
			return nil, fmt.Errorf("reading the existing install's certificates: %w", err)
		}
		data[name] = s.Data
	}
	return bootstrap.LoadCertificates(data)
}
