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
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

// TestCredentialsNeverLeak runs after the package's other tests (its file
// sorts last), when the provider has logged in to vcsim with the vCenter
// password many times: the password appears in no banlieue.io response
// (objects, /resolved, /placement), no infrastructure object, no Event and
// no process or pod log, in clear or base64. The vCenter username appears in
// nothing a tenant reads (VMs and their subresources, Providers, VMImages,
// infrastructure objects, Events): only in the provider's log, where a
// failed login is explained.
func TestCredentialsNeverLeak(t *testing.T) {
	ctx := context.Background()
	leakyLogin(t)
	needles := [][]byte{[]byte(password), []byte(base64.StdEncoding.EncodeToString([]byte(password)))}
	// searched counts every log and response read and searched, each once.
	var searched count.Ops
	check := func(where string, data []byte) {
		t.Helper()
		searched.Answered(where)
		for _, n := range needles {
			if bytes.Contains(data, n) {
				t.Errorf("the vCenter password (%q) appears in %s", n, where)
			}
		}
	}
	// The processes' logs (kube-apiserver, banlieue's API server, ...)
	// and the pods' (the controller, the providers, the operator and its
	// workloads), copied as they were written.
	processLogs, err := filepath.Glob(filepath.Join(env.Logs(), "*.log"))
	if err != nil || len(processLogs) == 0 {
		t.Fatalf("no process logs in %s: %v", env.Logs(), err)
	}
	podLogFiles, err := filepath.Glob(filepath.Join(env.PodLogs(), "*.log"))
	if err != nil || len(podLogFiles) == 0 {
		t.Fatalf("no pod logs in %s: %v", env.PodLogs(), err)
	}
	logs := append(processLogs, podLogFiles...)
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		check(filepath.Base(l), data)
	}

	kube, err := kubernetes.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	raw := func(path string) []byte {
		t.Helper()
		body, err := kube.CoreV1().RESTClient().Get().AbsPath(path).DoRaw(ctx)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		searched.Answered(path)
		return body
	}
	for _, path := range []string{
		"/apis/banlieue.io/v1alpha1/providers", "/apis/banlieue.io/v1alpha1/virtualmachines",
		"/apis/banlieue.io/v1alpha1/vmclasses", "/apis/banlieue.io/v1alpha1/vmimages",
		"/apis/infrastructure.banlieue.io/v1alpha1/vspheremachines", "/apis/infrastructure.banlieue.io/v1alpha1/vsphereclusters",
		"/api/v1/events", "/apis/events.k8s.io/v1/events",
	} {
		check(path, raw(path))
	}
	bc, err := clientset.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	vms, err := bc.BanlieueV1alpha1().VirtualMachines(metav1.NamespaceAll).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, vm := range vms.Items {
		base := "/apis/banlieue.io/v1alpha1/namespaces/" + vm.Namespace + "/virtualmachines/" + vm.Name
		check(base+"/resolved", raw(base+"/resolved"))
		check(base+"/placement", raw(base+"/placement"))
	}
	// The Secret itself is where the password lives: the check can fail.
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, s := range secrets.Items {
		found = found || string(s.Data["password"]) == password
	}
	if !found {
		t.Errorf("no Secret in %s holds the password: the search above proves nothing", ns)
	}
	// The username: nowhere a tenant reads.
	for _, path := range []string{
		"/apis/banlieue.io/v1alpha1/providers",
		"/apis/banlieue.io/v1alpha1/virtualmachines", "/apis/banlieue.io/v1alpha1/vmimages", "/apis/banlieue.io/v1alpha1/vmclasses",
		"/apis/infrastructure.banlieue.io/v1alpha1/vspheremachines", "/apis/infrastructure.banlieue.io/v1alpha1/vsphereclusters",
		"/api/v1/events", "/apis/events.k8s.io/v1/events",
	} {
		if bytes.Contains(raw(path), []byte(user)) {
			t.Errorf("the vCenter username %q appears in %s", user, path)
		}
	}
	for _, vm := range vms.Items {
		base := "/apis/banlieue.io/v1alpha1/namespaces/" + vm.Namespace + "/virtualmachines/" + vm.Name
		for _, sub := range []string{"/resolved", "/placement"} {
			if bytes.Contains(raw(base+sub), []byte(user)) {
				t.Errorf("the vCenter username %q appears in %s", user, base+sub)
			}
		}
	}
	// ... and the provider's log is where the details belong, so the
	// search can fail.
	inLog := false
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			t.Fatal(err)
		}
		inLog = inLog || bytes.Contains(data, []byte(user))
	}
	if !inLog {
		t.Errorf("the failed login's details (the username) are in no log: the search above proves nothing")
	}
	t.Logf("searched %d logs, banlieue.io and infrastructure objects, Events and the subresources of %d VMs", len(logs), len(vms.Items))
	reliability.Record(t, table.Row{Scenario: "the vCenter password (clear or base64) in no process or pod log, banlieue.io or infrastructure object, Event, /resolved or /placement; the username in nothing a tenant reads (after a failed login a VM waits on)",
		Operations: searched.N(), Faults: "search after every other vSphere test"})
}

// leakyLogin makes the login error that used to travel: a Provider whose
// password is wrong (ConnectFailed: the message names host and username)
// is the only candidate of a VM, which waits for it, and of an image.
func leakyLogin(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	ensureImage(t, "ubuntu-22.04-cloudinit")
	secret(t, ns, "leak-creds", map[string]string{"username": user, "password": "not-" + password})
	p := provider("leak-vsphere", "leak-creds", nil)
	p.Labels = map[string]string{"leak": "yes"}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "leak-vsphere", "ConnectFailed")
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "leak-class"},
		Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "leak-vm", Namespace: ns},
		Spec: v1alpha1.VirtualMachineSpec{ClassRef: v1alpha1.LocalObjectReference{Name: "leak-class"},
			ImageRef:  v1alpha1.LocalObjectReference{Name: "ubuntu-22.04-cloudinit"},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"leak": "yes"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled)
		if cond == nil || cond.Status != metav1.ConditionFalse || !strings.Contains(cond.Message, "ConnectFailed") {
			return fmt.Errorf("leak-vm Scheduled: %+v, want False naming ConnectFailed", cond)
		}
		return nil
	})
}
