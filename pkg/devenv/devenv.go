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

// Package devenv runs a small, real Kubernetes control plane with banlieue
// aggregated into it, every part a separate process on loopback: etcd,
// kube-apiserver (aggregation layer, RBAC), kube-controller-manager (the
// namespace and garbage-collector controllers) and the banlieue binary with
// delegated authentication and authorization, registered through an
// APIService whose caBundle is the CA of banlieue's serving certificate.
//
// The end-to-end tests start one per test binary; "banlieue dev" (make run)
// starts a long-lived one whose data survives restarts.
package devenv

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"
	apiregistrationv1 "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	aggregatorclient "k8s.io/kube-aggregator/pkg/client/clientset_generated/clientset"

	"github.com/firestoned/banlieue/pkg/generated/clientset/versioned/scheme"
	"github.com/firestoned/banlieue/pkg/loopback"
	"github.com/firestoned/banlieue/pkg/pki"
)

// Identities of the environment's components. banlieue runs with the
// identity its Deployment's ServiceAccount has in a real cluster, so the
// RBAC in artifacts/deploy is exercised as shipped.
const (
	Namespace = "banlieue-system"
	// APIServerNamespace holds the API server, its etcd and their Secrets,
	// out of reach of every other identity.
	APIServerNamespace = "banlieue-apiserver"
	ServiceAccount     = "banlieue-apiserver"
	BanlieueUser       = "system:serviceaccount:" + APIServerNamespace + ":" + ServiceAccount
	ControllerUser     = "system:serviceaccount:" + Namespace + ":banlieue-controller"
	ProviderUser       = "system:serviceaccount:" + Namespace + ":banlieue-provider-vsphere"
	OperatorUser       = "system:serviceaccount:" + Namespace + ":banlieue-operator"
	APIServiceName     = "v1alpha1.banlieue.io"
	banlieueEtcdPrefix = "/banlieue.io/registry"
	// loopbackService is the ExternalName Service the APIService points at.
	loopbackService = "banlieue-loopback"
)

// Config says where the environment lives and what it runs.
type Config struct {
	// Dir holds data, certificates, kubeconfigs and logs.
	Dir string
	// BinDir holds etcd, kube-apiserver, kube-controller-manager, kubectl and banlieue.
	BinDir string
	// Durable keeps etcd's fsync (make run). Tests turn it off for speed.
	Durable bool
	// Setup applies cluster objects banlieue needs before its APIService is
	// registered (its Namespace and RBAC), through the admin kubeconfig.
	Setup func(ctx context.Context, adminKubeconfig string) error
	// BanlieueArgs are extra arguments for "banlieue apiserver".
	BanlieueArgs []string
	// KubeAPIServerArgs are extra arguments for kube-apiserver (later
	// flags win, so they can override the defaults).
	KubeAPIServerArgs []string
	// Controllers is how many "banlieue controller" replicas to run (with
	// leader election), after the APIService is available.
	Controllers int
	// BanlieueReplicas is how many banlieue API servers share the etcd
	// behind the APIService (1 when unset). With more than one, a
	// balancer on the APIService's port plays the Service.
	BanlieueReplicas int
	// EtcdMembers is the size of the etcd cluster (1 when unset).
	EtcdMembers int
	// ControlPlaneOnly starts etcd, kube-apiserver and
	// kube-controller-manager (and runs Setup), and no banlieue: a cluster
	// to install banlieue into.
	ControlPlaneOnly bool
}

// Env is a running environment.
type Env struct {
	cfg Config
	// AdminKubeconfig reaches kube-apiserver as a cluster administrator.
	AdminKubeconfig string
	// Admin is the REST config of AdminKubeconfig.
	Admin *restclient.Config
	// KubeAPIServerURL is kube-apiserver's https URL.
	KubeAPIServerURL string
	// BanlieueURL is banlieue's own https URL (behind the aggregator).
	BanlieueURL string
	// BanlieueCA is the CA of banlieue's serving certificate.
	BanlieueCA []byte

	ca       *pki.CA
	issued   map[string]bool // kubeconfigs written since this start
	procs    []*process
	banlieue []*process // by replica; nil when down
	// banlieueExtra are RestartBanlieue's arguments, after BanlieueArgs.
	banlieueExtra []string
	balancer      *balancer
	etcd          []*process // by member; nil when down
	ports         ports
}

type ports struct {
	etcdClient, etcdPeer, kubeAPIServer, banlieue int
	// replicas are the banlieue replicas' own ports, behind banlieue's
	// (only with more than one replica).
	replicas []int
	// etcdMembers are the client and peer ports of etcd members 1..n-1
	// (member 0 has etcdClient and etcdPeer).
	etcdMembers [][2]int
}

// Start brings the environment up and returns once the banlieue APIService
// is Available. On error everything started is stopped again.
func Start(ctx context.Context, cfg Config) (env *Env, err error) {
	e := &Env{cfg: cfg}
	defer func() {
		if err != nil {
			e.Stop()
		}
	}()
	for _, d := range []string{"pki", "logs", "kubeconfigs"} {
		if err := os.MkdirAll(filepath.Join(cfg.Dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if err := e.pickPorts(); err != nil {
		return nil, err
	}
	if err := e.writeCertificates(); err != nil {
		return nil, fmt.Errorf("certificates: %w", err)
	}
	if err := e.startEtcd(ctx); err != nil {
		return nil, err
	}
	if err := e.startKubeAPIServer(ctx); err != nil {
		return nil, err
	}
	if err := e.startKubeControllerManager(); err != nil {
		return nil, err
	}
	if cfg.Setup != nil {
		if err := cfg.Setup(ctx, e.AdminKubeconfig); err != nil {
			return nil, fmt.Errorf("setup: %w", err)
		}
	}
	if cfg.ControlPlaneOnly {
		return e, nil
	}
	if err := e.StartBanlieue(ctx); err != nil {
		return nil, err
	}
	if err := e.registerAPIService(ctx); err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Controllers; i++ {
		if _, err := e.StartController(i); err != nil {
			return nil, err
		}
	}
	return e, nil
}

// Process is a component started by the environment.
type Process struct{ p *process }

// Kill sends SIGKILL (a crash) and waits for the process to exit.
func (p Process) Kill() { p.p.kill() }

// Stop shuts the process down cleanly.
func (p Process) Stop() { p.p.stop() }

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
		"--metrics-bind-address=0", "--health-probe-bind-address=0"}, extra...)
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

// Stop kills every process (by PID, in reverse start order) and waits for it.
func (e *Env) Stop() {
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop()
	}
	e.procs = nil
	if e.balancer != nil {
		e.balancer.close()
		e.balancer = nil
	}
}

// Dir is where the environment keeps its files.
func (e *Env) Dir() string { return e.cfg.Dir }

// Logs is the folder with one log file per process.
func (e *Env) Logs() string { return filepath.Join(e.cfg.Dir, "logs") }

// ReconcileErrors returns the "Reconciler error" lines that contain substr
// in the logs of the processes whose log names match glob (controller-*,
// provider-*): what a user reading those logs would take for a fault.
func (e *Env) ReconcileErrors(glob, substr string) ([]string, error) {
	logs, err := filepath.Glob(filepath.Join(e.Logs(), glob+".log"))
	if err != nil {
		return nil, err
	}
	if len(logs) == 0 {
		return nil, fmt.Errorf("no log matches %s in %s", glob, e.Logs())
	}
	var out []string
	for _, l := range logs {
		data, err := os.ReadFile(l)
		if err != nil {
			return nil, err
		}
		for _, line := range strings.Split(string(data), "\n") {
			if strings.Contains(line, `"Reconciler error"`) && strings.Contains(line, substr) {
				out = append(out, line)
			}
		}
	}
	return out, nil
}

// NoConflictErrors fails when a process whose log name matches glob logged
// a lost optimistic-concurrency race as a reconcile error: the controllers
// requeue those quietly (pkg/controllers/conflict).
func (e *Env) NoConflictErrors(glob string) error {
	lines, err := e.ReconcileErrors(glob, "the object has been modified")
	if err != nil {
		return err
	}
	if len(lines) > 0 {
		return fmt.Errorf("%d conflicts logged as reconcile errors, first: %.300s", len(lines), lines[0])
	}
	return nil
}

// KillBanlieue stops every banlieue replica cleanly.
func (e *Env) KillBanlieue() {
	for i, p := range e.banlieue {
		if p != nil {
			p.stop()
			e.banlieue[i] = nil
		}
	}
}

// CrashBanlieue SIGKILLs every banlieue replica: a crash, with no graceful
// shutdown. StartBanlieue brings them back.
func (e *Env) CrashBanlieue() {
	for i := range e.banlieue {
		e.CrashBanlieueReplica(i)
	}
}

// RestartBanlieue stops every banlieue replica (SIGKILL) and starts them
// again on the same etcd with extra arguments after Config.BanlieueArgs
// (none: as configured), waiting until each is ready. PIDs changes.
func (e *Env) RestartBanlieue(ctx context.Context, extra ...string) error {
	e.CrashBanlieue()
	e.banlieueExtra = extra
	return e.StartBanlieue(ctx)
}

// CrashBanlieueReplica SIGKILLs replica i only.
func (e *Env) CrashBanlieueReplica(i int) {
	if i < len(e.banlieue) && e.banlieue[i] != nil {
		e.banlieue[i].kill()
		e.banlieue[i] = nil
	}
}

// CrashEtcd SIGKILLs every etcd member. StartEtcd brings them back on the
// same data.
func (e *Env) CrashEtcd() {
	for i := range e.etcd {
		e.CrashEtcdMember(i)
	}
}

// CrashEtcdMember SIGKILLs etcd member i only.
func (e *Env) CrashEtcdMember(i int) {
	if i < len(e.etcd) && e.etcd[i] != nil {
		e.etcd[i].kill()
		e.etcd[i] = nil
	}
}

// StartEtcd starts the etcd members that are down (again) on their ports
// and data, and waits until they are healthy.
func (e *Env) StartEtcd(ctx context.Context) error { return e.startEtcd(ctx) }

// StartBanlieue starts every banlieue replica that is not running (again)
// and waits until each is ready. BanlieueURL reaches them all.
func (e *Env) StartBanlieue(ctx context.Context) error {
	replicas := max(e.cfg.BanlieueReplicas, 1)
	if len(e.banlieue) < replicas {
		e.banlieue = make([]*process, replicas)
	}
	e.BanlieueURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.banlieue))
	if replicas > 1 && e.balancer == nil {
		var backends []string
		for _, port := range e.ports.replicas {
			backends = append(backends, net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		}
		b, err := newBalancer(net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.banlieue)), backends)
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
	}
	args = append(args, e.cfg.BanlieueArgs...)
	args = append(args, e.banlieueExtra...)
	return e.startProcess(name, filepath.Join(e.cfg.BinDir, "banlieue"), args...)
}

// Direct is the administrator's REST config aimed at banlieue's own port
// (the admin client certificate is accepted there too), bypassing
// kube-apiserver's aggregation proxy.
func (e *Env) Direct() *restclient.Config {
	cfg := restclient.CopyConfig(e.Admin)
	cfg.Host = e.BanlieueURL
	cfg.TLSClientConfig.CAFile, cfg.TLSClientConfig.CAData = "", e.BanlieueCA
	return cfg
}

// PIDs maps each running component (etcd, kube-apiserver, banlieue, ...)
// to its process ID, for measuring its CPU time and memory.
func (e *Env) PIDs() map[string]int {
	out := map[string]int{}
	for _, p := range e.procs {
		if p.cmd.Process != nil && !p.exited() {
			out[p.name] = p.cmd.Process.Pid
		}
	}
	return out
}

// EtcdURL is the client URL of the environment's etcd.
func (e *Env) EtcdURL() string { return e.etcdURL() }

func (e *Env) etcdURL() string { return e.memberURL(0) }

func (e *Env) etcdMembers() int { return max(e.cfg.EtcdMembers, 1) }

// memberPorts are member i's client and peer ports.
func (e *Env) memberPorts(i int) (client, peer int) {
	if i == 0 {
		return e.ports.etcdClient, e.ports.etcdPeer
	}
	return e.ports.etcdMembers[i-1][0], e.ports.etcdMembers[i-1][1]
}

func (e *Env) memberURL(i int) string {
	c, _ := e.memberPorts(i)
	return "http://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(c))
}

// etcdServers lists every member's client URL, for --etcd-servers.
func (e *Env) etcdServers() string {
	var urls []string
	for i := range e.etcdMembers() {
		urls = append(urls, e.memberURL(i))
	}
	return strings.Join(urls, ",")
}

func (e *Env) pickPorts() error {
	var err error
	for _, p := range []*int{&e.ports.etcdClient, &e.ports.etcdPeer, &e.ports.kubeAPIServer, &e.ports.banlieue} {
		if *p, err = freePort(); err != nil {
			return err
		}
	}
	for range e.etcdMembers() - 1 {
		var m [2]int
		for j := range m {
			if m[j], err = freePort(); err != nil {
				return err
			}
		}
		e.ports.etcdMembers = append(e.ports.etcdMembers, m)
	}
	if n := e.cfg.BanlieueReplicas; n > 1 {
		e.ports.replicas = make([]int, n)
		for i := range e.ports.replicas {
			if e.ports.replicas[i], err = freePort(); err != nil {
				return err
			}
		}
	}
	return nil
}

func freePort() (int, error) { return loopback.FreePort() }

func (e *Env) startEtcd(ctx context.Context) error {
	n := e.etcdMembers()
	if len(e.etcd) < n {
		e.etcd = make([]*process, n)
	}
	// One member keeps the names it always had; a cluster's are numbered.
	name := func(i int) (member, process, data string) {
		if n == 1 {
			return "devenv", "etcd", "etcd"
		}
		return fmt.Sprintf("devenv-%d", i), fmt.Sprintf("etcd-%d", i), fmt.Sprintf("etcd-%d", i)
	}
	var cluster []string
	for i := range n {
		member, _, _ := name(i)
		_, peer := e.memberPorts(i)
		cluster = append(cluster, member+"=http://127.0.0.1:"+strconv.Itoa(peer))
	}
	var started []int
	for i := range n {
		if e.etcd[i] != nil {
			continue
		}
		member, proc, data := name(i)
		_, peer := e.memberPorts(i)
		args := []string{
			"--name=" + member,
			"--data-dir=" + filepath.Join(e.cfg.Dir, data),
			"--listen-client-urls=" + e.memberURL(i),
			"--advertise-client-urls=" + e.memberURL(i),
			"--listen-peer-urls=http://127.0.0.1:" + strconv.Itoa(peer),
			"--initial-advertise-peer-urls=http://127.0.0.1:" + strconv.Itoa(peer),
			"--initial-cluster=" + strings.Join(cluster, ","),
			"--listen-metrics-urls=",
			"--log-level=warn",
		}
		if !e.cfg.Durable {
			args = append(args, "--unsafe-no-fsync")
		}
		p, err := e.startProcess(proc, filepath.Join(e.cfg.BinDir, "etcd"), args...)
		if err != nil {
			return err
		}
		e.etcd[i] = p
		started = append(started, i)
	}
	// Members become healthy together, once they have a quorum.
	for _, i := range started {
		url := e.memberURL(i) + "/health"
		if err := pollProcess(ctx, e.etcd[i], time.Minute, func(ctx context.Context) bool { return httpGetOK(ctx, nil, url) }); err != nil {
			return err
		}
	}
	return nil
}

func (e *Env) startKubeAPIServer(ctx context.Context) error {
	pkiDir := filepath.Join(e.cfg.Dir, "pki")
	f := func(name string) string { return filepath.Join(pkiDir, name) }
	args := []string{
		"--etcd-servers=" + e.etcdServers(),
		"--bind-address=127.0.0.1",
		"--advertise-address=127.0.0.1",
		"--secure-port=" + strconv.Itoa(e.ports.kubeAPIServer),
		// No kubernetes Service endpoints on loopback addresses.
		"--endpoint-reconciler-type=none",
		"--service-cluster-ip-range=10.96.0.0/16",
		"--tls-cert-file=" + f("kube-apiserver.crt"),
		"--tls-private-key-file=" + f("kube-apiserver.key"),
		"--client-ca-file=" + f("ca.crt"),
		"--authorization-mode=RBAC",
		"--service-account-issuer=https://kubernetes.default.svc",
		"--service-account-key-file=" + f("sa.pub"),
		"--service-account-signing-key-file=" + f("sa.key"),
		// The aggregation layer: kube-apiserver authenticates users, then
		// proxies with its front-proxy client certificate and the user in headers.
		"--requestheader-client-ca-file=" + f("front-proxy-ca.crt"),
		"--requestheader-allowed-names=front-proxy-client",
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + f("front-proxy-client.crt"),
		"--proxy-client-key-file=" + f("front-proxy-client.key"),
		"--anonymous-auth=true",
		"--profiling=false",
	}
	args = append(args, e.cfg.KubeAPIServerArgs...)
	p, err := e.startProcess("kube-apiserver", filepath.Join(e.cfg.BinDir, "kube-apiserver"), args...)
	if err != nil {
		return err
	}
	e.KubeAPIServerURL = "https://" + net.JoinHostPort("127.0.0.1", strconv.Itoa(e.ports.kubeAPIServer))
	admin, err := e.ca.IssueClient("banlieue-dev-admin", "system:masters")
	if err != nil {
		return err
	}
	e.AdminKubeconfig = filepath.Join(e.cfg.Dir, "kubeconfigs", "admin.kubeconfig")
	if err := e.writeKubeconfig(e.AdminKubeconfig, "admin", admin); err != nil {
		return err
	}
	if e.Admin, err = clientcmd.BuildConfigFromFlags("", e.AdminKubeconfig); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	if err := pollProcess(ctx, p, 3*time.Minute, func(ctx context.Context) bool {
		body, err := client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil && string(body) == "ok"
	}); err != nil {
		return fmt.Errorf("kube-apiserver not ready: %w", err)
	}
	_, err = e.serviceAccountKubeconfig("banlieue", BanlieueUser)
	return err
}

// serviceAccountKubeconfig writes, once per environment start, the
// kubeconfig of a component running as a ServiceAccount: its user name and
// groups carried by a client certificate, since there is no Pod and so no
// projected token. It returns the file's path. A file left by an earlier
// start is rewritten: the CA is new at every start.
func (e *Env) serviceAccountKubeconfig(name, user string) (string, error) {
	path := filepath.Join(e.cfg.Dir, "kubeconfigs", name+".kubeconfig")
	if e.issued[path] {
		return path, nil
	}
	if e.issued == nil {
		e.issued = map[string]bool{}
	}
	// system:serviceaccount:NAMESPACE:NAME is in system:serviceaccounts:NAMESPACE.
	saNamespace := strings.Split(user, ":")[2]
	ident, err := e.ca.IssueClient(user, "system:serviceaccounts", "system:serviceaccounts:"+saNamespace)
	if err != nil {
		return "", err
	}
	if err := e.writeKubeconfig(path, name, ident); err != nil {
		return "", err
	}
	e.issued[path] = true
	return path, nil
}

func (e *Env) startKubeControllerManager() error {
	kc := e.AdminKubeconfig
	_, err := e.startProcess("kube-controller-manager", filepath.Join(e.cfg.BinDir, "kube-controller-manager"),
		"--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		// clusterrole-aggregation folds banlieue's roles into view, edit
		// and admin, as in any cluster.
		"--controllers=namespace,garbagecollector,clusterrole-aggregation",
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=0",
		"--use-service-account-credentials=false",
	)
	return err
}

// registerAPIService points kube-apiserver's aggregator at banlieue through
// an ExternalName Service to localhost, with banlieue's CA as caBundle, and
// waits for the APIService to be Available.
func (e *Env) registerAPIService(ctx context.Context) error {
	client, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: APIServerNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	// Named apart from the install's Service (artifacts/deploy), so that the
	// shipped manifests can be applied over this environment.
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: loopbackService, Namespace: APIServerNamespace},
		Spec: corev1.ServiceSpec{
			Type:         corev1.ServiceTypeExternalName,
			ExternalName: "localhost",
			Ports:        []corev1.ServicePort{{Name: "https", Port: int32(e.ports.banlieue)}},
		},
	}
	if err := upsert(ctx, func() error {
		_, err := client.CoreV1().Services(APIServerNamespace).Create(ctx, svc, metav1.CreateOptions{})
		return err
	}, func() error {
		cur, err := client.CoreV1().Services(APIServerNamespace).Get(ctx, svc.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = svc.Spec
		_, err = client.CoreV1().Services(APIServerNamespace).Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("service: %w", err)
	}

	agg, err := aggregatorclient.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	port := int32(e.ports.banlieue)
	apiService := &apiregistrationv1.APIService{
		ObjectMeta: metav1.ObjectMeta{Name: APIServiceName},
		Spec: apiregistrationv1.APIServiceSpec{
			Group: "banlieue.io", Version: "v1alpha1",
			GroupPriorityMinimum: 1000, VersionPriority: 15,
			Service:  &apiregistrationv1.ServiceReference{Namespace: APIServerNamespace, Name: loopbackService, Port: &port},
			CABundle: e.BanlieueCA,
		},
	}
	apis := agg.ApiregistrationV1().APIServices()
	if err := upsert(ctx, func() error {
		_, err := apis.Create(ctx, apiService, metav1.CreateOptions{})
		return err
	}, func() error {
		cur, err := apis.Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cur.Spec = apiService.Spec
		_, err = apis.Update(ctx, cur, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return fmt.Errorf("apiservice: %w", err)
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		cur, err := apis.Get(ctx, APIServiceName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range cur.Status.Conditions {
			if c.Type == apiregistrationv1.Available {
				last = fmt.Sprintf("%s: %s", c.Reason, c.Message)
				return c.Status == apiregistrationv1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("APIService %s not Available (%s): %w", APIServiceName, last, err)
	}
	// Available can come a moment before kube-apiserver proxies to it (a
	// first request then gets 503): wait until one goes through.
	rc, err := restclient.RESTClientFor(aggregatedREST(e.Admin))
	if err != nil {
		return err
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		res := rc.Get().AbsPath("/apis/banlieue.io/v1alpha1/vmclasses").Param("limit", "1").Do(ctx)
		if err := res.Error(); err != nil {
			last = err.Error()
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("banlieue.io not served through kube-apiserver (%s): %w", last, err)
	}
	klog.InfoS("banlieue APIService available", "apiservice", APIServiceName)
	return nil
}

// aggregatedREST is cfg for plain JSON requests to any path.
func aggregatedREST(cfg *restclient.Config) *restclient.Config {
	c := restclient.CopyConfig(cfg)
	c.GroupVersion = &schema.GroupVersion{}
	c.NegotiatedSerializer = scheme.Codecs.WithoutConversion()
	if c.UserAgent == "" {
		c.UserAgent = restclient.DefaultKubernetesUserAgent()
	}
	return c
}

func upsert(_ context.Context, create, update func() error) error {
	err := create()
	if apierrors.IsAlreadyExists(err) {
		return update()
	}
	return err
}

// UserKubeconfig writes a kubeconfig for a user authenticated by a client
// certificate (common name = user, organisations = groups) and returns its path.
func (e *Env) UserKubeconfig(user string, groups ...string) (string, error) {
	path := filepath.Join(e.cfg.Dir, "kubeconfigs", safeName(user)+".kubeconfig")
	if path == e.AdminKubeconfig {
		return "", fmt.Errorf("user %q would overwrite the administrator's kubeconfig", user)
	}
	kp, err := e.ca.IssueClient(user, groups...)
	if err != nil {
		return "", err
	}
	return path, e.writeKubeconfig(path, safeName(user), kp)
}

func (e *Env) writeKubeconfig(path, user string, kp *pki.KeyPair) error {
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devenv"] = &clientcmdapi.Cluster{Server: e.KubeAPIServerURL, CertificateAuthorityData: e.ca.CertPEM}
	auth := &clientcmdapi.AuthInfo{}
	if kp != nil {
		auth.ClientCertificateData, auth.ClientKeyData = kp.CertPEM, kp.KeyPEM
	}
	cfg.AuthInfos[user] = auth
	cfg.Contexts["devenv"] = &clientcmdapi.Context{Cluster: "devenv", AuthInfo: user, Namespace: "default"}
	cfg.CurrentContext = "devenv"
	return clientcmd.WriteToFile(*cfg, path)
}

func safeName(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			out[i] = '-'
		}
	}
	return string(out)
}
