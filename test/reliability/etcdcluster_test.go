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
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/test/reliability/count"
	"github.com/firestoned/banlieue/test/reliability/table"
)

// TestEtcdMemberLossKeepsServing: with a 3-member etcd cluster behind
// kube-apiserver and banlieue, SIGKILLing one member mid-stream leaves a
// quorum: every create through kube-apiserver is acknowledged (retried at
// most across the member's loss) and stored.
func TestEtcdMemberLossKeepsServing(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cl, c := ownEnv(ctx, t, devenv.Config{EtcdMembers: 3})
	const ns = devenv.Namespace
	vms := c.BanlieueV1alpha1().VirtualMachines(ns)
	total := size(100, 1000)
	acked, retries := map[string]types.UID{}, 0
	var creates count.Ops
	for i := range total {
		if i == total/3 {
			cl.CrashEtcdMember(2)
		}
		name := fmt.Sprintf("quorum-%04d", i)
		for attempt := 0; ; attempt++ {
			vm, err := vms.Create(ctx, testVM(ns, name), metav1.CreateOptions{})
			creates.Done(name, err)
			if err == nil {
				acked[name] = vm.UID
			}
			if err == nil || apierrors.IsAlreadyExists(err) {
				break // AlreadyExists: an earlier attempt's reply was lost, not its write
			}
			if attempt == 20 {
				t.Fatalf("%s not created after 20 attempts with one etcd member down: %v", name, err)
			}
			retries++
			time.Sleep(250 * time.Millisecond)
		}
	}
	lost := count.Lost(acked, storedUIDs(ctx, t, vms))
	if len(lost) > 0 {
		t.Errorf("%d acknowledged creates are not stored with their UID: %v", len(lost), lost)
	}
	t.Logf("%d creates with one of three etcd members killed after %d; %d attempts retried", total, total/3, retries)
	record(t, row{Scenario: "3-member etcd, one member SIGKILLed under a stream of creates through kube-apiserver: writes keep being served",
		Operations: creates.N(), Faults: "SIGKILL of one etcd member of three", Lost: table.Counted(len(lost))})
}

// ownEnv starts an environment of its own for one scenario (stopped when
// the test ends), with an unthrottled client.
func ownEnv(ctx context.Context, t *testing.T, cfg devenv.Config) (*devenv.Env, clientset.Interface) {
	t.Helper()
	cfg.Dir, cfg.BinDir, cfg.Setup = t.TempDir(), filepath.Join(root, "bin"), dev.InstallRBAC
	e, err := devenv.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	rc := restclient.CopyConfig(e.Admin)
	rc.QPS, rc.Burst = -1, 0
	c, err := clientset.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	return e, c
}
