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
package main

import (
	"context"
	"fmt"
	"os"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	dev "github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// BackendCost is what provisioning one VM through banlieue costs on one
// backend: the requests to the API servers, the calls to the backend
// (CountedBy says where they were counted), and the time from a VM's
// create to its Ready.
type BackendCost struct {
	Backend        string             `json:"backend"`
	VMs            int                `json:"vms"`
	SecondsToReady float64            `json:"secondsToAllReady"`
	ToReadyP50     float64            `json:"createToReadyP50Seconds"`
	ToReadyP99     float64            `json:"createToReadyP99Seconds"`
	RequestsPerVM  map[string]float64 `json:"requestsPerVM"`
	CallsPerVM     map[string]float64 `json:"backendCallsPerVM"`
	CountedBy      string             `json:"backendCallsCountedBy"`
	CPUms          map[string]float64 `json:"cpuMsPerVM"`
}

// costOf is the BackendCost of a measured provisioning, its calls those
// the source counted.
func costOf(backend string, vms int, m provisionRun, source, countedBy string) BackendCost {
	return BackendCost{Backend: backend, VMs: vms, SecondsToReady: m.ready.Seconds(),
		ToReadyP50: m.toReady.quantile(0.5) / 1000, ToReadyP99: m.toReady.quantile(0.99) / 1000,
		RequestsPerVM: m.requests, CallsPerVM: m.calls[source], CountedBy: countedBy, CPUms: m.cpuMs}
}

// startProvider starts class's provider as the process name with its
// metrics served on loopback, returning how to read them.
func (h *harness) startProvider(class, name string, args ...string) (devenv.Process, *restclient.Config, error) {
	addr, err := pprofAddr()
	if err != nil {
		return devenv.Process{}, nil, err
	}
	args = append(args, "--metrics-bind-address="+addr, "--metrics-insecure")
	p, err := h.env.StartProvider(class, name, time.Minute, args...)
	if err != nil {
		return devenv.Process{}, nil, err
	}
	return p, &restclient.Config{Host: "http://" + addr}, nil
}

// userDataFor makes ns ready for VMs with the benchmark's user data on
// class's provider: the Secret and the namespace's consent to that
// provider reading it (README).
func (h *harness) userDataFor(ctx context.Context, ns, class string) error {
	if err := h.namespace(ctx, ns); err != nil {
		return err
	}
	if _, err := h.kube.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "db-cloudinit"},
		StringData: map[string]string{"user-data": "#cloud-config\npackage_update: true\n"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	_, err := h.kube.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-userdata"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-userdata"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "banlieue-provider-" + class, Namespace: devenv.Namespace}}}, metav1.CreateOptions{})
	return err
}

// backendVM is a small VM of class and image on the Providers labelled
// bench=BACKEND, with the benchmark's user data.
func backendVM(name, class, image, backend string) *v1alpha1.VirtualMachine {
	return &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
		Placement:         &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": backend}}},
		DesiredPowerState: v1alpha1.PowerStatePoweredOn,
		UserData:          &v1alpha1.UserData{SecretRef: &v1alpha1.KeySelector{Name: "db-cloudinit", Key: "user-data"}},
	}}
}

// createVMs is a provisionJob's create of backendVM named prefix-i in ns.
func createVMs(bc clientset.Interface, ns, prefix, class, image, backend string) (func(context.Context, int) error, func(int) string) {
	name := func(i int) string { return fmt.Sprintf("%s-%d", prefix, i) }
	return func(ctx context.Context, i int) error {
		_, err := bc.BanlieueV1alpha1().VirtualMachines(ns).Create(ctx, backendVM(name(i), class, image, backend), metav1.CreateOptions{})
		return err
	}, name
}

// deleteVMs deletes every VM of ns and waits until they are gone (their
// backends' VMs destroyed), so a later phase's figures carry none of
// their upkeep. Not measured.
func deleteVMs(ctx context.Context, bc clientset.Interface, ns string) error {
	vms := bc.BanlieueV1alpha1().VirtualMachines(ns)
	if err := vms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		return fmt.Errorf("deleting the VMs of %s: %w", ns, err)
	}
	left := 0
	err := wait.PollUntilContextTimeout(ctx, time.Second, 10*time.Minute, true, func(ctx context.Context) (bool, error) {
		list, err := vms.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, nil
		}
		left = len(list.Items)
		return left == 0, nil
	})
	if err != nil {
		return fmt.Errorf("%d VMs of %s still there after 10 minutes: %w", left, ns, err)
	}
	return nil
}

const proxmoxNS = "bench-proxmox"

// proxmoxProvisioning provisions vms VirtualMachines on pvesim (the
// development simulator's three nodes, its token holding the documented
// grants only) through the controller and the Proxmox VE provider, pvesim
// counting the API requests it serves.
func (h *harness) proxmoxProvisioning(ctx context.Context, r *report, vms int) error {
	sim := pvesim.New(pvesim.Options{ACL: dev.ProxmoxACL(), Version: dev.ProxmoxVersion, Nodes: dev.ProxmoxNodes()})
	defer sim.Close()
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := h.proxmoxObjects(ctx, bc, sim); err != nil {
		return err
	}
	if err := h.ensureController(); err != nil {
		return err
	}
	proc, _, err := h.startProvider("proxmox", "provider-proxmox", "--task-poll="+pveTaskPoll.String())
	if err != nil {
		return err
	}
	defer proc.Stop()
	if err := waitImageReady(ctx, bc, "bench-proxmox-template", devenv.Namespace+"/bench-proxmox"); err != nil {
		return err
	}
	if err := h.userDataFor(ctx, proxmoxNS, "proxmox"); err != nil {
		return err
	}
	pids := h.env.PIDs()
	pids[benchProcess] = os.Getpid()
	create, name := createVMs(bc, proxmoxNS, "px", "bench-proxmox-small", "bench-proxmox-template", "proxmox")
	measured, err := h.provision(ctx, bc, pids, provisionJob{ns: proxmoxNS, n: vms, create: create, name: name,
		sources: map[string]callSource{countedByServer: servedCalls(sim.Requests)}})
	if err != nil {
		return err
	}
	cost := costOf("Proxmox VE (pvesim)", vms, measured, countedByServer, "pvesim, the API requests it served")
	r.backends = append(r.backends, cost)
	logf("  proxmox: %d VMs Ready in %.1fs; requests per VM %.1f, pvesim requests per VM %.1f", vms, cost.SecondsToReady, totalRequests(cost.RequestsPerVM), totalRequests(cost.CallsPerVM))
	return deleteVMs(ctx, bc, proxmoxNS)
}

// proxmoxObjects are the Provider (labelled bench=proxmox) on sim, the
// template's VMImage and a small class.
func (h *harness) proxmoxObjects(ctx context.Context, bc clientset.Interface, sim *pvesim.Simulator) error {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-proxmox", Namespace: devenv.Namespace, Labels: map[string]string{"bench": "proxmox"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.URL, CredentialsRef: v1alpha1.LocalObjectReference{Name: "bench-proxmox-token"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CA)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
			},
		},
	}
	if err := h.createProvider(ctx, bc, p, map[string]string{"tokenID": sim.TokenID, "tokenSecret": sim.Secret}); err != nil {
		return err
	}
	api := bc.BanlieueV1alpha1()
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "bench-proxmox-template"}, Spec: v1alpha1.VMImageSpec{OSFamily: "linux",
		Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: v1alpha1.ImageSourceTemplate, Ref: "debian-12-cloud"}}}}
	if _, err := api.VMImages().Create(ctx, img, metav1.CreateOptions{}); err != nil {
		return err
	}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-proxmox-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 1024, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 8, StorageClass: "gold"}}},
		Firmware: "bios"}}
	_, err := api.VMClasses().Create(ctx, class, metav1.CreateOptions{})
	return err
}

// ensureController starts the core controller once for every
// provisioning phase.
func (h *harness) ensureController() error {
	if h.controllerStarted {
		return nil
	}
	if _, err := h.env.StartController(0); err != nil {
		return err
	}
	h.controllerStarted = true
	return nil
}
