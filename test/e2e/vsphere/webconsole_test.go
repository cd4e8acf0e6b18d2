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

package vsphere

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"io"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/object"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/kubectl"
	"github.com/firestoned/banlieue/pkg/console"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// TestWebConsoleThroughTheAPI (issue 34): virtualmachines/NAME/webconsole
// as a user reaches it, through kube-apiserver's aggregation proxy,
// banlieue's API server and the vSphere provider's console endpoint, to
// vcsim's AcquireTicket. The ticket is the simulator's (the repo's vcsim
// package adds AcquireTicket, which govmomi's simulator lacks): a random
// one naming the VM's host, nothing listening behind it. The URL comes
// back encrypted with the requester's fresh key and decrypts to
// wss://HOST:443/ticket/TICKET naming the VM's ESX host; each request is
// a new ticket. The serial console of the same VM is refused with a
// reason naming webconsole; a powered-off VM's web console is a Conflict.
func TestWebConsoleThroughTheAPI(t *testing.T) {
	ctx := context.Background()
	markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
	markTemplate(t, "DC1", "ubuntu-22.04-cloudinit")
	ensureImage(t, "ubuntu-22.04-cloudinit")
	secret(t, ns, "webconsole-vsphere-creds", map[string]string{"username": user, "password": password})
	p := provider("webconsole-vsphere", "webconsole-vsphere-creds", nil)
	p.Labels["webconsole"] = "yes"
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	waitReady(t, p.Name, "InventoryWalked")
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "webconsole-vsphere"}, p); err != nil {
			return err
		}
		if p.Status.Console == nil || p.Status.Console.Endpoint == "" {
			return fmt.Errorf("Provider %s publishes no console endpoint yet", p.Name)
		}
		return nil
	})
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "webconsole-class"},
		Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	on := webConsoleVM(t, "webconsole-on", v1alpha1.PowerStatePoweredOn)
	off := webConsoleVM(t, "webconsole-off", v1alpha1.PowerStatePoweredOff)

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PUBLIC KEY", Bytes: x509.MarshalPKCS1PublicKey(&key.PublicKey)}))
	vms := clientset.NewForConfigOrDie(env.Admin).BanlieueV1alpha1().VirtualMachines(ns)
	ask := func(name string) (*v1alpha1.VirtualMachineWebConsole, error) {
		return vms.CreateWebConsole(ctx, name, &v1alpha1.VirtualMachineWebConsole{
			Spec: v1alpha1.VirtualMachineWebConsoleSpec{PublicKey: pemKey}}, metav1.CreateOptions{})
	}

	// The VM's ESX host, as vCenter reports it.
	vsm := &infrav1.VSphereMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: on.Status.InfrastructureRef.Name}, vsm); err != nil {
		t.Fatal(err)
	}
	m := vcVM(t, vsm.Spec.Datacenter, providers.BackendName(ns, on.Name))
	if m == nil || m.Runtime.Host == nil {
		t.Fatalf("vcsim VM %s: %+v", on.Name, m)
	}
	host, err := object.NewHostSystem(vcLogin(t).Client, *m.Runtime.Host).ObjectName(ctx)
	if err != nil {
		t.Fatal(err)
	}

	want := regexp.MustCompile(fmt.Sprintf(`^wss://%s:%d/ticket/([0-9a-f]{32})$`, regexp.QuoteMeta(host), vcsim.TicketPort))
	tickets := map[string]bool{}
	for range 2 {
		start := time.Now()
		got, err := ask(on.Name)
		if err != nil {
			t.Fatalf("webconsole of %s: %v", on.Name, err)
		}
		if strings.Contains(got.Status.URL, "wss://") || strings.Contains(got.Status.URL, host) {
			t.Errorf("the answer carries the URL in the clear: %q", got.Status.URL)
		}
		u, err := console.DecryptURL(key, got.Status.URL)
		if err != nil {
			t.Fatalf("decrypting %q: %v", got.Status.URL, err)
		}
		match := want.FindStringSubmatch(u)
		if match == nil {
			t.Fatalf("web console URL %q, want %s", u, want)
		}
		tickets[match[1]] = true
		if exp := got.Status.ExpiresAt.Time; exp.Before(start.Add(time.Minute)) || exp.After(time.Now().Add(3*time.Minute)) {
			t.Errorf("expiresAt %s: want about two minutes after %s", exp, start)
		}
		t.Logf("web console URL of %s: %s (expires %s)", on.Name, u, got.Status.ExpiresAt)
	}
	if len(tickets) != 2 {
		t.Errorf("two requests got the same ticket: %v", tickets)
	}

	// kubectl banlieue webconsole does the same with a key of its own.
	var out, errOut bytes.Buffer
	if code := kubectl.Execute(ctx, []string{"--kubeconfig=" + env.AdminKubeconfig, "-n", ns, "webconsole", on.Name},
		kubectl.Streams{In: strings.NewReader(""), Out: &out, ErrOut: &errOut}); code != 0 {
		t.Fatalf("kubectl banlieue webconsole: exit %d: %s", code, errOut.String())
	}
	if u := strings.TrimSpace(out.String()); !want.MatchString(u) {
		t.Errorf("kubectl banlieue webconsole printed %q, want %s", u, want)
	} else if tickets[want.FindStringSubmatch(u)[1]] {
		t.Errorf("kubectl banlieue webconsole got a ticket already given: %s", u)
	}
	if !strings.Contains(errOut.String(), "Accepted once, until ") {
		t.Errorf("kubectl banlieue webconsole said %q", errOut.String())
	}

	// Another key does not decrypt it.
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := ask(on.Name); err != nil {
		t.Fatal(err)
	} else if _, err := console.DecryptURL(other, got.Status.URL); err == nil {
		t.Error("another key decrypted the URL")
	}

	// A key that is not one is refused before any ticket is asked for.
	if _, err := vms.CreateWebConsole(ctx, on.Name, &v1alpha1.VirtualMachineWebConsole{
		Spec: v1alpha1.VirtualMachineWebConsoleSpec{PublicKey: "not a key"}}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a bad key: %v; want BadRequest", err)
	}

	// Nothing but the key is read, so nothing else is accepted.
	if _, err := vms.CreateWebConsole(ctx, on.Name, &v1alpha1.VirtualMachineWebConsole{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
		Spec:       v1alpha1.VirtualMachineWebConsoleSpec{PublicKey: pemKey}}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a request with labels: %v; want BadRequest", err)
	}
	if _, err := vms.CreateWebConsole(ctx, on.Name, &v1alpha1.VirtualMachineWebConsole{
		Spec:   v1alpha1.VirtualMachineWebConsoleSpec{PublicKey: pemKey},
		Status: v1alpha1.VirtualMachineWebConsoleStatus{URL: "wss://elsewhere"}}, metav1.CreateOptions{}); !apierrors.IsBadRequest(err) {
		t.Errorf("a request with a status: %v; want BadRequest", err)
	}

	// A powered-off VM has no web console.
	if _, err := ask(off.Name); !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "not powered on") {
		t.Errorf("webconsole of the powered-off %s: %v; want a Conflict saying it is not powered on", off.Name, err)
	}

	// The serial console is refused, naming webconsole.
	err = attachOnce(on)
	if err == nil || !strings.Contains(err.Error(), "vSphere has no serial console") || !strings.Contains(err.Error(), "webconsole") {
		t.Errorf("console of %s: %v; want refused with a reason naming webconsole", on.Name, err)
	} else {
		t.Logf("console of %s: %v", on.Name, err)
	}
}

// webConsoleVM makes a VM on the webconsole Provider in power state
// power, and waits for vcsim to hold it so.
func webConsoleVM(t *testing.T, name string, power v1alpha1.PowerState) *v1alpha1.VirtualMachine {
	t.Helper()
	ctx := context.Background()
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "webconsole-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
		DesiredPowerState: power,
		Placement:         &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"webconsole": "yes"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	vcState := map[v1alpha1.PowerState]string{v1alpha1.PowerStatePoweredOn: "poweredOn", v1alpha1.PowerStatePoweredOff: "poweredOff"}[power]
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if vm.Status.InfrastructureRef == nil || vm.Status.PowerState != power {
			return fmt.Errorf("VM %s: power %q, conditions %+v", name, vm.Status.PowerState, vm.Status.Conditions)
		}
		vsm := &infrav1.VSphereMachine{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: vm.Status.InfrastructureRef.Name}, vsm); err != nil {
			return err
		}
		if vsm.Spec.ProviderID == "" {
			return fmt.Errorf("machine %s not built", vsm.Name)
		}
		if m := vcVM(t, vsm.Spec.Datacenter, providers.BackendName(ns, name)); m == nil || string(m.Runtime.PowerState) != vcState {
			return fmt.Errorf("vcsim VM %s not %s", name, vcState)
		}
		return nil
	})
	return vm
}

// attachOnce attaches to vm's serial console through kube-apiserver as
// client-go's websocket executor does (kubectl banlieue console), and
// returns how it ended.
func attachOnce(vm *v1alpha1.VirtualMachine) error {
	u := env.Admin.Host + "/apis/banlieue.io/v1alpha1/namespaces/" + vm.Namespace + "/virtualmachines/" + vm.Name + "/console"
	exec, err := remotecommand.NewWebSocketExecutor(rest.CopyConfig(env.Admin), "GET", u)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var out bytes.Buffer
	err = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: io.NopCloser(strings.NewReader("")), Stdout: &out, Tty: true})
	if err == nil {
		return fmt.Errorf("attached (read %q)", out.String())
	}
	return err
}
