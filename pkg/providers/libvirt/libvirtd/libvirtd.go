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

// Package libvirtd runs a private libvirtd for tests and the local
// environment (make run), never for production: as root, in a network
// namespace and a mount namespace of its own, so its guests' networks
// (a libvirt network with DHCP, its bridge and firewall rules) exist only
// there and reach nothing outside, and its state, sockets, logs and
// storage live under one directory. It is reached from outside over its
// unix socket and, when it listens for TLS, through a forwarder on the
// host's loopback into its namespace; it is stopped by PID, with whatever
// else runs in its namespace. Domains are type qemu (TCG): KVM is not
// relied on.
package libvirtd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/digitalocean/go-libvirt/socket/dialers"
	"golang.org/x/sys/unix"
)

// Names of what Start sets up.
const (
	// Network is a libvirt network with DHCP on a bridge in the namespace.
	Network = "banlieue"
	// Pool is a directory storage pool.
	Pool = "default"
	// Subnet of Network; the host side is .1, DHCP hands out .10 to .200.
	Subnet = "192.168.150"
)

// Daemon is a running private libvirtd.
type Daemon struct {
	// Dir holds everything: etc, run (the socket), lib, log, pool.
	Dir string
	// Socket is the unix socket; URI the endpoint a Provider uses.
	Socket, URI string
	cmd         *exec.Cmd
	done        chan struct{}
	// netns is the daemon's network namespace (/proc/PID/ns/net's link):
	// Stop kills whatever still runs in it (dnsmasq, QEMU).
	netns string
	// fwd is the way in to a daemon listening for TLS, or nil.
	fwd *forwarder
	log io.Writer
}

// Missing says what this machine lacks to run a libvirtd, or "".
func Missing() string {
	if os.Geteuid() != 0 {
		return "root (libvirtd's system instance, namespaces)"
	}
	for _, bin := range []string{"libvirtd", "qemu-system-x86_64", "qemu-img", "unshare", "ip", "iptables", "dnsmasq"} {
		if _, err := exec.LookPath(bin); err != nil {
			return bin + " (hack/install-libvirt.sh installs it)"
		}
	}
	return ""
}

// TLS makes a daemon listen for qemu+tls:// with the server certificate
// and key (PEM), trusting client certificates CA signs. The daemon listens
// on 127.0.0.1:Port inside its own network namespace, beside its guest
// network, and is reached on the host's 127.0.0.1:Port, where a forwarder
// carries each connection into the namespace: clients connect as to a
// remote host, and the guests' networks still reach nothing outside.
type TLS struct {
	Port                      int
	CA, ServerCert, ServerKey []byte
}

// Start runs a libvirtd under dir and sets up Network and Pool. log gets
// the daemon's output. cacheDir, when set, keeps QEMU's capability probe
// (≈ 8 s on a first connection) across runs.
func Start(ctx context.Context, dir, cacheDir string, log io.Writer) (*Daemon, error) {
	return start(ctx, dir, cacheDir, log, nil)
}

// StartTLS runs a libvirtd under dir as Start does (Network and Pool) that
// also listens for TLS, reached on the host's 127.0.0.1:tls.Port (see TLS).
func StartTLS(ctx context.Context, dir, cacheDir string, log io.Writer, tls TLS) (*Daemon, error) {
	return start(ctx, dir, cacheDir, log, &tls)
}

func start(ctx context.Context, dir, cacheDir string, log io.Writer, tls *TLS) (*Daemon, error) {
	if m := Missing(); m != "" {
		return nil, fmt.Errorf("libvirtd cannot run here: needs %s", m)
	}
	d := &Daemon{Dir: dir, Socket: filepath.Join(dir, "run", "libvirt-sock"), done: make(chan struct{}), log: log}
	d.URI = (&url.URL{Scheme: "qemu+unix", Path: "/system", RawQuery: "socket=" + d.Socket}).String()
	if cacheDir == "" {
		cacheDir = filepath.Join(dir, "cache")
	}
	if err := prepare(dir, cacheDir, tls); err != nil {
		return nil, err
	}
	if err := d.run(dir, cacheDir, tls != nil); err != nil {
		return nil, err
	}
	if err := d.setUp(ctx); err != nil {
		d.Stop()
		return nil, err
	}
	if err := d.enter(tls); err != nil {
		d.Stop()
		return nil, err
	}
	return d, nil
}

// prepare makes the daemon's directories and configuration, and the mount
// points its mount namespace binds them to.
func prepare(dir, cacheDir string, tls *TLS) error {
	for _, sub := range []string{"etc", "run", "lib", "log/qemu", "pool"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(cacheDir, 0o700); err != nil {
		return err
	}
	if err := writeConfig(dir, tls); err != nil {
		return err
	}
	// The mount points must exist outside for the bind mounts inside.
	for _, p := range []string{"/etc/libvirt", "/run/libvirt", "/var/lib/libvirt", "/var/cache/libvirt", "/var/log/libvirt"} {
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// run starts libvirtd in new network and mount namespaces, listening for
// TLS (as its configuration says) when listen.
func (d *Daemon) run(dir, cacheDir string, listen bool) error {
	libvirtd := "exec libvirtd "
	if listen {
		libvirtd += "--listen "
	}
	script := strings.Join([]string{
		"set -e",
		"mount --make-rprivate /",
		"mount --bind " + filepath.Join(dir, "etc") + " /etc/libvirt",
		"mount --bind " + filepath.Join(dir, "run") + " /run/libvirt",
		"mount --bind " + filepath.Join(dir, "lib") + " /var/lib/libvirt",
		"mount --bind " + cacheDir + " /var/cache/libvirt",
		"mount --bind " + filepath.Join(dir, "log") + " /var/log/libvirt",
		"ip link set lo up",
		libvirtd + "-f /etc/libvirt/libvirtd.conf -p " + filepath.Join(dir, "libvirtd.pid"),
	}, "\n")
	// unshare execs sh, which execs libvirtd: the PID is the daemon's.
	d.cmd = exec.Command("unshare", "--net", "--mount", "sh", "-c", script)
	d.cmd.Stdout, d.cmd.Stderr = d.log, d.log
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := d.cmd.Start(); err != nil {
		return fmt.Errorf("starting libvirtd: %w", err)
	}
	go func() { _ = d.cmd.Wait(); close(d.done) }()
	return nil
}

// enter records the daemon's network namespace, checking it is not this
// process's, and for a daemon listening for TLS opens the way in: a
// forwarder from the host's 127.0.0.1:Port to 127.0.0.1:Port in there.
func (d *Daemon) enter(tls *TLS) error {
	// Opened first, read through the open file: the namespace is the one
	// the daemon was in, even if its PID went meanwhile.
	ns, err := os.Open(fmt.Sprintf("/proc/%d/ns/net", d.cmd.Process.Pid))
	if err != nil {
		return fmt.Errorf("opening libvirtd's network namespace: %w", err)
	}
	netns, err := os.Readlink(fmt.Sprintf("/proc/self/fd/%d", ns.Fd()))
	own, _ := os.Readlink("/proc/self/ns/net")
	if err != nil || netns == own {
		_ = ns.Close()
		return fmt.Errorf("libvirtd is not in a network namespace of its own (%s, %v)", netns, err)
	}
	d.netns = netns
	if tls == nil {
		return ns.Close()
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(tls.Port))
	if d.fwd, err = forward(addr, ns, addr, d.log); err != nil {
		_ = ns.Close()
		return err
	}
	return nil
}

func writeConfig(dir string, tls *TLS) error {
	conf := `unix_sock_dir = "/run/libvirt"
auth_unix_rw = "none"
auth_unix_ro = "none"
unix_sock_rw_perms = "0700"
log_outputs = "3:stderr"
`
	if tls == nil {
		conf += "listen_tls = 0\nlisten_tcp = 0\n"
	} else {
		pki := filepath.Join(dir, "etc", "pki")
		if err := os.MkdirAll(pki, 0o700); err != nil {
			return err
		}
		for name, pem := range map[string][]byte{"ca.pem": tls.CA, "server.pem": tls.ServerCert, "server-key.pem": tls.ServerKey} {
			if err := os.WriteFile(filepath.Join(pki, name), pem, 0o600); err != nil {
				return err
			}
		}
		// The files are read inside the mount namespace, at /etc/libvirt.
		conf += fmt.Sprintf(`listen_tls = 1
listen_tcp = 0
listen_addr = "127.0.0.1"
tls_port = "%d"
auth_tls = "none"
ca_file = "/etc/libvirt/pki/ca.pem"
cert_file = "/etc/libvirt/pki/server.pem"
key_file = "/etc/libvirt/pki/server-key.pem"
`, tls.Port)
	}
	files := map[string]string{
		"libvirtd.conf": conf,
		// QEMU and swtpm (vTPMs) run as root here (no libvirt-qemu or tss
		// ownership games); QEMU's output goes to files, as there is no
		// virtlogd.
		"qemu.conf": `user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
stdio_handler = "file"
swtpm_user = "root"
swtpm_group = "root"
`,
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, "etc", name), []byte(body), 0o600); err != nil {
			return err
		}
	}
	return nil
}

// Connect returns a new connection to the daemon.
func (d *Daemon) Connect() (*golibvirt.Libvirt, error) {
	l := golibvirt.NewWithDialer(dialers.NewLocal(dialers.WithSocket(d.Socket)))
	if err := l.ConnectToURI(golibvirt.QEMUSystem); err != nil {
		return nil, err
	}
	return l, nil
}

// PoolVolumes lists the names of Pool's volumes that match, as libvirt
// knows them: no refresh, as a provider makes and deletes volumes through
// libvirt (and a refresh fails while another client creates one).
func PoolVolumes(l *golibvirt.Libvirt, match func(name string) bool) ([]string, error) {
	pool, err := l.StoragePoolLookupByName(Pool)
	if err != nil {
		return nil, err
	}
	vols, _, err := l.StoragePoolListAllVolumes(pool, 1, 0)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, v := range vols {
		if match(v.Name) {
			out = append(out, v.Name)
		}
	}
	return out, nil
}

// setUp waits for the socket, then defines and starts Network and Pool.
func (d *Daemon) setUp(ctx context.Context) error {
	var l *golibvirt.Libvirt
	for {
		var err error
		if l, err = d.Connect(); err == nil {
			break
		}
		select {
		case <-d.done:
			return errors.New("libvirtd exited during start (see its log)")
		case <-ctx.Done():
			return fmt.Errorf("libvirtd did not come up: %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	defer func() { _ = l.Disconnect() }()
	network := fmt.Sprintf(`<network><name>%s</name><bridge name='virbr-bl'/>
  <ip address='%s.1' netmask='255.255.255.0'><dhcp><range start='%s.10' end='%s.200'/></dhcp></ip></network>`,
		Network, Subnet, Subnet, Subnet)
	if err := ensureNetwork(l, network); err != nil {
		return err
	}
	return d.ensurePool(l)
}

// ensureNetwork defines and starts Network; a kept directory (make run)
// has it defined already.
func ensureNetwork(l *golibvirt.Libvirt, net string) error {
	n, err := l.NetworkLookupByName(Network)
	if err != nil {
		if n, err = l.NetworkDefineXML(net); err != nil {
			return fmt.Errorf("defining network %s: %w", Network, err)
		}
	}
	if active, _ := l.NetworkIsActive(n); active == 0 {
		if err := l.NetworkCreate(n); err != nil {
			return fmt.Errorf("starting network %s: %w", Network, err)
		}
	}
	return nil
}

// ensurePool defines and starts Pool.
func (d *Daemon) ensurePool(l *golibvirt.Libvirt) error {
	pool := fmt.Sprintf(`<pool type='dir'><name>%s</name><target><path>%s</path></target></pool>`, Pool, filepath.Join(d.Dir, "pool"))
	p, err := l.StoragePoolLookupByName(Pool)
	if err != nil {
		if p, err = l.StoragePoolDefineXML(pool, 0); err != nil {
			return fmt.Errorf("defining pool %s: %w", Pool, err)
		}
	}
	if active, _ := l.StoragePoolIsActive(p); active == 0 {
		if err := l.StoragePoolCreate(p, 0); err != nil {
			return fmt.Errorf("starting pool %s: %w", Pool, err)
		}
	}
	return nil
}

// ImportVolume copies the file at src into Pool as a volume named name.
func (d *Daemon) ImportVolume(src, name string) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(d.Dir, "pool", name), data, 0o600); err != nil {
		return err
	}
	l, err := d.Connect()
	if err != nil {
		return err
	}
	defer func() { _ = l.Disconnect() }()
	p, err := l.StoragePoolLookupByName(Pool)
	if err != nil {
		return err
	}
	return l.StoragePoolRefresh(p, 0)
}

// SerialLogPath is the file the serial console of the domain named name
// is logged to.
func (d *Daemon) SerialLogPath(name string) string {
	return filepath.Join(d.Dir, "log", "qemu", name+".serial.log")
}

// SerialLog is the serial console output of the domain named name so far.
func (d *Daemon) SerialLog(name string) string {
	b, _ := os.ReadFile(d.SerialLogPath(name))
	return string(b)
}

// AdminURI is the endpoint of the daemon's admin interface (what
// virt-admin -c takes): its admin socket, libvirt-admin-sock beside Socket.
func (d *Daemon) AdminURI() string {
	return "libvirtd:///system?socket=" + filepath.Join(filepath.Dir(d.Socket), "libvirt-admin-sock")
}

// Clients lists the daemon's clients as its admin interface does
// (virt-admin client-list libvirtd on AdminURI): one line each, the
// client's numeric id first, then its transport and connection time,
// fields separated by one space. Tests compare them before and after a
// session to see that it left no connection behind.
func (d *Daemon) Clients() ([]string, error) {
	out, err := exec.Command("virt-admin", "-c", d.AdminURI(), "client-list", "libvirtd").CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("virt-admin client-list: %w\n%s", err, out)
	}
	var clients []string
	for _, line := range strings.Split(string(out), "\n") {
		f := strings.Fields(line)
		// Rows start with the client's numeric id; the header and its
		// rule do not.
		if len(f) >= 2 && strings.Trim(f[0], "0123456789") == "" {
			clients = append(clients, strings.Join(f, " "))
		}
	}
	return clients, nil
}

// Stop closes the way in (the TLS forwarder and its connections), destroys
// every domain and network (their QEMU and dnsmasq processes), stops the
// daemon by its PID, then kills whatever still runs in its network
// namespace.
func (d *Daemon) Stop() {
	if d.fwd != nil {
		d.fwd.close()
	}
	if l, err := d.Connect(); err == nil {
		if doms, _, err := l.ConnectListAllDomains(1, golibvirt.ConnectListDomainsActive); err == nil {
			for _, dom := range doms {
				_ = l.DomainDestroy(dom)
			}
		}
		if nets, _, err := l.ConnectListAllNetworks(1, golibvirt.ConnectListNetworksActive); err == nil {
			for _, n := range nets {
				_ = l.NetworkDestroy(n)
			}
		}
		_ = l.Disconnect()
	}
	if d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-d.done:
	case <-time.After(15 * time.Second):
		_ = d.cmd.Process.Kill()
		<-d.done
	}
	d.killNamespace()
}

// killNamespace SIGKILLs every process left in the daemon's network
// namespace (libvirt leaves its networks' dnsmasq running when it stops)
// and waits until each has exited.
func (d *Daemon) killNamespace() {
	for _, pid := range d.Processes() {
		// Through a pidfd: the signal and the wait reach this process,
		// not one that took its PID after it exited.
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue // gone already
		}
		if unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
			waitExit(fd, 15*time.Second)
		}
		_ = unix.Close(fd)
	}
}

// waitExit waits until the process of pidfd exits (the pidfd becomes
// readable), at most timeout.
func waitExit(pidfd int, timeout time.Duration) {
	deadline := time.Now().Add(timeout)
	for left := timeout; left > 0; left = time.Until(deadline) {
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(pidfd), Events: unix.POLLIN}}, int(left.Milliseconds())+1)
		if !errors.Is(err, unix.EINTR) || n > 0 {
			return
		}
	}
}

// Processes are the PIDs of the processes in the daemon's network
// namespace (libvirtd, dnsmasq, QEMU): none once Stop returned.
func (d *Daemon) Processes() []int {
	if d.netns == "" {
		return nil
	}
	var pids []int
	procs, _ := os.ReadDir("/proc")
	for _, p := range procs {
		pid, err := strconv.Atoi(p.Name())
		if err != nil {
			continue
		}
		if ns, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/net", pid)); err == nil && ns == d.netns {
			pids = append(pids, pid)
		}
	}
	return pids
}
