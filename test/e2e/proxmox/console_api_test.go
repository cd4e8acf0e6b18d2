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

package proxmox

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/console/consoletest"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// TestProxmoxConsoleThroughTheAPI (issue 34): virtualmachines/NAME/console
// of a VM on Proxmox VE, through kube-apiserver, banlieue's API server
// and the provider's endpoint to the VM's serial0 (termproxy and
// vncwebsocket, as the console user of the Provider's Secret, which
// holds VM.Console only). pvesim runs no guest: behind serial0 is its
// stand-in shell, which works out echo's arithmetic, so what comes back
// shows the typed line reached the terminal. A second attach is refused
// naming the holder; a takeover ends the first.
func TestProxmoxConsoleThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	sim.AddUser(pvesim.User{ID: "console@pve", Password: "console-secret", ACL: []pvesim.ACL{{Path: "/vms", Privileges: []string{"VM.Console"}}}})
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "console-proxmox-token", Namespace: ns}, StringData: map[string]string{
		"tokenID": sim.TokenID, "tokenSecret": sim.Secret, "consoleUsername": "console@pve", "consolePassword": "console-secret"}}
	if err := c.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	p := proxmoxProvider(t, "console-proxmox", s.Name, map[string]string{"role": "console"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	p = waitProvider(t, p.Name, "InventoryWalked")
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		if p.Status.Console == nil || p.Status.Console.Endpoint == "" {
			return fmt.Errorf("Provider %s publishes no console endpoint yet", p.Name)
		}
		return nil
	})
	ensureImage(t)
	vm := readyVMOf(t, "pve-console-vm", "pve-console-small", 2, "debian-12", "console", "192.0.2.64")
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })

	first := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, false)
	first.TypeLine("echo TOKEN$((6*7))")
	first.Wait(t, "TOKEN42", 30*time.Second)

	refused := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, false)
	if err := refused.Ended(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "in use by") {
		t.Errorf("a second attach: %v; want it refused as in use", err)
	}
	second := consoletest.Attach(t, env.Admin, vm.Namespace, vm.Name, true)
	if err := first.Ended(t, 30*time.Second); err == nil || !strings.Contains(err.Error(), "taken over") {
		t.Errorf("the first session after a takeover: %v; want ended as taken over", err)
	}
	second.TypeLine("echo AGAIN$((5*5))")
	second.Wait(t, "AGAIN25", 30*time.Second)
}
