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

// Package libvirt runs "banlieue provider libvirt" as a process against the
// devenv harness and a real libvirtd (pkg/providers/libvirt/libvirtd: in
// network and mount namespaces of its own), whose QEMU guests boot the
// repo's test image and report on their serial consoles.
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
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

const (
	ns = devenv.Namespace
	// image is the base volume every test VM's boot disk overlays.
	image = libvirtd.Pool + "/guest.qcow2"
)

var (
	daemon       *libvirtd.Daemon
	providerProc devenv.Process
	env          *devenv.Env
	c            client.Client
	kubectlBin   string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	if out, err := exec.Command(filepath.Join(root, "hack", "build-guest-image.sh"), guest).CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: building the guest image: %v\n%s", err, out)
		return 1
	}
	dir, err := os.MkdirTemp("", "banlieue-libvirt-")
	if err != nil {
		panic(err)
	}
	logs := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		panic(err)
	}
	log, err := os.Create(filepath.Join(logs, "libvirtd.log"))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if daemon, err = libvirtd.Start(ctx, filepath.Join(dir, "libvirtd"), filepath.Join(root, "bin", ".libvirt-cache"), log); err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: %v (log in %s)\n", err, logs)
		return 1
	}
	defer daemon.Stop()
	if err := daemon.ImportVolume(guest, "guest.qcow2"); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	env, err = devenv.Start(context.Background(), devenv.Config{Dir: dir, BinDir: filepath.Join(root, "bin"), Setup: dev.InstallRBAC, Controllers: 1})
	if err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: environment: %v (logs in %s)\n", err, logs)
		return 1
	}
	defer env.Stop()
	if providerProc, err = startProvider(); err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: provider: %v\n", err)
		return 1
	}
	if c, err = env.ServedClient(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := env.NoConflictErrors("*"); err != nil {
		fmt.Fprintf(os.Stderr, "libvirt: %v\n", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "libvirt: logs in %s\n", logs)
		return code
	}
	_ = os.RemoveAll(dir)
	return 0
}

// startProvider starts "banlieue provider libvirt" (again, after a kill).
func startProvider() (devenv.Process, error) {
	return env.StartProvider("libvirt", "provider-libvirt", 2*time.Second, "--domain-type=qemu", "--shutdown-grace=20s")
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

// vsphereBeside starts, for one test, a one-cluster vcsim holding the
// guest's template and a vSphere provider process, and creates a Ready
// Provider name for it (labels; network class prod on VM Network, its
// Secret name-creds with password).
func vsphereBeside(t *testing.T, name, password string, labels map[string]string) *vcsim.Simulator {
	t.Helper()
	ctx := context.Background()
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 1, Template: "banlieue-guest", Username: "admin@vsphere.local", Password: password, DHCP: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(sim.Close)
	proc, err := env.StartVSphereProvider("provider-"+name, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(proc.Stop)
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name + "-creds", Namespace: ns},
		StringData: map[string]string{"username": "admin@vsphere.local", "password": password}}); err != nil {
		t.Fatal(err)
	}
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	if err := env.GrantCredentials(ctx, "vsphere", "secrets", name+"-creds"); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.Endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: name + "-creds"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
			Capabilities: v1alpha1.ProviderCapabilities{NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}}},
		},
	}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitProviderReady(t, name)
	return sim
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
