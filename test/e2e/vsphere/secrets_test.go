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
	"os"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/test/reliability/table"
)

// TestCredentialsNeverLeak runs after the package's other tests (its file
// sorts last), when the provider has logged in to vcsim with the vCenter
// password many times: the password appears in no banlieue.io response
// (objects, /resolved, /placement), no infrastructure object, no Event and
// no process log, in clear or base64.
func TestCredentialsNeverLeak(t *testing.T) {
	ctx := context.Background()
	needles := [][]byte{[]byte(password), []byte(base64.StdEncoding.EncodeToString([]byte(password)))}
	check := func(where string, data []byte) {
		t.Helper()
		for _, n := range needles {
			if bytes.Contains(data, n) {
				t.Errorf("the vCenter password (%q) appears in %s", n, where)
			}
		}
	}
	logs, err := filepath.Glob(filepath.Join(env.Logs(), "*.log"))
	if err != nil || len(logs) == 0 {
		t.Fatalf("no process logs in %s: %v", env.Logs(), err)
	}
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
	t.Logf("searched %d logs, banlieue.io and infrastructure objects, Events and the subresources of %d VMs", len(logs), len(vms.Items))
	reliability.Record(t, table.Row{Scenario: "the vCenter password (clear or base64) in no process log, banlieue.io or infrastructure object, Event, /resolved or /placement",
		Operations: 1, Faults: "search after every other vSphere test"})
}
