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

// Package proxmox drives the shipped Proxmox VE provider against the
// simulator (pkg/providers/proxmox/pvesim) through the real control plane,
// in pod mode (devenv.NodeSuite). The shipped controller Deployment and
// the shipped Proxmox VE provider Deployment (its ConfigMap edited as an
// administrator would: proxmoxSettings) run as pods of the release image
// on a real node, as does the shipped vSphere provider Deployment the
// migration tests add (migrate_test.go); banlieue's API server is the
// environment's, a process, as in test/e2e/node (installing it as pods is
// test/e2e/nodestatic's and nodeinstall's). The simulators and the image
// mirrors run in the test process, their ports exposed on the bridge's
// gateway, the simulators' certificates naming it. A crash is the leading
// provider pod's container SIGKILLed (devenv.KillContainer) and started
// again by the kubelet, so no test here runs a component as a process.
// TestMain fails when a pod logged a lost optimistic-concurrency race as a
// reconcile error (its logs copied as they are written, devenv.FollowLogs).
package proxmox

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

const ns = devenv.Namespace

var (
	env *devenv.Env
	sim *pvesim.Simulator
	// simEndpoint is the simulator's API as the provider's pods reach it;
	// the test itself reads the simulator at sim.URL.
	simEndpoint string
	c           client.Client
	root        string
	kubectlBin  string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	code := devenv.NodeSuite{Name: "proxmox", Root: root, Config: devenv.Config{Setup: dev.InstallRBAC}, ScanPodLogs: true,
		Ready: func(e *devenv.Env) error {
			env = e
			return install()
		}}.Run(m)
	if sim != nil {
		sim.Close()
	}
	return code
}

// install starts the simulator the provider's pods reach, copies the
// banlieue pods' logs (env.FollowLogs) from then on, and runs the shipped
// controller and Proxmox VE provider Deployments.
func install() (err error) {
	ctx := context.Background()
	if c, err = env.ServedClient(ctx); err != nil {
		return err
	}
	// The token holds the documented least-privilege grants only; 8.4
	// with import content on local takes imported images (spec.import).
	// Reached on the bridge's gateway, which its certificate names.
	sim = pvesim.New(pvesim.Options{TaskDelay: 100 * time.Millisecond, AgentDelay: 500 * time.Millisecond, ACL: dev.ProxmoxACL(),
		Version: dev.ProxmoxVersion, Nodes: dev.ProxmoxNodes(), ServingIPs: []net.IP{net.ParseIP(env.NodeGateway())}})
	if simEndpoint, err = env.ExposeURL(sim.URL); err != nil {
		return err
	}
	if err := env.FollowLogs(ns, "app.kubernetes.io/name=banlieue", "pod"); err != nil {
		return err
	}
	base := filepath.Join(root, "artifacts", "deploy", "base")
	if out, err := env.Kubectl("", "apply", "-f", filepath.Join(base, "deployment-controller.yaml")); err != nil {
		return fmt.Errorf("kubectl apply: %v\n%s", err, out)
	}
	if err := env.ApplyProvider(root, "proxmox", proxmoxSettings); err != nil {
		return err
	}
	return env.RolledOut(ctx, ns, 2*time.Minute, "banlieue-controller", "banlieue-provider-proxmox")
}

// proxmoxSettings are what this package changes of the shipped Proxmox VE
// provider's ConfigMap, as its administrator would (each key a flag's
// default): inventories and image checks re-walked every 2s rather than
// 5m, so what a test changes on the simulator (a template, a fixed
// Secret) shows within its deadlines; tasks polled every 50ms rather than
// 500ms, so clones settle fast; and the console endpoint on, which the
// shipped configuration leaves off (docs/console.md), for the console
// tests: it publishes the pod's address (POD_IP, from the shipped
// Deployment), which banlieue's API server reaches on the node's bridge.
const proxmoxSettings = `{"data":{"BANLIEUE_RESYNC":"2s","BANLIEUE_TASK_POLL":"50ms","BANLIEUE_CONSOLE_BIND_ADDRESS":":8444"}}`

// servedToPods serves files as imagetest.Serve does (a mirror's URL
// paths to local files) and returns the server's root as the provider's
// pods reach it.
func servedToPods(t *testing.T, files map[string]string) string {
	t.Helper()
	base, err := env.ExposeURL(imagetest.Serve(t, files).Base)
	if err != nil {
		t.Fatal(err)
	}
	return base
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

// proxmoxProvider is a Provider of the simulator, its token in Secret creds.
func proxmoxProvider(t *testing.T, name, creds string, labels map[string]string) *v1alpha1.Provider {
	t.Helper()
	// The static install reads credentials by name: the administrator
	// names this one in the provider's credentials Role.
	p, err := env.NewProxmoxProvider(context.Background(), c, devenv.ProxmoxProvider{Name: name, Labels: labels,
		Endpoint: simEndpoint, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: sim.Secret, Secret: creds, Grant: true,
		Capabilities: v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Bridge: "vmbr1", VLAN: 20}}},
			Features:       []string{"vtpm", "efiSecureBoot"},
		}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func waitProvider(t *testing.T, name, reason string) *v1alpha1.Provider {
	t.Helper()
	p := &v1alpha1.Provider{}
	eventually(t, 90*time.Second, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady)
		if cond == nil || cond.Reason != reason {
			return fmt.Errorf("Provider %s Ready = %+v, want reason %s", name, cond, reason)
		}
		return nil
	})
	return p
}

// TestSeedGuideOnProxmox: the guide's flow on the simulator — the Provider
// Ready with the nodes as failure domains, the template image ready on the
// node that has it, a VM Ready (kubectl wait) with its static address from
// the guest agent, its class and override on the Proxmox VM, power changes,
// and deleting it leaving no VM, volume or seed.
func TestSeedGuideOnProxmox(t *testing.T) {
	ctx := context.Background()
	if err := c.Create(ctx, proxmoxProvider(t, "lab-proxmox", "proxmox-token", map[string]string{"env": "lab"})); err != nil {
		t.Fatal(err)
	}
	p := waitProvider(t, "lab-proxmox", "InventoryWalked")
	if len(p.Status.FailureDomains) != 3 || p.Status.FailureDomains[0].Host != "pve1" {
		t.Fatalf("failure domains %+v: want the 3 nodes", p.Status.FailureDomains)
	}
	ensureImage(t)
	img := &v1alpha1.VMImage{}
	if err := c.Get(ctx, client.ObjectKey{Name: "debian-12"}, img); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		for _, s := range img.Status.PerProvider {
			if s.Provider == ns+"/lab-proxmox" && s.Ready {
				return nil
			}
		}
		return fmt.Errorf("image not ready on lab-proxmox: %+v", img.Status.PerProvider)
	})
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pve-medium"},
		Spec: v1alpha1.VMClassSpec{
			Hardware: v1alpha1.VMClassHardware{CPUs: 2, MemoryMiB: 2048, Disks: []v1alpha1.DiskSpec{
				{Name: "root", SizeGiB: 20, StorageClass: "gold", Provisioning: "thin"},
				{Name: "data", SizeGiB: 50, StorageClass: "gold", Provisioning: "thin"},
			}},
			Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
			Firmware: "efi-secure",
		}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "web-0", Namespace: ns},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "pve-medium"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
			Placement:        &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "lab"}}},
			HardwareOverride: &v1alpha1.HardwareOverride{MemoryMiB: ptr.To[int64](4096)},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: "192.0.2.40", Prefix: ptr.To[int32](24), Gateway: "192.0.2.1"}}},
		}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/web-0", "--timeout=2m").CombinedOutput()
	if err != nil {
		_ = c.Get(ctx, client.ObjectKeyFromObject(vm), vm)
		t.Fatalf("kubectl wait: %v\n%s\nconditions: %+v", err, out, vm.Status.Conditions)
	}
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web-0"}, pm); err != nil {
		t.Fatal(err)
	}
	if pm.Spec.Template != "debian-12-cloud" || pm.Spec.ProviderID != "proxmox://"+string(pm.UID) || pm.Status.VMID == 0 || pm.Status.Node != "pve1" {
		t.Errorf("ProxmoxMachine spec %+v status vmid %d node %q (uid %s)", pm.Spec, pm.Status.VMID, pm.Status.Node, pm.UID)
	}
	name := providers.BackendName(ns, "web-0")
	var got *pvesim.VM
	for _, v := range sim.VMs() {
		if v.Name == name {
			v := v
			got = &v
		}
	}
	if got == nil {
		t.Fatalf("no VM %s in the simulator", name)
	}
	for key, want := range map[string]string{"cores": "2", "memory": "4096", "bios": "ovmf", "net0": "bridge=vmbr1,tag=20",
		"ipconfig0": "ip=192.0.2.40/24,gw=192.0.2.1", "efidisk0": "pre-enrolled-keys=1", "scsi1": "size=50G", "scsi0": "size=20G"} {
		if v := fmt.Sprint(got.Config[key]); !strings.Contains(v, want) {
			t.Errorf("VM config %s = %q, want %q in it", key, v, want)
		}
	}
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(vm.Status.Addresses, func(a v1alpha1.MachineAddress) bool { return a.Address == "192.0.2.40" }) {
		t.Errorf("VM addresses %v", vm.Status.Addresses)
	}
	for _, want := range []string{"PoweredOff", "Suspended", "PoweredOn"} {
		setPower(t, vm, want)
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			if string(vm.Status.PowerState) != want {
				return fmt.Errorf("power %s, want %s", vm.Status.PowerState, want)
			}
			return nil
		})
	}
	if err := c.Delete(ctx, vm); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); !apierrors.IsNotFound(err) {
			return fmt.Errorf("VM still there (%v)", err)
		}
		return nil
	})
	for _, v := range sim.VMs() {
		if v.Name == name {
			t.Errorf("VM %d left in the simulator", v.VMID)
		}
	}
	for _, v := range sim.Volumes() {
		if strings.Contains(v, fmt.Sprintf("vm-%d-", got.VMID)) || strings.Contains(v, string(pm.UID)) {
			t.Errorf("volume left behind: %s", v)
		}
	}
}

func setPower(t *testing.T, vm *v1alpha1.VirtualMachine, power string) {
	t.Helper()
	patch := client.MergeFrom(vm.DeepCopy())
	vm.Spec.DesiredPowerState = v1alpha1.PowerState(power)
	if err := c.Patch(context.Background(), vm, patch); err != nil {
		t.Fatal(err)
	}
}
