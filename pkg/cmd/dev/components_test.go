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

package dev

import (
	"slices"
	"testing"
)

// TestFlagsOf: a ConfigMap key is the flag it stands for (the shipped
// config.yaml's rule: BANLIEUE_ and the flag's name).
func TestFlagsOf(t *testing.T) {
	got := flagsOf(map[string]string{"BANLIEUE_SHUTDOWN_GRACE": "30s", "BANLIEUE_DOMAIN_TYPE": "qemu", "BANLIEUE_V": "4"})
	want := []string{"--domain-type=qemu", "--shutdown-grace=30s", "--v=4"}
	if !slices.Equal(got, want) {
		t.Errorf("flagsOf: %v, want %v", got, want)
	}
}

// TestPodSettings: a setting given wins over banlieue dev's own.
func TestPodSettings(t *testing.T) {
	got := podSettings(map[string]string{"BANLIEUE_RESYNC": "2s", "BANLIEUE_DOMAIN_TYPE": "qemu"})
	for k, want := range map[string]string{"BANLIEUE_RESYNC": "2s", "BANLIEUE_DOMAIN_TYPE": "qemu", "BANLIEUE_CONSOLE_BIND_ADDRESS": ":8444"} {
		if got[k] != want {
			t.Errorf("%s: %q, want %q", k, got[k], want)
		}
	}
}
