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
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// run runs "banlieue bootstrap args...", returning what it printed.
func run(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := NewCommand(context.Background(), "v0.0.0-test")
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&out)
	cmd.SetArgs(args)
	err := cmd.Execute()
	return out.String(), err
}

// A namespace that holds Kubernetes' own or the API server's keys is
// refused, naming the flag and why, before anything is read from or
// applied to the cluster: the kubeconfig given does not exist, so any
// other error would come from reaching for it.
func TestNamespaceRefused(t *testing.T) {
	missing := "--kubeconfig=" + filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		namespace, reason string
	}{
		{"kube-system", "the cluster's own components"},
		{"kube-public", "everyone may read it"},
		{"kube-node-lease", "heartbeat Leases"},
		{"banlieue-apiserver", "the API server's keys"},
		{"Not_A_Namespace", "not a namespace name"},
	} {
		for _, sub := range [][]string{{"operator"}, {"operator", "--dry-run"}, {"provider", "vsphere"}} {
			args := append(append([]string{}, sub...), "-n", tc.namespace, missing)
			out, err := run(t, args...)
			if err == nil {
				t.Errorf("%v: accepted:\n%s", args, out)
				continue
			}
			for _, want := range []string{"-n/--namespace", tc.namespace, tc.reason} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("%v: error %q lacks %q", args, err, want)
				}
			}
			if strings.Contains(out, "kind:") || strings.Contains(out, "serverside-applied") {
				t.Errorf("%v: rendered or applied something:\n%s", args, out)
			}
		}
	}
}

// -n moves the shared Providers with the install: the API server, the
// controller and the operator (for the providers it runs) are told to
// share the Providers of the install namespace.
func TestNamespaceSharesItsProviders(t *testing.T) {
	out, err := run(t, "operator", "-n", "ops", "--dry-run")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if n := strings.Count(out, "--shared-provider-namespace=ops"); n != 3 {
		t.Errorf("--shared-provider-namespace=ops appears %d times, want 3 (API server, controller, operator):\n%s", n, out)
	}
	if strings.Contains(out, "banlieue-system") {
		t.Error("the default namespace is left in the install")
	}
}
