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

// Package proxmox drives the Proxmox VE provider binary against the
// simulator (pkg/providers/proxmox/pvesim) through the real control plane.
package proxmox

import (
	"context"
	"fmt"
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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

const ns = devenv.Namespace

var (
	env        *devenv.Env
	provider   devenv.Process
	sim        *pvesim.Simulator
	c          client.Client
	kubectlBin string
)

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	kubectlBin = filepath.Join(root, "bin", "kubectl")
	// The token holds the documented least-privilege grants only; 8.4
	// with import content on local takes imported images (spec.import).
	sim = pvesim.New(pvesim.Options{TaskDelay: 100 * time.Millisecond, AgentDelay: 500 * time.Millisecond, ACL: dev.ProxmoxACL(),
		Version: dev.ProxmoxVersion, Nodes: dev.ProxmoxNodes()})
	defer sim.Close()
	dir, err := os.MkdirTemp("", "banlieue-proxmox-")
	if err != nil {
		panic(err)
	}
	env, err = devenv.Start(context.Background(), devenv.Config{Dir: dir, BinDir: filepath.Join(root, "bin"), Setup: dev.InstallRBAC, Controllers: 1})
	if err != nil {
		fmt.Fprintf(os.Stderr, "proxmox: environment: %v (logs in %s)\n", err, filepath.Join(dir, "logs"))
		return 1
	}
	defer env.Stop()
	if provider, err = startProvider(); err != nil {
		fmt.Fprintf(os.Stderr, "proxmox: provider: %v\n", err)
		return 1
	}
	if c, err = env.ServedClient(context.Background()); err != nil {
		fmt.Fprintf(os.Stderr, "proxmox: %v\n", err)
		return 1
	}
	code := m.Run()
	if err := env.NoConflictErrors("*"); err != nil {
		fmt.Fprintf(os.Stderr, "proxmox: %v\n", err)
		code = 1
	}
	if code != 0 {
		fmt.Fprintf(os.Stderr, "proxmox: logs in %s\n", filepath.Join(dir, "logs"))
		return code
	}
	_ = os.RemoveAll(dir)
	return 0
}

// startProvider starts "banlieue provider proxmox" (again, after a kill).
func startProvider() (devenv.Process, error) {
	return env.StartProvider("proxmox", "provider-proxmox", 2*time.Second, "--task-poll=50ms")
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
		Endpoint: sim.URL, CA: sim.CA, TokenID: sim.TokenID, TokenSecret: sim.Secret, Secret: creds, Grant: true,
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
