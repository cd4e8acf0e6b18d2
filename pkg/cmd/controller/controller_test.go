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

package controller

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
)

// --shared-provider-namespace defaults to banlieue-system, may come from
// the Deployment's ConfigMap (BANLIEUE_SHARED_PROVIDER_NAMESPACE), and a
// value that names no namespace stops the process before it connects,
// naming the flag (the kubeconfig does not exist: reaching for it would be
// another error).
func TestSharedProviderNamespaceFlag(t *testing.T) {
	cmd := NewCommand(context.Background())
	if f := cmd.Flags().Lookup("shared-provider-namespace"); f == nil || f.DefValue != "banlieue-system" {
		t.Fatalf("flag %+v", f)
	}
	missing := "--kubeconfig=" + filepath.Join(t.TempDir(), "missing")
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"flag", []string{"--shared-provider-namespace=Ops_NS"}, ""},
		{"environment", nil, "Ops_NS"},
		{"empty", []string{"--shared-provider-namespace="}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv("BANLIEUE_SHARED_PROVIDER_NAMESPACE", tc.env)
			}
			cmd := NewCommand(context.Background())
			cmd.SetArgs(append(tc.args, missing))
			cmd.SilenceErrors = true
			err := cmd.Execute()
			if err == nil || !strings.Contains(err.Error(), "--shared-provider-namespace") || !strings.Contains(err.Error(), "not a namespace name") {
				t.Errorf("error %v, want one naming --shared-provider-namespace", err)
			}
		})
	}
}
