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
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/loopback"
)

// A real node beside the control plane (Config.Node), so that shipped
// Deployments run as pods: containerd (Debian's, hack/install-node.sh) with
// runc and the CNI bridge plugin, the kubelet and kube-scheduler built from
// Go modules (hack/build-tools.sh), a pause image made by hack/image. It
// needs root. Servers stay on loopback: the kubelet listens on the bridge's
// gateway and registers that address; pods reach loopback servers through
// the gateway (Env.NodeGateway), whose TCP traffic from the bridge alone is
// redirected to 127.0.0.1 on the same port, and kube-apiserver through the
// kubernetes Service's address, redirected the same way. Nodes of several
// environments run side by side, each in its slot (nodeslot.go). Stop
// removes what the node made and puts the machine back as ReadMachineState
// found it before the first node started, and records what it could not
// (NodeLeftovers).
const (
	// kubernetesServiceIP is the first address of kube-apiserver's
	// --service-cluster-ip-range, which the kubelet gives pods as
	// KUBERNETES_SERVICE_HOST.
	kubernetesServiceIP = "10.96.0.1"
	// PauseImage is the sandbox image containerd is configured with.
	PauseImage = "registry.k8s.io/pause:3.10"
)

type node struct {
	dir        string
	name       string
	socket     string
	containerd *process
	kubelet    *process
	scheduler  *process
	dns        *process
	// slot is the node's share of the machine, held while it runs.
	slot *slot
	// before is the machine as the first of the nodes running found it.
	before    MachineState
	leftovers []string
}

// nodeReadyTimeout bounds the node's start: containerd, images, kubelet
// registration and its Ready condition.
const nodeReadyTimeout = 2 * time.Minute

// CheckNodePrerequisites says what a real node lacks here, or nil.
func CheckNodePrerequisites(binDir string) error {
	if os.Geteuid() != 0 {
		return errors.New("a real node needs root (containerd, cgroups, network namespaces)")
	}
	var missing []string
	for _, tool := range []string{"containerd", "runc", "ctr", "iptables-restore", "ip"} {
		if _, err := exec.LookPath(tool); err != nil {
			missing = append(missing, tool+" (hack/install-node.sh)")
		}
	}
	if _, err := os.Stat("/usr/lib/cni/bridge"); err != nil {
		missing = append(missing, "/usr/lib/cni/bridge (hack/install-node.sh)")
	}
	for _, f := range []string{"kubelet", "kube-scheduler", "coredns", "pause-image.tar", "etcd-image.tar"} {
		if _, err := os.Stat(filepath.Join(binDir, f)); err != nil {
			missing = append(missing, filepath.Join(binDir, f)+" (make tools)")
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("a real node needs %s", strings.Join(missing, ", "))
	}
	return nil
}

// nodeAPIServerArgs let kube-apiserver reach the kubelet (logs, exec) as
// a client the kubelet authenticates and authorizes.
func (e *Env) nodeAPIServerArgs() []string {
	f := func(name string) string { return filepath.Join(e.cfg.Dir, "pki", name) }
	args := []string{
		"--kubelet-client-certificate=" + f("kubelet-client.crt"),
		"--kubelet-client-key=" + f("kubelet-client.key"),
		"--kubelet-preferred-address-types=InternalIP",
	}
	if e.cfg.ControlPlaneOnly {
		// banlieue will be installed as pods: an APIService's Service is
		// dialled at its pods' addresses, which the host reaches through
		// the bridge (there is no kube-proxy for ClusterIPs). Not with
		// banlieue as a process, whose ExternalName Service the
		// aggregator then refuses.
		args = append(args, "--enable-aggregator-routing=true")
	}
	return args
}

// nodeControllers are the kube-controller-manager controllers a
// Deployment needs to become running pods with ServiceAccount tokens.
// nodelifecycle lifts the not-ready taint the kubelet registers with.
// statefulset and the volume controllers run the shipped etcd.
const nodeControllers = "deployment,replicaset,statefulset,serviceaccount,serviceaccount-token,root-ca-cert-publisher,disruption,endpointslice,nodelifecycle," +
	"persistentvolume-binder,pv-protection,pvc-protection"

// startNode brings the node up and waits for it to be Ready.
func (e *Env) startNode(ctx context.Context) (err error) {
	if err := CheckNodePrerequisites(e.cfg.BinDir); err != nil {
		return err
	}
	host, err := os.Hostname()
	if err != nil {
		return err
	}
	n := &node{dir: filepath.Join(e.cfg.Dir, "node"), name: strings.ToLower(host)}
	n.socket = filepath.Join(n.dir, "containerd", "containerd.sock")
	slots, err := nodeSlots()
	if err != nil {
		return err
	}
	if n.slot, err = takeSlot(ctx, slots); err != nil {
		return err
	}
	e.node = n
	if n.before, err = n.slot.arrive(func() (MachineState, error) { return ReadMachineState() }); err != nil {
		return fmt.Errorf("reading the machine's state: %w", err)
	}
	for _, d := range []string{"containerd/root", "containerd/state", "cni/net.d", "cni/networks", "kubelet", "pod-logs"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return err
		}
	}
	if err := makeCgroupRoot(n.slot.cgroupRoot()); err != nil {
		return fmt.Errorf("the pods' cgroup: %w", err)
	}
	if err := e.startContainerd(ctx, n); err != nil {
		return err
	}
	if err := n.importImage(ctx, filepath.Join(e.cfg.BinDir, "pause-image.tar")); err != nil {
		return err
	}
	for _, img := range e.cfg.NodeImages {
		if err := n.importImage(ctx, img); err != nil {
			return err
		}
	}
	if err := e.grantNodeIdentities(ctx); err != nil {
		return err
	}
	if err := n.redirectToLoopback(e.ports.kubeAPIServer); err != nil {
		return err
	}
	// Before the kubelet: the first pods already look names up.
	if err := e.startClusterDNS(ctx, n); err != nil {
		return err
	}
	if err := e.startKubelet(ctx, n); err != nil {
		return err
	}
	return e.startScheduler()
}

// NodeName is the real node's name ("" without one).
func (e *Env) NodeName() string {
	if e.node == nil {
		return ""
	}
	return e.node.name
}

// NodeLeftovers is what the last Stop of a real node could not put back
// as it found it (nil: the machine is as it was).
func (e *Env) NodeLeftovers() []string {
	if e.node == nil {
		return nil
	}
	return e.node.leftovers
}

func (e *Env) startContainerd(ctx context.Context, n *node) error {
	def, err := exec.Command("containerd", "config", "default").Output()
	if err != nil {
		return fmt.Errorf("containerd config default: %w", err)
	}
	cfg, err := containerdConfig(string(def), n.dir)
	if err != nil {
		return err
	}
	path := filepath.Join(n.dir, "containerd", "config.toml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(n.dir, "cni", "net.d", "10-devenv.conflist"), []byte(cniConfig(n.dir, n.slot)), 0o600); err != nil {
		return err
	}
	if n.containerd, err = e.startProcess("containerd", "/usr/bin/containerd", "--config", path); err != nil {
		return err
	}
	return pollProcess(ctx, n.containerd, time.Minute, func(ctx context.Context) bool {
		return exec.CommandContext(ctx, "ctr", "--address", n.socket, "version").Run() == nil
	})
}

// containerdConfig is containerd's default configuration with everything
// it keeps in the node's directory (the pods' network namespaces too), the
// pause image, the CNI plugins Debian installs, and restrict_oom_score_adj
// (root here lacks CAP_SYS_RESOURCE: without it every sandbox fails to
// start).
func containerdConfig(def, dir string) (string, error) {
	c := filepath.Join(dir, "containerd")
	for _, r := range []struct{ from, to string }{
		{`root = "/var/lib/containerd"`, `root = "` + filepath.Join(c, "root") + `"`},
		{`state = "/run/containerd"`, `state = "` + filepath.Join(c, "state") + `"`},
		{`address = "/run/containerd/containerd.sock"`, `address = "` + filepath.Join(c, "containerd.sock") + `"`},
		{`sandbox_image = "registry.k8s.io/pause:3.6"`, `sandbox_image = "` + PauseImage + `"`},
		{`bin_dir = "/opt/cni/bin"`, `bin_dir = "/usr/lib/cni"`},
		{`conf_dir = "/etc/cni/net.d"`, `conf_dir = "` + filepath.Join(dir, "cni", "net.d") + `"`},
		{`restrict_oom_score_adj = false`, `restrict_oom_score_adj = true`},
		{`path = "/opt/containerd"`, `path = "` + filepath.Join(c, "opt") + `"`},
		{`netns_mounts_under_state_dir = false`, `netns_mounts_under_state_dir = true`},
	} {
		if !strings.Contains(def, r.from) {
			return "", fmt.Errorf("containerd's default configuration has no %s", r.from)
		}
		def = strings.Replace(def, r.from, r.to, 1)
	}
	return def, nil
}

// cniConfig is the pods' network: the slot's bridge with its gateway,
// addresses from its subnet recorded in the node's directory.
func cniConfig(dir string, s *slot) string {
	return `{
  "cniVersion": "1.0.0",
  "name": "devenv",
  "plugins": [
    {
      "type": "bridge",
      "bridge": "` + s.bridge() + `",
      "isGateway": true,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": "` + filepath.Join(dir, "cni", "networks") + `",
        "ranges": [[{"subnet": "` + s.subnet() + `", "gateway": "` + s.gateway() + `"}]],
        "routes": [{"dst": "0.0.0.0/0"}]
      }
    },
    {"type": "loopback"}
  ]
}
`
}

func (n *node) importImage(ctx context.Context, tarball string) error {
	out, err := exec.CommandContext(ctx, "ctr", "--address", n.socket, "-n", "k8s.io", "images", "import", tarball).CombinedOutput()
	if err != nil {
		return fmt.Errorf("importing %s into the node: %v: %s", tarball, err, out)
	}
	return nil
}

// grantNodeIdentities binds the node's and kube-apiserver's kubelet client
// identities to their built-in roles, and CoreDNS's to what it reads
// (RBAC alone authorizes here).
func (e *Env) grantNodeIdentities(ctx context.Context) error {
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	if _, err := cs.RbacV1().ClusterRoles().Create(ctx, corednsRole, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	for _, b := range []rbacv1.ClusterRoleBinding{
		{ObjectMeta: metav1.ObjectMeta{Name: "devenv:nodes"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:node"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "Group", Name: "system:nodes"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "devenv:kube-apiserver-kubelet-client"}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "system:kubelet-api-admin"},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: kubeletClientUser}}},
		{ObjectMeta: metav1.ObjectMeta{Name: corednsRole.Name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: corednsRole.Name},
			Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: "User", Name: corednsUser}}},
	} {
		if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, &b, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return nil
}

// kubeletClientUser is kube-apiserver's identity to the kubelet.
const kubeletClientUser = "kube-apiserver-kubelet-client"

func (e *Env) startKubelet(ctx context.Context, n *node) error {
	kubeconfig, err := e.UserKubeconfig("system:node:"+n.name, "system:nodes")
	if err != nil {
		return err
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return err
	}
	pkiDir := filepath.Join(e.cfg.Dir, "pki")
	serving, err := e.ca.IssueServing(n.name, []string{n.name}, []net.IP{net.ParseIP(n.slot.gateway())})
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pkiDir, "kubelet.crt"), serving.CertPEM, 0o600); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(pkiDir, "kubelet.key"), serving.KeyPEM, 0o600); err != nil {
		return err
	}
	cfg := kubeletConfig(n, pkiDir, ports[0], ports[1])
	path := filepath.Join(n.dir, "kubelet-config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		return err
	}
	if n.kubelet, err = e.startProcess("kubelet", filepath.Join(e.cfg.BinDir, "kubelet"),
		"--config="+path, "--kubeconfig="+kubeconfig, "--root-dir="+filepath.Join(n.dir, "kubelet"),
		"--node-ip="+n.slot.gateway(), "--v=2"); err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	return pollProcess(ctx, n.kubelet, nodeReadyTimeout, func(ctx context.Context) bool {
		node, err := cs.CoreV1().Nodes().Get(ctx, n.name, metav1.GetOptions{})
		if err != nil {
			return false
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	})
}

// kubeletConfig: on the bridge's address (a kubelet may not register a
// loopback one) with its health on loopback, authenticated and authorized by
// kube-apiserver, cgroup v1 with cgroupfs, its pods under the slot's cgroup
// and their logs in the node's directory (a kubelet removes pods' cgroups
// and log folders it does not know: another node's), no swap check,
// eviction only when nearly full, images never collected (none can be
// pulled again: there is no registry), and a container that ended started
// again within a second (tests kill components as a crash would and wait
// for them, as they would for a process; a cluster's default backoff
// grows to 5 minutes).
func kubeletConfig(n *node, pkiDir string, port, healthzPort int) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %s
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
tlsCertFile: %s
tlsPrivateKeyFile: %s
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %s}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
cgroupRoot: %s
podLogsDir: %s
failCgroupV1: false
failSwapOn: false
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: 50Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
clusterDomain: %s
clusterDNS: [%s]
serializeImagePulls: false
crashLoopBackOff: {maxContainerRestartPeriod: 1s}
`, n.slot.gateway(), port, healthzPort, filepath.Join(pkiDir, "kubelet.crt"), filepath.Join(pkiDir, "kubelet.key"), filepath.Join(pkiDir, "ca.crt"),
		n.socket, n.slot.cgroupRoot(), filepath.Join(n.dir, "pod-logs"), clusterDomain, n.slot.gateway())
}

// redirectToLoopback makes the pods' bridge (before the first sandbox
// would) and lets pods reach kube-apiserver on the host's loopback: TCP
// that arrives on the bridge for the kubernetes Service's 443 goes to
// kube-apiserver (route_localnet on the bridge alone, so nothing arriving
// elsewhere is redirected). Other loopback servers are reachable only once
// exposed by port (ExposeToPods): etcd's, for one, never is.
func (n *node) redirectToLoopback(apiserverPort int) error {
	bridge := n.slot.bridge()
	if _, err := os.Stat("/sys/class/net/" + bridge); err != nil {
		for _, args := range [][]string{{"link", "add", bridge, "type", "bridge"}, {"addr", "add", n.slot.gateway() + "/16", "dev", bridge}, {"link", "set", bridge, "up"}} {
			if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
				return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
			}
		}
	}
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+bridge+"/route_localnet", []byte("1"), 0o644); err != nil {
		return err
	}
	return n.natRule("tcp", kubernetesServiceIP, "443", "127.0.0.1:"+strconv.Itoa(apiserverPort))
}

// natRule redirects proto (tcp, udp) arriving on the node's bridge for
// dst:dport to the loopback destination to (ADDRESS:PORT).
func (n *node) natRule(proto, dst, dport, to string) error {
	rules := "*nat\n-A PREROUTING -i " + n.slot.bridge() + " -d " + dst + "/32 -p " + proto + " --dport " + dport +
		" -j DNAT --to-destination " + to + "\nCOMMIT\n"
	cmd := exec.Command("iptables-restore", "--noflush")
	cmd.Stdin = strings.NewReader(rules)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("iptables-restore: %v: %s", err, out)
	}
	return nil
}

// ExposeToPods lets pods of the real node reach the loopback server on
// port, at the address it returns (the bridge's gateway, same port): a
// simulator or libvirtd a provider pod must talk to.
func (e *Env) ExposeToPods(port int) (string, error) {
	if e.node == nil {
		return "", errors.New("no real node (Config.Node)")
	}
	p := strconv.Itoa(port)
	gateway := e.node.slot.gateway()
	if err := e.node.natRule("tcp", gateway, p, "127.0.0.1:"+p); err != nil {
		return "", err
	}
	return net.JoinHostPort(gateway, p), nil
}

// NodeGateway is the address of the host as the real node's pods see it
// (the gateway of their bridge), "" without a node: what a certificate
// of a server pods reach must name.
func (e *Env) NodeGateway() string {
	if e.node == nil {
		return ""
	}
	return e.node.slot.gateway()
}

// ExposeURL exposes the loopback server of rawURL to pods (ExposeToPods)
// and returns the URL pods use: the same with the bridge's gateway as its
// host.
func (e *Env) ExposeURL(rawURL string) (string, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "", err
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return "", fmt.Errorf("%s: no port: %w", rawURL, err)
	}
	if u.Host, err = e.ExposeToPods(port); err != nil {
		return "", err
	}
	return u.String(), nil
}

func (e *Env) startScheduler() error {
	kubeconfig, err := e.UserKubeconfig("system:kube-scheduler")
	if err != nil {
		return err
	}
	p, err := e.startProcess("kube-scheduler", filepath.Join(e.cfg.BinDir, "kube-scheduler"),
		"--kubeconfig="+kubeconfig, "--leader-elect=false", "--bind-address=127.0.0.1", "--secure-port=0")
	e.node.scheduler = p
	return err
}

// stopNode stops the node and removes what it made: the kubelet first (it
// would restart what goes), then every pod sandbox through the CRI (CNI
// tear-down included), containerd and its shims, then its mounts, bridge,
// iptables rules and cgroups. What of it is still there is in
// NodeLeftovers; so is, when it is the last node running, what differs
// from the machine the first node found once the kubelets' machine-wide
// chains and sysctls are put back.
func (e *Env) stopNode() {
	n := e.node
	if n == nil {
		return
	}
	defer n.slot.release()
	if n.containerd == nil {
		return
	}
	for _, p := range []*process{n.scheduler, n.kubelet, n.dns} {
		if p != nil {
			p.stop()
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := n.removeSandboxes(ctx); err != nil {
		klog.ErrorS(err, "Removing the node's pod sandboxes")
	}
	n.containerd.stop()
	n.killShims()
	n.removeOwn()
	n.leftovers = n.ownLeftovers()
	if err := n.slot.leave(func() {
		n.restore()
		after, err := ReadMachineState()
		if err != nil {
			n.leftovers = append(n.leftovers, err.Error())
			return
		}
		n.leftovers = append(n.leftovers, n.before.LeftBehind(after)...)
	}); err != nil {
		n.leftovers = append(n.leftovers, err.Error())
	}
	for _, l := range n.leftovers {
		klog.InfoS("The node left the machine changed", "what", l)
	}
	n.containerd = nil
}
