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

package monitoring

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

const ns = devenv.Namespace

var (
	root string
	env  *devenv.Env
	cs   *kubernetes.Clientset
	c    client.Client
	sim  *pvesim.Simulator
	// simEndpoint is the simulator's API as the provider's pods reach it.
	simEndpoint string
	// scraperToken is a token of a ServiceAccount bound to the shipped
	// banlieue-metrics-reader, as Prometheus's own in a cluster.
	scraperToken string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", ".."))
	code := devenv.NodeSuite{Name: "monitoring", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC},
		Ready: install}.Run(m)
	if sim != nil {
		sim.Close()
	}
	os.Exit(code)
}

// install starts the Proxmox VE simulator the provider's pods reach,
// makes the scraper's identity, and runs the shipped controller and
// Proxmox VE provider Deployments with their metrics Services.
func install(e *devenv.Env) error {
	env = e
	ctx := context.Background()
	var err error
	// The scrapes' discovery lists Services, EndpointSlices, Deployments
	// and pods at each poll: more than client-go's default 5 per second.
	cfg := rest.CopyConfig(env.Admin)
	cfg.QPS, cfg.Burst = 100, 200
	if cs, err = kubernetes.NewForConfig(cfg); err != nil {
		return err
	}
	if c, err = env.ServedClient(ctx); err != nil {
		return err
	}
	// The documented least-privilege token, on a release that imports
	// disk images, reached on the bridge's gateway (its certificate names
	// that address).
	sim = pvesim.New(pvesim.Options{TaskDelay: 100 * time.Millisecond, AgentDelay: 500 * time.Millisecond, ACL: dev.ProxmoxACL(),
		Version: dev.ProxmoxVersion, Nodes: dev.ProxmoxNodes(), ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}})
	if simEndpoint, err = env.ExposeURL(sim.URL); err != nil {
		return err
	}
	// Bound as docs/metrics.md has Prometheus's bound; it goes with the
	// environment.
	if scraperToken, _, err = env.MetricsReaderToken(ns, "prometheus"); err != nil {
		return err
	}
	if err := applyController(); err != nil {
		return err
	}
	if err := applyProxmoxProvider(); err != nil {
		return err
	}
	return env.RolledOut(ctx, ns, 2*time.Minute, "banlieue-controller", "banlieue-provider-proxmox")
}

// applyController applies the shipped controller Deployment and its
// metrics Service (artifacts/deploy/base's kustomization) as they are.
func applyController() error {
	base := filepath.Join(root, "artifacts", "deploy", "base")
	args := []string{"apply", "-f", filepath.Join(base, "deployment-controller.yaml"), "-f", filepath.Join(base, "service-controller.yaml")}
	if out, err := env.Kubectl("", args...); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	return nil
}

// providerSettings are what this suite changes of the shipped Proxmox VE
// provider's ConfigMap, as its administrator would (each key a flag's
// default): the inventory re-walked every 2s rather than 5m, so a
// changed Secret is reconnected within the test; tasks polled every 50ms
// rather than 500ms, so clones settle fast; and the console endpoint on,
// which the shipped configuration leaves off (docs/console.md), so that
// a refused attach can be counted.
const providerSettings = `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_TASK_POLL":"50ms","BANLIEUE_CONSOLE_BIND_ADDRESS":":8444"}}`

// applyProxmoxProvider applies the shipped Proxmox VE provider's
// configuration (edited as an administrator edits a manifest before
// applying it: providerSettings) and Deployment (env.ApplyProvider; its
// RBAC is the environment's, dev.InstallRBAC), and its metrics Service.
// The console endpoint publishes the pod's address, which the shipped
// Deployment gives it (POD_IP).
func applyProxmoxProvider() error {
	if err := env.ApplyProvider(root, "proxmox", providerSettings); err != nil {
		return err
	}
	service := filepath.Join(root, "artifacts", "deploy", "providers", "proxmox", "service.yaml")
	if out, err := env.Kubectl("", "apply", "-f", service); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	return nil
}
