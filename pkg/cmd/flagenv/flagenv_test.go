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
package flagenv

import (
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

func TestApply(t *testing.T) {
	for _, tc := range []struct {
		name    string
		args    []string
		env     map[string]string
		workers int
		resync  time.Duration
		wantErr string
	}{
		{name: "defaults", workers: 8, resync: 5 * time.Minute},
		{name: "from the environment", env: map[string]string{"BANLIEUE_MACHINE_WORKERS": "3", "BANLIEUE_RESYNC": "1m"}, workers: 3, resync: time.Minute},
		{name: "the command line wins", args: []string{"--machine-workers=5"}, env: map[string]string{"BANLIEUE_MACHINE_WORKERS": "3"}, workers: 5, resync: 5 * time.Minute},
		{name: "other variables are not read", env: map[string]string{"MACHINE_WORKERS": "3", "BANLIEUE_MACHINEWORKERS": "4"}, workers: 8, resync: 5 * time.Minute},
		{name: "a bad value names its variable", env: map[string]string{"BANLIEUE_RESYNC": "often"}, wantErr: `BANLIEUE_RESYNC="often"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
			workers := fs.Int("machine-workers", 8, "")
			resync := fs.Duration("resync", 5*time.Minute, "")
			if err := fs.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			err := Apply(fs, func(k string) (string, bool) { v, ok := tc.env[k]; return v, ok })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want one containing %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if *workers != tc.workers || *resync != tc.resync {
				t.Errorf("workers, resync = %d, %s; want %d, %s", *workers, *resync, tc.workers, tc.resync)
			}
		})
	}
}

func TestName(t *testing.T) {
	for flag, want := range map[string]string{"v": "BANLIEUE_V", "machine-workers": "BANLIEUE_MACHINE_WORKERS", "namespace": "BANLIEUE_NAMESPACE"} {
		if got := Name(flag); got != want {
			t.Errorf("Name(%q) = %q, want %q", flag, got, want)
		}
	}
}
