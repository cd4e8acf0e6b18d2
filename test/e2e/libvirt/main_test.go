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

// Package libvirt drives the shipped libvirt provider against real
// libvirtds (pkg/providers/libvirt/libvirtd: each in network and mount
// namespaces of its own), whose QEMU guests boot the repo's test image and
// report on their serial consoles, in pod mode (devenv.NodeSuite): the
// shipped controller and libvirt provider Deployments (its ConfigMap
// edited as an administrator would: libvirtSettings) run as pods of the
// release image on a real node, as do the shipped vSphere and Proxmox VE
// provider Deployments the tests of several backends add (backends.go);
// banlieue's API server is the environment's, a process, as in
// test/e2e/node. The provider pods reach each libvirtd over qemu+tls://
// on the node's bridge gateway (devenv.StartPodsLibvirtd), with the
// client certificate and CA the Providers name (libvirt-creds,
// libvirt-ca); the tests look at what the provider did through the
// daemon's own unix socket and serial log files. The simulators and the
// image servers run in the test process, on loopback, exposed on the
// bridge's gateway (devenv.ExposeURL). A crash is the leading provider
// pod's container SIGKILLed and started again by the kubelet
// (crashWhen), so no test here runs a component as a process. TestMain
// fails when a pod logged a lost optimistic-concurrency race as a
// reconcile error (its logs copied as they are written, devenv.FollowLogs).
package libvirt

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

const (
	ns = devenv.Namespace
	// image is the base volume every test VM's boot disk overlays.
	image = libvirtd.Pool + "/guest.qcow2"
	// creds and caConfigMap are the client certificate (a Secret) and the
	// CA (a ConfigMap) every libvirt Provider here names: one site's, by
	// the shipped names (siteCredentials).
	creds, caConfigMap = "libvirt-creds", "libvirt-ca"
)

var (
	// daemon is the libvirtd every libvirt Provider here reaches (at
	// daemon.Endpoint); the tests read it at its unix socket.
	daemon     *devenv.PodsLibvirtd
	env        *devenv.Env
	c          client.Client
	root       string
	kubectlBin string
	// guest is the test guest's image (hack/build-guest-image.sh).
	guest string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	guest = filepath.Join(root, "bin", "guest", "guest.qcow2")
	if out, err := exec.Command(filepath.Join(root, "hack", "build-guest-image.sh"), guest).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: building the guest image: %v\n%s", err, out)
		return 1
	}
	if why := libvirtd.Missing(); why != "" {
		fmt.Fprintf(os.Stderr, "libvirt: a libvirtd needs %s\n", why)
		return 1
	}
	return devenv.NodeSuite{Name: "libvirt", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC}, ScanPodLogs: true,
		Ready: func(e *devenv.Env) error {
			env = e
			return install()
		},
		Stop: stopDaemon}.Run(m)
}

// install starts the libvirtd the provider's pods reach, with the test
// guest in its pool and its credentials in the namespace, copies the
// banlieue pods' logs (env.FollowLogs) from then on, and runs the shipped
// controller and libvirt provider Deployments.
func install() (err error) {
	ctx := context.Background()
	if c, err = env.ServedClient(ctx); err != nil {
		return err
	}
	start, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if daemon, err = env.StartPodsLibvirtd(start, "libvirt"); err != nil {
		return err
	}
	if err := daemon.ImportVolume(guest, "guest.qcow2"); err != nil {
		return err
	}
	if err := siteCredentials(ctx); err != nil {
		return err
	}
	if err := env.FollowLogs(ns, "app.kubernetes.io/name=banlieue", "pod"); err != nil {
		return err
	}
	if out, err := env.Kubectl("", "apply", "-f", filepath.Join(root, "artifacts", "deploy", "base", "deployment-controller.yaml")); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	if err := env.ApplyProvider(root, "libvirt", libvirtSettings); err != nil {
		return err
	}
	return env.RolledOut(ctx, ns, 2*time.Minute, "banlieue-controller", "banlieue-provider-libvirt")
}

// siteCredentials creates the daemon's client certificate and CA as the
// objects every libvirt Provider here names: by the names the shipped
// provider's credentials Role grants (rbac.yaml), as a site that keeps
// them needs no grant of its own.
func siteCredentials(ctx context.Context) error {
	secret, ca := daemon.Credentials(ns, creds, caConfigMap)
	for _, o := range []client.Object{secret, ca} {
		if err := c.Create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// libvirtSettings are what this package changes of the shipped libvirt
// provider's ConfigMap, as its administrator would (each key a flag's
// default):
//   - BANLIEUE_RESYNC 2s rather than 5m: inventories and image checks
//     re-walked, so what a test changes on a host (a volume imported)
//     shows within its deadlines;
//   - BANLIEUE_DOMAIN_TYPE qemu: this machine has no working KVM;
//   - BANLIEUE_SHUTDOWN_GRACE 20s rather than 2m: how long a power-off
//     waits for the guest's ACPI shutdown, within the power tests'
//     deadlines;
//   - BANLIEUE_CONSOLE_BIND_ADDRESS: the console endpoint, off as
//     shipped (docs/console.md), for the console tests: it publishes the
//     pod's address (POD_IP, from the shipped Deployment), which
//     banlieue's API server reaches on the node's bridge.
const libvirtSettings = `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_DOMAIN_TYPE":"qemu","BANLIEUE_SHUTDOWN_GRACE":"20s",` +
	`"BANLIEUE_CONSOLE_BIND_ADDRESS":":8444"}}`

// servedToPods serves files as imagetest.Serve does (a mirror's URL
// paths to local files) and returns the server's root as the provider's
// pods reach it.
func servedToPods(t *testing.T, files map[string]string) string {
	t.Helper()
	return podURL(t, imagetest.Serve(t, files).Base)
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

// stopDaemon stops, once the tests are done, the libvirtd install
// started, checking it left nothing running in its namespace.
func stopDaemon() error {
	if daemon == nil {
		return nil
	}
	return daemon.StopAndCheck()
}

func eventually(t *testing.T, timeout time.Duration, f func() error) {
	t.Helper()
	var last error
	if err := wait.PollUntilContextTimeout(context.Background(), 250*time.Millisecond, timeout, true, func(context.Context) (bool, error) {
		last = f()
		return last == nil, nil
	}); err != nil {
		t.Fatalf("not within %s: %v", timeout, last)
	}
}

// lv is a connection to the test's libvirtd, to look at what the provider
// did there.
func lv(t *testing.T) *golibvirt.Libvirt {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Disconnect() })
	return l
}

// consentingNamespace creates namespace name, bound to
// banlieue-provider-userdata for each class's provider identity: a tenant
// consenting to its VMs' user data being read (rbac-userdata.yaml).
func consentingNamespace(t *testing.T, name string, classes ...string) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-userdata", Namespace: name},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-userdata"}}
	for _, class := range classes {
		binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "banlieue-provider-" + class, Namespace: ns})
	}
	if err := c.Create(ctx, binding); err != nil {
		t.Fatal(err)
	}
	return name
}
