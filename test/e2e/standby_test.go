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

package e2e

import (
	"fmt"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/loopback"
)

// TestStandbyTakesOver: two replicas of the operator, and of a provider,
// taking turns through their Lease. Both are live and ready (a standby can
// take over); the leader's /readyz?verbose says leading, the other's
// standby; once the leader stops, the former standby says leading.
func TestStandbyTakesOver(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(i int, flags ...string) (devenv.Process, error)
	}{
		{"provider", func(i int, flags ...string) (devenv.Process, error) {
			// Serving one absent Provider, as an operator's per-Provider
			// workload: a Lease of its own and nothing to reconcile.
			return env.StartProvider("vsphere", fmt.Sprintf("provider-standby-%d", i), time.Minute,
				append(flags, "--leader-elect", "--provider=standby-e2e")...)
		}},
		{"operator", func(i int, flags ...string) (devenv.Process, error) {
			return env.StartOperator(fmt.Sprintf("operator-standby-%d", i), []string{devenv.Namespace}, append(flags, "--leader-elect")...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var procs [2]devenv.Process
			var health [2]string
			for i := range procs {
				port, err := loopback.FreePort()
				if err != nil {
					t.Fatal(err)
				}
				if procs[i], err = tc.start(i, "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(port)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(procs[i].Stop)
				health[i] = "http://127.0.0.1:" + strconv.Itoa(port)
			}

			lead := -1
			eventually(t, 2*time.Minute, func() error {
				var states [2]string
				for i, h := range health {
					state, err := devenv.Leadership(h)
					if err != nil {
						return err
					}
					states[i] = state
				}
				switch states {
				case [2]string{"leading", "standby"}:
					lead = 0
				case [2]string{"standby", "leading"}:
					lead = 1
				default:
					return fmt.Errorf("replicas say %v, want one leading and one standby", states)
				}
				return nil
			})
			for _, h := range health {
				resp, err := http.Get(h + "/healthz")
				if err != nil {
					t.Fatal(err)
				}
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK {
					t.Errorf("%s/healthz: HTTP %d", h, resp.StatusCode)
				}
			}

			procs[lead].Stop()
			standby := health[1-lead]
			eventually(t, 2*time.Minute, func() error {
				state, err := devenv.Leadership(standby)
				if err != nil {
					return err
				}
				if state != "leading" {
					return fmt.Errorf("%s still says %s after the leader stopped", standby, state)
				}
				return nil
			})
		})
	}
}
