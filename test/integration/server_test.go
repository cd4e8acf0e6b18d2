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

// Package integration runs the real banlieue API server in-process, on a
// real embedded etcd, and drives it through the generated clientset and raw
// REST calls. No fakes: every request crosses HTTPS, authentication,
// admission, the registry and etcd.
package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"
	cliflag "k8s.io/component-base/cli/flag"

	"github.com/firestoned/banlieue/pkg/cmd/apiserver"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"sigs.k8s.io/yaml"
)

// testServer is a running in-process banlieue API server.
type testServer struct {
	Config  *restclient.Config
	Client  clientset.Interface
	DataDir string
	// EtcdURL is the embedded etcd's client URL, for tests that read storage.
	EtcdURL string
	stop    func()
}

// startServer starts a standalone server whose embedded etcd keeps its data
// in dataDir, and stops it when the test ends (or when stop is called).
func startServer(t testing.TB, dataDir string, extraFlags ...string) *testServer {
	t.Helper()
	o := apiserver.NewOptions()
	o.Standalone = true
	o.EmbeddedEtcdDataDir = dataDir
	listener, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.RecommendedOptions.SecureServing.Listener = listener
	o.RecommendedOptions.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	applyFlags(t, o, extraFlags)
	if err := o.Complete(); err != nil {
		t.Fatalf("options: %v", err)
	}
	if err := o.Validate(); err != nil {
		t.Fatalf("options: %v", err)
	}
	s, err := o.NewServer()
	if err != nil {
		t.Fatalf("new server: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()

	cfg := restclient.CopyConfig(s.LoopbackClientConfig)
	cfg.QPS, cfg.Burst = 1000, 1000
	client := clientset.NewForConfigOrDie(cfg)
	if err := wait.PollUntilContextTimeout(context.Background(), 50*time.Millisecond, 60*time.Second, true, func(ctx context.Context) (bool, error) {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok", nil
	}); err != nil {
		cancel()
		t.Fatalf("server not ready: %v", err)
	}
	stopped := false
	ts := &testServer{Config: cfg, Client: client, DataDir: dataDir,
		EtcdURL: o.RecommendedOptions.Etcd.StorageConfig.Transport.ServerList[0]}
	ts.stop = func() {
		if stopped {
			return
		}
		stopped = true
		cancel()
		// The server's graceful shutdown is bounded by its request timeout
		// (60 s). It reaches that bound when a connection is accepted while
		// shutdown begins: net/http's HTTP/2 server tells only the
		// connections it already tracks to go away, so one that its own
		// loopback informers open while reconnecting keeps the server
		// waiting. The server still stops at the bound; stopping later than
		// that is the failure.
		start := time.Now()
		select {
		case <-done:
			if d := time.Since(start); d > 10*time.Second {
				t.Logf("the server took %s to stop (its graceful shutdown waited for a connection accepted during shutdown)", d.Round(time.Second))
			}
		case <-time.After(90 * time.Second):
			t.Errorf("server did not stop within 90s (its shutdown is bounded by its 60-s request timeout)")
		}
	}
	t.Cleanup(ts.stop)
	return ts
}

func applyFlags(t testing.TB, o *apiserver.Options, args []string) {
	t.Helper()
	fss := &cliflag.NamedFlagSets{}
	o.AddFlags(fss)
	fs := pflag.NewFlagSet("test", pflag.ContinueOnError)
	for _, set := range fss.FlagSets {
		fs.AddFlagSet(set)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatalf("flags %v: %v", args, err)
	}
}

// readExample decodes one file of artifacts/examples into obj.
func readExample(t *testing.T, name string, obj interface{}) {
	t.Helper()
	if err := decodeExample(name, obj); err != nil {
		t.Fatal(err)
	}
}

// readExampleNoT is readExample for places without a *testing.T; the
// examples are part of the repository, so failing to read one is a bug.
func readExampleNoT(name string, obj interface{}) {
	if err := decodeExample(name, obj); err != nil {
		panic(err)
	}
}

func decodeExample(name string, obj interface{}) error {
	data, err := os.ReadFile(filepath.Join("..", "..", "artifacts", "examples", name))
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(data, obj); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	return nil
}
