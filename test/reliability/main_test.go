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

// Package reliability proves that banlieue loses no acknowledged write and
// duplicates nothing under concurrency, crashes and outages, against the
// real processes (pkg/devenv: etcd, kube-apiserver with aggregation, the
// banlieue binary). Every scenario records a row of the reliability table,
// which a passing run rewrites in bin/reliability.md (make reliability-doc
// copies it to docs/). -long (make test-long) runs each scenario at a
// larger size and keeps bin/reliability-long.md instead.
package reliability

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/test/reliability/table"
)

var (
	env    *devenv.Env
	root   string
	client clientset.Interface
)

// size is short in make test, long in make test-long.
var size = table.Size

func TestMain(m *testing.M) {
	flag.Parse()
	// Warnings (a VM's class missing, say) are expected here, not news.
	restclient.SetDefaultWarningHandler(restclient.NoWarnings{})
	os.Exit(run(m))
}

func run(m *testing.M) int {
	wd, _ := os.Getwd()
	root = filepath.Join(wd, "..", "..")
	dir, err := os.MkdirTemp("", "banlieue-reliability-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	encryption, err := writeEncryptionConfig(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = devenv.Start(context.Background(), devenv.Config{Dir: dir, BinDir: filepath.Join(root, "bin"), Setup: dev.InstallRBAC,
		BanlieueArgs: []string{"--encryption-provider-config=" + encryption}})
	if err != nil {
		fmt.Fprintf(os.Stderr, "reliability: starting the environment: %v\n", err)
		dumpLogs(dir)
		return 1
	}
	// The scenarios are many concurrent clients: no client-side throttling.
	cfg := restclient.CopyConfig(env.Admin)
	cfg.QPS, cfg.Burst = -1, 0
	if client, err = clientset.NewForConfig(cfg); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if err := catalogue(context.Background()); err != nil {
		fmt.Fprintln(os.Stderr, err)
		env.Stop()
		return 1
	}
	code := m.Run()
	env.Stop()
	if code != 0 {
		dumpLogs(dir)
		return code
	}
	os.RemoveAll(dir)
	if table.Partial() {
		return 0 // a partial run does not rewrite the table
	}
	if err := results.Write(table.Path(root)); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// writeEncryptionConfig writes an EncryptionConfiguration that encrypts
// every banlieue.io resource with a fresh secretbox key.
func writeEncryptionConfig(dir string) (string, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return "", err
	}
	path := filepath.Join(dir, "encryption.yaml")
	return path, os.WriteFile(path, []byte(`apiVersion: apiserver.config.k8s.io/v1
kind: EncryptionConfiguration
resources:
  - resources: ["*.banlieue.io"]
    providers:
      - secretbox:
          keys: [{name: key1, secret: `+base64.StdEncoding.EncodeToString(key)+`}]
      - identity: {}
`), 0o600)
}

func dumpLogs(dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "logs", "*.log"))
	for _, l := range logs {
		data, _ := os.ReadFile(l)
		if len(data) > 6000 {
			data = data[len(data)-6000:]
		}
		fmt.Fprintf(os.Stderr, "----- %s (tail)\n%s\n", l, data)
	}
}

// row is one scenario's outcome.
type row = table.Row

var results = &table.Table{Owner: "reliability"}

// record adds a scenario's row to the reliability table.
func record(t *testing.T, r row) {
	t.Helper()
	results.Record(t, r)
}

// eventually polls f until it returns nil or timeout passes.
func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %s: %v", timeout, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// storedUIDs is every VM of vms by name, with its UID, from one list.
func storedUIDs(ctx context.Context, t *testing.T, vms vmInterface) map[string]types.UID {
	t.Helper()
	list, err := vms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]types.UID{}
	for _, vm := range list.Items {
		out[vm.Name] = vm.UID
	}
	return out
}
