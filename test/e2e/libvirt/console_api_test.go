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

package libvirt

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// TestConsoleThroughTheAPI (issue 34): virtualmachines/NAME/console as a
// user reaches it, through kube-apiserver's aggregation proxy, banlieue's
// API server and the libvirt provider's console endpoint, to the real
// guest's serial shell. A command typed there runs (its arithmetic comes
// back worked out); a second attach is refused naming who holds the
// console; a takeover ends the first session saying by whom; once a client
// goes, its console is free again; powering the VM off ends the session
// with a reason.
func TestConsoleThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	vm, p := bootedGuest(t, "console-api")
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Console == nil || p.Status.Console.Endpoint == "" {
			return fmt.Errorf("Provider %s publishes no console endpoint yet", p.Name)
		}
		return nil
	})

	first := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, false)
	token := strings.ToUpper(randomHex(t))
	first.TypeLine(fmt.Sprintf("echo %s$((6*7))", token))
	first.Wait(t, token+"42", 30*time.Second)

	// One session per console: refused, naming the holder.
	refused := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, false)
	if err := refused.Ended(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("a second attach: %v; want it refused as in use", err)
	} else {
		t.Logf("a second attach: %v", err)
	}

	// A takeover ends the first session, saying so.
	second := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, true)
	if err := first.Ended(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("the first session after a takeover: %v; want ended as taken over", err)
	}
	token2 := strings.ToUpper(randomHex(t))
	second.TypeLine(fmt.Sprintf("echo %s$((6*7))", token2))
	second.Wait(t, token2+"42", 30*time.Second)

	// The client goes: the console is free for an attach without takeover.
	second.Leave()
	_ = second.Ended(t, 30*time.Second)
	var third *consoletest.Session
	eventually(t, 30*time.Second, func() error {
		s := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, false)
		token3 := strings.ToUpper(randomHex(t))
		s.TypeLine(fmt.Sprintf("echo %s$((6*7))", token3))
		if err := s.WaitOrEnd(token3+"42", 15*time.Second); err != nil {
			s.Leave()
			return err
		}
		third = s
		return nil
	})

	// The VM powers off: the session ends with the reason.
	setPower(t, vm, "PoweredOff")
	if err := third.Ended(t, 2*time.Minute); err == nil || !strings.Contains(err.Error(), "console stream ended") {
		t.Errorf("the session after the power-off: %v; want ended with the reason", err)
	}
}
