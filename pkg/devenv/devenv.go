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
//
// One job per file: controlplane.go starts the control plane,
// components.go banlieue's components with their shipped identities,
// container.go a shipped Deployment's container as a process (read by
// podspec), faults.go crashes and restarts for the reliability tests,
// process.go the processes themselves, node.go (with node_teardown.go and
// machinestate.go) a real node, node_services.go its cluster DNS and
// volumes, pods.go what tests read of its pods. Reading the logs for
// faults is logscan's job; the Service in front of API server replicas is
// loopback.Balancer.
//
// Two modes run banlieue's Deployments.
//
// Pod mode (Config.Node, as root; NodeSuite): a real kubelet runs the
// shipped Deployments as pods of the release image, with their probes,
// security contexts, limits and projected ServiceAccount tokens; a test
// crashes one by SIGKILLing its container's process (KillContainer,
// CrashContainer: the kubelet starts it again within a second or two) and
// reads its logs through the API (FollowPodLogs). banlieue's API server
// is the environment's process (the control plane these suites run
// against) except where the install itself is under test. In pod mode:
// test/e2e/node (the controller and the three providers' Deployments; the
// libvirt provider builds a VM that boots on a libvirtd in a namespace of
// its own), test/e2e/scheduling (the controller), test/e2e/vsphere and
// test/e2e/proxmox (controller, providers, operator and the workloads it
// renders; their crash tests kill the leading provider's container),
// test/e2e/libvirt (the controller and the libvirt provider, with the
// vSphere and Proxmox VE providers for its tests of several backends; the
// provider pods reach its libvirtds over TLS, StartPodsLibvirtd, and its
// crash tests kill the leading provider's container),
// test/monitoring (scraped through the ServiceMonitor's EndpointSlices),
// test/capi (the controller and the three providers' Deployments for the
// whole package, Cluster API's reconcilers in the test process; the
// libvirt provider builds on libvirtds reached over TLS, one CA for the
// hosts of a Provider),
// test/e2e/nodestatic (everything as pods, installed as
// docs/guides/static-install.md says, then the vSphere guide) and
// test/e2e/nodeinstall (everything as pods, installed by banlieue
// bootstrap operator). Environments that run at once each take a slot of
// the machine (nodeslot.go): at most BANLIEUE_NODE_SLOTS (2) nodes.
//
// Process mode: each component is a process started with its container's
// args, env and ServiceAccount identity (a client certificate), where a
// test needs what a pod does not give: test/reliability pauses, partitions
// and SIGKILLs API server replicas and etcd members behind a loopback
// Balancer and times outages to the second, and the benchmarks read each
// component's CPU from its process. test/e2e's own package runs none of the Deployments (its
// tests are of the API server, kubectl, the plugin and make run itself).
// make run, as root, runs the controller and providers as the shipped
// Deployments on its node, and as processes without one.
package devenv

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/devenv/logscan"
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
	// Node runs a real node (node.go): the kubelet, containerd and
	// kube-scheduler, and the controllers Deployments need, so that
	// Deployments run as pods. Root only (CheckNodePrerequisites).
	Node bool
	// NodeImages are image tarballs loaded into the node's containerd
	// (there is no registry): the release image (make image) for one.
	NodeImages []string
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

	ca     *pki.CA
	issued map[string]bool // kubeconfigs written since this start
	procs  []*process
	// logCopies stop the copies of pods' logs FollowLogs started.
	logCopies []func()
	banlieue  []*process // by replica; nil when down
	// banlieueExtra are RestartBanlieue's arguments, after BanlieueArgs.
	banlieueExtra []string
	balancer      *loopback.Balancer
	etcd          []*process // by member; nil when down
	ports         ports
	node          *node // with Config.Node
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
	if cfg.Node {
		if err := e.startNode(ctx); err != nil {
			return nil, fmt.Errorf("node: %w", err)
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

// PID is the process's ID, for a test that reads its /proc entries.
func (p Process) PID() int { return p.p.cmd.Process.Pid }

// Stop shuts the process down cleanly.
func (p Process) Stop() { p.p.stop() }

// Stop kills every process (by PID, in reverse start order) and waits for it.
func (e *Env) Stop() {
	for _, stop := range e.logCopies {
		stop()
	}
	e.logCopies = nil
	e.stopNode()
	for i := len(e.procs) - 1; i >= 0; i-- {
		e.procs[i].stop()
	}
	e.procs = nil
	if e.balancer != nil {
		e.balancer.Close()
		e.balancer = nil
	}
}

// Dir is where the environment keeps its files.
func (e *Env) Dir() string { return e.cfg.Dir }

// Logs is the folder with one log file per process.
func (e *Env) Logs() string { return filepath.Join(e.cfg.Dir, "logs") }

// ReconcileErrors returns the "Reconciler error" lines that contain substr
// in the logs of the processes whose log names match glob (logscan).
func (e *Env) ReconcileErrors(glob, substr string) ([]string, error) {
	return logscan.ReconcileErrors(e.Logs(), glob, substr)
}

// NoConflictErrors fails when a process whose log name matches glob logged
// a lost optimistic-concurrency race as a reconcile error (logscan).
func (e *Env) NoConflictErrors(glob string) error { return logscan.NoConflictErrors(e.Logs(), glob) }

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

func safeName(s string) string {
	out := []rune(s)
	for i, r := range out {
		if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
			out[i] = '-'
		}
	}
	return string(out)
}
