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
package podspec

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestExpand(t *testing.T) {
	vars := map[string]string{"NS": "banlieue-system", "EMPTY": ""}
	for in, want := range map[string]string{
		"--namespace=$(NS)":  "--namespace=banlieue-system",
		"$(NS)/$(NS)":        "banlieue-system/banlieue-system",
		"$(MISSING)":         "$(MISSING)",
		"$$(NS)":             "$(NS)",
		"a$(EMPTY)b":         "ab",
		"cost $5":            "cost $5",
		"$(unterminated":     "$(unterminated",
		"trailing $":         "trailing $",
		"--flag=$(NS)$(NS)x": "--flag=banlieue-systembanlieue-systemx",
	} {
		if got := Expand(in, vars); got != want {
			t.Errorf("Expand(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestCommand(t *testing.T) {
	cms := map[string]*corev1.ConfigMap{"cfg": {ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"BANLIEUE_NAMESPACE": "ns1", "BANLIEUE_V": "2"}}}
	c := corev1.Container{
		Name: "provider", Args: []string{"provider", "vsphere", "--namespace=$(BANLIEUE_NAMESPACE)"},
		EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		Env: []corev1.EnvVar{{Name: "BANLIEUE_V", Value: "4"}, {Name: "WHERE", Value: "in $(BANLIEUE_NAMESPACE)"},
			{Name: "POD_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}}},
	}
	args, env, err := Command(c, cms)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"provider", "vsphere", "--namespace=ns1"}; !slices.Equal(args, want) {
		t.Errorf("args = %q, want %q", args, want)
	}
	// env wins over envFrom, and may refer to it.
	if want := []string{"BANLIEUE_NAMESPACE=ns1", "BANLIEUE_V=4", "POD_IP=" + PodIP, "WHERE=in ns1"}; !slices.Equal(env, want) {
		t.Errorf("env = %q, want %q", env, want)
	}
	// Of the pod's fields, only its address has a meaning for a process.
	c.Env = append(c.Env, corev1.EnvVar{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}})
	if _, _, err := Command(c, cms); err == nil || !strings.Contains(err.Error(), "env NODE") {
		t.Errorf("an unsupported valueFrom: error = %v", err)
	}
	c.Env = c.Env[:len(c.Env)-1]
	if _, _, err := Command(c, nil); err == nil || !strings.Contains(err.Error(), "ConfigMap cfg not found") {
		t.Errorf("a missing ConfigMap: error = %v", err)
	}
}
