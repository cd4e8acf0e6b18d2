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

// Package vsphere runs the shipped vSphere provider against govmomi's
// vCenter simulator (vcsim, in the test process) in pod mode
// (devenv.NodeSuite): banlieue's API server runs as a process, and the
// shipped controller, vSphere provider and (TestOperatorWorkloads)
// operator Deployments run as pods of the release image on a real node,
// as do the provider workloads the operator renders. vcsim and the
// tests' image servers listen on loopback and are exposed to the pods on
// the node's gateway (devenv.ExposeURL); vcsim's certificate names that
// address. The crash tests SIGKILL the leading provider pod's container
// (devenv.KillContainer) and the kubelet starts it again. No test runs a
// component as a process: each crash or stop a test needs is one a pod
// can have too. The pods' logs are copied into files as they are written
// (devenv.FollowLogs) for logscan and the credentials leak search.
package vsphere

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/devenv/logscan"
	"github.com/firestoned/banlieue/pkg/pki"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
	"github.com/firestoned/banlieue/test/reliability/table"
)

const (
	ns       = devenv.Namespace
	user     = "administrator@vsphere.local"
	password = "REPLACE-ME"
	// providerDeployment is the shipped vSphere provider Deployment's
	// name, and the name of the Lease its replicas take turns through.
	providerDeployment = "banlieue-provider-vsphere"
	// providerSelector picks its pods.
	providerSelector = "app.kubernetes.io/name=banlieue,app.kubernetes.io/component=provider-vsphere"
)

var (
	model *simulator.Model
	env   *devenv.Env
	c     client.Client
	// endpoint is vcsim's SDK URL as the provider pods reach it (the
	// node's gateway): what Providers name. vcURL is the same server on
	// loopback, for the test's own sessions.
	endpoint, vcURL string
	caPEM           []byte
	root            string
	kubectlBin      string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	stopVCSim := func() {}
	code := devenv.NodeSuite{Name: "vsphere", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC}, ScanPodLogs: true,
		Ready: func(e *devenv.Env) error {
			env = e
			var err error
			if stopVCSim, err = startVCSim(); err != nil {
				return fmt.Errorf("vcsim: %w", err)
			}
			scheme, err := controllers.Scheme()
			if err != nil {
				return err
			}
			// No client-side throttling: the crash scenarios watch tasks
			// of a couple of seconds across tens of machines.
			cfg := rest.CopyConfig(env.Admin)
			cfg.QPS = -1
			if c, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
				return err
			}
			if err := installController(); err != nil {
				return fmt.Errorf("the controller: %w", err)
			}
			if err := installProvider(); err != nil {
				return fmt.Errorf("the vSphere provider: %w", err)
			}
			return nil
		}}.Run(m)
	stopVCSim()
	if code != 0 {
		return code
	}
	if !table.Partial() {
		if err := reliability.Write(table.Path(root)); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
	return 0
}

// startVCSim serves vcsim on loopback, 2 datacenters x 3 clusters = 6
// failure domains, enforced credentials, with a certificate that also
// names the node's gateway, where the provider pods reach it (exposed
// there: endpoint). It returns what stops it.
func startVCSim() (stop func(), err error) {
	model = simulator.VPX()
	model.Datacenter, model.Cluster = 2, 3
	if err := model.Create(); err != nil {
		return nil, err
	}
	// AcquireTicket, which govmomi's simulator lacks, for the web console.
	vcsim.AcquireTickets(model)
	model.Service.Listen = &url.URL{User: url.UserPassword(user, password)}
	cert, ca, err := pki.LoopbackServing("vcsim", []net.IP{net.ParseIP(env.NodeGateway())})
	if err != nil {
		model.Remove()
		return nil, err
	}
	model.Service.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	vc := model.Service.NewServer()
	vc.Server.Config.Handler = failLookups(vc.Server.Config.Handler)
	stop = func() {
		// A provider SIGKILLed while it waited on a task leaves a long
		// poll vcsim never ends: closing gives up on it.
		vcsim.CloseServer(vc, 30*time.Second)
		model.Remove()
	}
	vcURL, caPEM = "https://"+vc.URL.Host+"/sdk", ca
	if endpoint, err = env.ExposeURL(vcURL); err != nil {
		stop()
		return nil, err
	}
	// An import uploads its disks to the URLs of an NFC lease, which
	// vcsim makes of its own URL (where a vCenter names the ESX host): the
	// address the pods reach it at, not its loopback one.
	model.Map().OptionManager().UpdateOptions(&types.UpdateOptions{ChangedValue: []types.BaseOptionValue{
		&types.OptionValue{Key: "vcsim.server.url", Value: endpoint}}})
	return stop, nil
}

// installController applies the shipped controller Deployment as it is,
// copies its pods' logs from then on, and waits for its rollout.
func installController() error {
	if out, err := env.Kubectl("", "apply", "-f", filepath.Join(root, "artifacts", "deploy", "base", "deployment-controller.yaml")); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	if err := env.FollowLogs(ns, "app.kubernetes.io/name=banlieue,app.kubernetes.io/component=controller", "controller"); err != nil {
		return err
	}
	return env.RolloutStatus(context.Background(), ns, "banlieue-controller", 2*time.Minute)
}

// providerSettings are the shipped provider ConfigMap's keys an
// administrator of this vCenter changes (the ConfigMap is where the
// provider's flags are set, config.yaml says):
//   - BANLIEUE_RESYNC: vcsim's inventory changes under the tests (clusters
//     added, templates marked, faults injected and removed), and they wait
//     for the provider to see each change; the shipped 5m would have them
//     wait minutes for what a walk every 2 s sees at once.
//   - BANLIEUE_CONSOLE_BIND_ADDRESS: the web console endpoint is off as
//     shipped; TestWebConsoleThroughTheAPI reaches it through banlieue's
//     API server.
const providerSettings = `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_CONSOLE_BIND_ADDRESS":":8444"}}`

// installProvider applies the shipped vSphere provider's ConfigMap, with
// this install's settings (providerSettings), and Deployment, copies its
// pods' logs from then on and waits for its rollout.
func installProvider() error {
	if err := env.ApplyProvider(root, "vsphere", providerSettings); err != nil {
		return err
	}
	if err := env.FollowLogs(ns, providerSelector, "provider-vsphere"); err != nil {
		return err
	}
	return env.RolloutStatus(context.Background(), ns, providerDeployment, 2*time.Minute)
}

// reconcileErrors are the "Reconciler error" lines containing substr in
// the copied logs of the pods whose files match glob.
func reconcileErrors(glob, substr string) ([]string, error) {
	return logscan.ReconcileErrors(env.PodLogs(), glob, substr)
}

// podURL is rawURL, a server of the test on loopback, as the node's pods
// reach it (devenv.ExposeURL).
func podURL(t *testing.T, rawURL string) string {
	t.Helper()
	u, err := env.ExposeURL(rawURL)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// reliability holds this package's rows of the reliability table
// (bin/reliability.md; docs/reliability.md once make reliability-doc
// copies it).
var reliability = &table.Table{Owner: "vsphere"}

// lookupFault, while set, makes vcsim fail every read of a VM's
// (summary.)config.template: what a template check does, and nothing else the
// provider does (logging in, walking the inventory) needs. vcsim's own
// fault rules match only the method and its target, the PropertyCollector
// for every read.
var lookupFault atomic.Bool

func failLookups(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if lookupFault.Load() && r.Body != nil {
			body, _ := io.ReadAll(r.Body)
			if bytes.Contains(body, []byte("config.template</pathSet>")) {
				w.Header().Set("Content-Type", "text/xml; charset=utf-8")
				w.WriteHeader(http.StatusInternalServerError)
				fmt.Fprint(w, `<?xml version="1.0" encoding="UTF-8"?><soapenv:Envelope xmlns:soapenv="http://schemas.xmlsoap.org/soap/envelope/">`+
					`<soapenv:Body><soapenv:Fault><faultcode>ServerFaultCode</faultcode><faultstring>injected lookup failure</faultstring>`+
					`</soapenv:Fault></soapenv:Body></soapenv:Envelope>`)
				return
			}
			r.Body = io.NopCloser(bytes.NewReader(body))
		}
		next.ServeHTTP(w, r)
	})
}
