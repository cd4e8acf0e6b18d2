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
package reliability

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

var apiServices = schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"}

// kubectl runs the real kubectl as the administrator.
func kubectl(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	return kubectlIn(t, "", args...)
}

// kubectlIn is kubectl with stdin.
func kubectlIn(t *testing.T, stdin string, args ...string) (string, string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(root, "bin", "kubectl"), append([]string{"--kubeconfig=" + env.AdminKubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	return out.String(), errOut.String(), err
}

// apiServiceAvailable returns the APIService's Available condition.
func apiServiceAvailable(ctx context.Context, t *testing.T) (status, reason, message string) {
	t.Helper()
	dc, err := dynamic.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}
	u, err := dc.Resource(apiServices).Get(ctx, "v1alpha1.banlieue.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == "Available" {
			return fmt.Sprint(m["status"]), fmt.Sprint(m["reason"]), fmt.Sprint(m["message"])
		}
	}
	return "", "", ""
}

// TestBanlieueDownClusterStaysUp: with banlieue down, kube-apiserver stays
// ready, kubectl keeps working for other APIs, the APIService says why it
// is not Available, and a namespace holding VMs finishes deleting once
// banlieue is back.
func TestBanlieueDownClusterStaysUp(t *testing.T) {
	ctx := context.Background()
	const ns = "outage-doomed"
	namespace(t, ns)
	if _, err := client.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, testVM(ns, "vm-1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	kube, err := kubernetes.NewForConfig(env.Admin)
	if err != nil {
		t.Fatal(err)
	}

	env.CrashBanlieue()
	restarted := false
	defer func() {
		if !restarted {
			_ = env.StartBanlieue(ctx)
		}
	}()
	eventually(t, time.Minute, func() error {
		if st, reason, msg := apiServiceAvailable(ctx, t); st != "False" || reason == "" || msg == "" {
			return fmt.Errorf("APIService Available=%s reason %q message %q", st, reason, msg)
		}
		return nil
	})
	_, reason, msg := apiServiceAvailable(ctx, t)
	t.Logf("APIService not Available: %s: %s", reason, msg)

	// The requests made of the cluster while banlieue is down, each
	// counted once it is answered.
	var answered count.Ops
	body, err := kube.CoreV1().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	answered.Done("GET /readyz", err)
	if err != nil {
		t.Errorf("kube-apiserver /readyz with banlieue down: %v %s", err, body)
	}
	out, errOut, err := kubectl(t, "get", "pods", "-A")
	if err != nil {
		t.Errorf("kubectl get pods with banlieue down: %v\n%s%s", err, out, errOut)
	} else {
		answered.Answered("kubectl get pods")
	}
	// banlieue.io itself answers 503 through kube-apiserver, saying why.
	body, err = kube.CoreV1().RESTClient().Get().AbsPath("/apis/banlieue.io/v1alpha1/namespaces", ns, "virtualmachines").DoRaw(ctx)
	answered.Done("list VMs", err)
	if !apierrors.IsServiceUnavailable(err) {
		t.Errorf("listing VMs with banlieue down: want 503 Service Unavailable, got %v %s", err, body)
	}

	if _, errOut, err := kubectl(t, "delete", "namespace", ns, "--wait=false"); err != nil {
		t.Fatalf("deleting the namespace: %v %s", err, errOut)
	}
	answered.Answered("kubectl delete namespace")
	// The namespace controller cannot enumerate banlieue.io: it waits, and
	// says so.
	eventually(t, time.Minute, func() error {
		got, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range got.Status.Conditions {
			if c.Type == "NamespaceDeletionDiscoveryFailure" && c.Status == "True" {
				answered.Answered("the namespace says why it waits")
				return nil
			}
		}
		return fmt.Errorf("namespace conditions: %+v", got.Status.Conditions)
	})

	if err := env.StartBanlieue(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 2*time.Minute, func() error {
		if _, err := kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s still there (%v)", ns, err)
		}
		answered.Answered("the namespace deleted")
		return nil
	})
	if st, _, _ := apiServiceAvailable(ctx, t); st != "True" {
		t.Errorf("APIService Available=%s after banlieue returned", st)
	}
	record(t, row{Scenario: "banlieue down: kube-apiserver ready, kubectl get pods works, APIService not Available with a reason, namespace deletion resumes",
		Operations: answered.N(), Faults: "SIGKILL of banlieue until restarted"})
}

// direct is a client of banlieue's own port, so an etcd outage is seen by
// banlieue alone (kube-apiserver shares that etcd).
func direct(t *testing.T, timeout time.Duration) (*restclient.Config, clientset.Interface) {
	t.Helper()
	cfg := env.Direct()
	cfg.Timeout = timeout
	c, err := clientset.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cfg, c
}

// TestEtcdOutageRecovers: etcd is killed for 10 s while a client writes to
// banlieue. Writes fail with a clear server error or time out, /readyz says
// not ready, and once etcd is back banlieue serves again without a
// restart; every acknowledged write is there.
func TestEtcdOutageRecovers(t *testing.T) {
	ctx := context.Background()
	const ns = "etcd-outage"
	namespace(t, ns)
	cfg, c := direct(t, 3*time.Second)
	vms := c.BanlieueV1alpha1().VirtualMachines(ns)
	readyz := func() (int, string) {
		cfg := restclient.CopyConfig(cfg)
		cfg.Timeout = 30 * time.Second // /readyz waits for its etcd check's own timeout
		hc, err := restclient.HTTPClientFor(cfg)
		if err != nil {
			t.Fatal(err)
		}
		resp, err := hc.Get(env.BanlieueURL + "/readyz?verbose")
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		var b bytes.Buffer
		_, _ = b.ReadFrom(resp.Body)
		return resp.StatusCode, b.String()
	}

	acked, attempts := map[string]types.UID{}, 0
	var answered count.Ops // the writes answered, 5xx included
	create := func(i int) error {
		attempts++
		vm, err := vms.Create(ctx, testVM(ns, vmName(i)), metav1.CreateOptions{})
		answered.Done(vmName(i), err)
		if err == nil {
			acked[vm.Name] = vm.UID
		}
		return err
	}
	i := 0
	for ; i < 20; i++ {
		if err := create(i); err != nil {
			t.Fatal(err)
		}
	}

	env.CrashEtcd()
	restarted := false
	defer func() {
		if !restarted {
			_ = env.StartEtcd(ctx)
		}
	}()
	down := time.Now()
	failed, clear := 0, 0
	for time.Since(down) < 10*time.Second {
		err := create(i)
		i++
		if err == nil {
			continue // the write may have raced the kill
		}
		failed++
		var status apierrors.APIStatus
		if errors.As(err, &status) && status.Status().Code >= 500 || isTimeout(err) {
			clear++
		} else {
			t.Errorf("write during the outage: want a 5xx or a timeout, got %v", err)
		}
	}
	code, body := readyz()
	if code == http.StatusOK {
		t.Errorf("/readyz during the etcd outage: 200\n%s", body)
	} else if !strings.Contains(body, "etcd") {
		t.Errorf("/readyz during the etcd outage (%d) does not name etcd:\n%s", code, body)
	}

	if err := env.StartEtcd(ctx); err != nil {
		t.Fatal(err)
	}
	restarted = true
	eventually(t, 2*time.Minute, func() error {
		if code, body := readyz(); code != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", code, body)
		}
		return create(i)
	})
	lost := count.Lost(acked, storedUIDs(ctx, t, vms))
	if len(lost) > 0 {
		t.Errorf("%d acknowledged writes are not stored with their UID: %v", len(lost), lost)
	}
	t.Logf("%d writes attempted, %d answered, %d failed during the outage (%d with a 5xx or timeout); %d acknowledged in all", attempts, answered.N(), failed, clear, len(acked))
	if failed == 0 {
		t.Error("no write failed: etcd was not down")
	}
	record(t, row{Scenario: "etcd killed for 10 s under writes to banlieue: 5xx/timeouts, /readyz not ready, recovery without restarting banlieue",
		Operations: answered.N(), Faults: "SIGKILL of etcd for 10 s", Lost: table.Counted(len(lost))})
}

func isTimeout(err error) bool {
	var to interface{ Timeout() bool }
	return errors.As(err, &to) && to.Timeout() || errors.Is(err, context.DeadlineExceeded) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err)
}
