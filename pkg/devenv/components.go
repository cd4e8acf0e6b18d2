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

package devenv

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/firestoned/banlieue/pkg/loopback"
)

// banlieue's components as processes: the aggregated API server's
// replicas, the controller, the providers and the operator, each with
// the identity the shipped RBAC gives it.

// StartVSphereProvider starts "banlieue provider vsphere" for the
// environment's namespace, authenticated as its ServiceAccount, re-walking
// inventories every resync. Extra flags follow the environment's.
func (e *Env) StartVSphereProvider(name string, resync time.Duration, extra ...string) (Process, error) {
	return e.StartProvider("vsphere", name, resync, extra...)
}

// ProviderUserOf is the ServiceAccount user of class's provider.
func ProviderUserOf(class string) string {
	return "system:serviceaccount:" + Namespace + ":banlieue-provider-" + class
}

// StartProvider starts "banlieue provider CLASS" for the environment's
// namespace, authenticated as the class's ServiceAccount, re-walking
// inventories every resync. Extra flags follow the environment's.
func (e *Env) StartProvider(class, name string, resync time.Duration, extra ...string) (Process, error) {
	kubeconfig, err := e.serviceAccountKubeconfig("provider-"+class, ProviderUserOf(class))
	if err != nil {
		return Process{}, err
	}
	args := append([]string{"provider", class, "--kubeconfig=" + kubeconfig, "--namespace=" + Namespace, "--resync=" + resync.String(),
		"--metrics-bind-address=0", "--health-probe-bind-address=0",
		"--console-bind-address=127.0.0.1:0", "--console-advertise-host=127.0.0.1"}, extra...)
	p, err := e.startProcess(name, filepath.Join(e.cfg.BinDir, "banlieue"), args...)
	return Process{p}, err
}

// StartController starts replica i of "banlieue controller", authenticated
// as the controller's ServiceAccount. Extra flags follow the environment's.
func (e *Env) StartController(i int, extra ...string) (Process, error) {
	kubeconfig, err := e.serviceAccountKubeconfig("controller", ControllerUser)
	if err != nil {
		return Process{}, err
	}
	args := append([]string{"controller", "--kubeconfig=" + kubeconfig, "--leader-elect", "--leader-election-namespace=" + Namespace,
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, extra...)
	p, err := e.startProcess(fmt.Sprintf("controller-%d", i), filepath.Join(e.cfg.BinDir, "banlieue"), args...)
	return Process{p}, err
}

// StartOperator starts "banlieue operator", authenticated as the
// operator's ServiceAccount, managing the workloads of namespaces. Extra
// flags follow the environment's.
func (e *Env) StartOperator(name string, namespaces []string, extra ...string) (Process, error) {
	kubeconfig, err := e.serviceAccountKubeconfig("operator", OperatorUser)
	if err != nil {
		return Process{}, err
	}
	args := append([]string{"operator", "--kubeconfig=" + kubeconfig, "--leader-election-namespace=" + Namespace,
		"--namespaces=" + strings.Join(namespaces, ","), "--metrics-bind-address=0", "--health-probe-bind-address=0"}, extra...)
	p, err := e.startProcess(name, filepath.Join(e.cfg.BinDir, "banlieue"), args...)
	return Process{p}, err
}

// Leadership reads the /readyz?verbose of a controller, operator or
// provider replica whose probes answer at health ("http://HOST:PORT"):
// "leading" or "standby", as its leader line says; an error unless it
// answers 200 (a standby is ready too) and says one of them.
func Leadership(health string) (string, error) {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(health + "/readyz?verbose")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("%s/readyz: HTTP %d: %s", health, resp.StatusCode, body)
	}
	switch {
	case strings.Contains(string(body), "[+]leader ok: leading\n"):
		return "leading", nil
	case strings.Contains(string(body), "[+]leader ok: standby (waiting for the lease)\n"):
		return "standby", nil
	}
	return "", fmt.Errorf("%s/readyz?verbose says neither leading nor standby: %q", health, body)
}

// StartBanlieue starts every banlieue replica that is not running (again)
// and waits until each is ready. BanlieueURL reaches them all.
func (e *Env) StartBanlieue(ctx context.Context) error {
	replicas := max(e.cfg.BanlieueReplicas, 1)
	if len(e.banlieue) < replicas {
		e.banlieue = make([]*process, replicas)
	}
	e.BanlieueURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.banlieue))
	if err := e.apiServerServiceAccount(ctx); err != nil {
		return err
	}
	if replicas > 1 && e.balancer == nil {
		var backends []string
		for _, port := range e.ports.replicas {
			backends = append(backends, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		b, err := loopback.NewBalancer(net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.banlieue)), backends)
		if err != nil {
			return fmt.Errorf("banlieue balancer: %w", err)
		}
		e.balancer = b
	}
	for i := range replicas {
		if e.banlieue[i] != nil {
			continue
		}
		name, port := "banlieue", e.ports.banlieue
		if replicas > 1 {
			name, port = fmt.Sprintf("banlieue-%d", i), e.ports.replicas[i]
		}
		p, err := e.startBanlieue(name, port)
		if err != nil {
			return err
		}
		e.banlieue[i] = p
		url := "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if err := e.waitHTTPSReady(ctx, p, url, e.BanlieueCA, 2*time.Minute); err != nil {
			return err
		}
	}
	return nil
}

// startBanlieue starts one "banlieue apiserver" process on port.
func (e *Env) startBanlieue(name string, port int) (*process, error) {
	pkiDir := filepath.Join(e.cfg.Dir, "pki")
	kubeconfig := filepath.Join(e.cfg.Dir, "kubeconfigs", "banlieue.kubeconfig")
	args := []string{"apiserver",
		"--bind-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + filepath.Join(pkiDir, "banlieue-serving.crt"),
		"--tls-private-key-file=" + filepath.Join(pkiDir, "banlieue-serving.key"),
		"--etcd-servers=" + e.etcdServers(),
		"--etcd-prefix=" + banlieueEtcdPrefix,
		"--kubeconfig=" + kubeconfig,
		"--authentication-kubeconfig=" + kubeconfig,
		"--authorization-kubeconfig=" + kubeconfig,
		// The admin client certificate's CA is the cluster CA: accept the
		// same client certificates kube-apiserver accepts (direct access).
		"--client-ca-file=" + filepath.Join(pkiDir, "ca.crt"),
		"--console-service-account=" + APIServerNamespace + "/" + ServiceAccount,
	}
	args = append(args, e.cfg.BanlieueArgs...)
	args = append(args, e.banlieueExtra...)
	return e.startProcess(name, filepath.Join(e.cfg.BinDir, "banlieue"), args...)
}
