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
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi/simulator"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
	"github.com/firestoned/banlieue/pkg/providers/proxmox"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
	"github.com/firestoned/banlieue/pkg/providers/vsphere"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// proxmoxSnapshots sets Proxmox VE up on pvesim (the development
// simulator's three nodes, the token holding the documented grants only,
// every task lasting -snapshot-task-delay), its provider started with
// --task-poll pveTaskPoll and the direct client with the same.
func (h *harness) proxmoxSnapshots(ctx context.Context, bc *clientset.Clientset, row *SnapshotBackend) (*snapshotSide, func(), error) {
	// The client reads a task every 100 ms for its first 2 s, then every
	// TaskPoll (proxmox.Client.await), on both sides.
	row.Backend, row.TaskWait = "proxmox (pvesim)", "task status read every 100ms for 2s, then every "+pveTaskPoll.String()
	sim := pvesim.New(pvesim.Options{TaskDelay: h.cfg.SnapshotTaskDelay, ACL: dev.ProxmoxACL(), Version: dev.ProxmoxVersion, Nodes: dev.ProxmoxNodes()})
	stops := []func(){sim.Close}
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-snap-proxmox", Namespace: devenv.Namespace, Labels: map[string]string{"bench-snapshots": "proxmox"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.URL, CredentialsRef: v1alpha1.LocalObjectReference{Name: "bench-snap-proxmox-token"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CA)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
			},
		},
	}
	if err := h.createProvider(ctx, bc, p, map[string]string{"tokenID": sim.TokenID, "tokenSecret": sim.Secret}); err != nil {
		return nil, stop, err
	}
	proc, err := h.env.StartProvider("proxmox", "provider-proxmox", time.Minute, "--task-poll="+pveTaskPoll.String())
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, proc.Stop)
	if err := waitProviderReady(ctx, bc, p.Name); err != nil {
		return nil, stop, err
	}
	apiVM, spec, err := h.snapshotVMs(ctx, bc, "proxmox", "bench-snap-class", "bench-snap-image", p.Labels)
	if err != nil {
		return nil, stop, err
	}
	sessions := proxmox.NewSessions(proxmox.Options{TaskPoll: pveTaskPoll})
	stops = append(stops, func() { sessions.Forget("bench/snapshots"); sessions.Wait() })
	backend, err := sessions.Get(ctx, "bench/snapshots", providers.Connection{Endpoint: sim.URL, CABundle: sim.CA,
		Credentials: providers.Credentials{Username: sim.TokenID, Password: sim.Secret}})
	if err != nil {
		return nil, stop, err
	}
	snapper, ok := providers.SnapshotsOf(backend)
	if !ok {
		return nil, stop, fmt.Errorf("the Proxmox VE backend %T takes no snapshots", backend)
	}
	return &snapshotSide{row: row, apiVM: apiVM, snapper: snapper, spec: spec}, stop, nil
}

// vsphereSnapshots sets vSphere up on vcsim (one datacenter, one
// cluster), every simulated task delayed by -snapshot-task-delay (vcsim's
// TaskDelay, for the provider's calls and the benchmark's alike); its
// client is told of a task's end (a property collector wait), no polling.
func (h *harness) vsphereSnapshots(ctx context.Context, bc *clientset.Clientset, row *SnapshotBackend) (*snapshotSide, func(), error) {
	row.Backend, row.TaskWait = "vsphere (vcsim)", "a task's end pushed to the client (property collector wait)"
	// Process-wide: set before the simulator serves, reset after.
	simulator.TaskDelay.Delay = int(h.cfg.SnapshotTaskDelay.Milliseconds())
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 1, Template: simTemplate, Username: simUser, Password: simPassword, DHCP: true})
	if err != nil {
		simulator.TaskDelay.Delay = 0
		return nil, nil, err
	}
	stops := []func(){sim.Close, func() { simulator.TaskDelay.Delay = 0 }}
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-snap-vsphere", Namespace: devenv.Namespace, Labels: map[string]string{"bench-snapshots": "vsphere"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.Endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: "bench-snap-vsphere-credentials"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CABundle)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
			},
		},
	}
	if err := h.createProvider(ctx, bc, p, map[string]string{"username": simUser, "password": simPassword}); err != nil {
		return nil, stop, err
	}
	proc, err := h.startVSphereProvider()
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, proc.Stop)
	if err := waitProviderReady(ctx, bc, p.Name); err != nil {
		return nil, stop, err
	}
	apiVM, spec, err := h.snapshotVMs(ctx, bc, "vsphere", "bench-snap-class", "bench-snap-image", p.Labels)
	if err != nil {
		return nil, stop, err
	}
	sessions := vsphere.NewSessions()
	stops = append(stops, func() { sessions.Forget("bench/snapshots"); sessions.Wait() })
	backend, err := sessions.Get(ctx, "bench/snapshots", providers.Connection{Endpoint: sim.Endpoint, CABundle: sim.CABundle,
		Credentials: providers.Credentials{Username: simUser, Password: simPassword}})
	if err != nil {
		return nil, stop, err
	}
	snapper, ok := providers.SnapshotsOf(backend)
	if !ok {
		return nil, stop, fmt.Errorf("the vSphere backend %T takes no snapshots", backend)
	}
	return &snapshotSide{row: row, apiVM: apiVM, snapper: snapper, spec: spec}, stop, nil
}

// libvirtSnapshots sets libvirt up: a private libvirtd with the test
// guest (QEMU without KVM), as the console benchmark's, its provider and
// the direct client both libvirt's with domain type qemu. No simulated
// delay: libvirtd and QEMU take the time they take.
func (h *harness) libvirtSnapshots(ctx context.Context, bc *clientset.Clientset, row *SnapshotBackend) (*snapshotSide, func(), error) {
	row.Backend, row.TaskDelay = "libvirt (real libvirtd, QEMU without KVM)", "none (real)"
	row.TaskWait = "libvirt's calls return when done"
	if m := libvirtd.Missing(); m != "" {
		row.Skipped = "libvirtd cannot run here: needs " + m
		return nil, nil, errNotHere
	}
	d, stopD, err := h.guestLibvirtd(ctx)
	if err != nil {
		return nil, nil, err
	}
	stops := []func(){stopD}
	stop := func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if err := h.libvirtObjects(ctx, bc, d); err != nil {
		return nil, stop, err
	}
	proc, err := h.env.StartProvider("libvirt", "provider-libvirt", time.Minute, "--domain-type=qemu")
	if err != nil {
		return nil, stop, err
	}
	stops = append(stops, proc.Stop)
	if err := waitImageReady(ctx, bc, "bench-libvirt-guest", devenv.Namespace+"/bench-libvirt"); err != nil {
		return nil, stop, err
	}
	apiVM, spec, err := h.snapshotVMs(ctx, bc, "libvirt", "bench-libvirt-small", "bench-libvirt-guest", map[string]string{"bench": "libvirt"})
	if err != nil {
		return nil, stop, err
	}
	// Both guests booted to their shell before any round: a booting
	// guest (QEMU without KVM) takes the CPU the rounds would measure.
	for _, vm := range []string{apiVM, "snap-libvirt-direct"} {
		domain := providers.BackendName(snapNS, vm)
		deadline := time.Now().Add(5 * time.Minute)
		for !strings.Contains(d.SerialLog(domain), "BANLIEUE-READY") {
			if time.Now().After(deadline) {
				return nil, stop, fmt.Errorf("the guest of %s did not boot in 5 minutes", vm)
			}
			time.Sleep(500 * time.Millisecond)
		}
	}
	sessions := libvirt.NewSessions(libvirt.Options{DomainType: "qemu"})
	stops = append(stops, func() { sessions.Forget("bench/snapshots"); sessions.Wait() })
	backend, err := sessions.Get(ctx, "bench/snapshots", providers.Connection{Endpoint: d.URI})
	if err != nil {
		return nil, stop, err
	}
	snapper, ok := providers.SnapshotsOf(backend)
	if !ok {
		return nil, stop, fmt.Errorf("the libvirt backend %T takes no snapshots", backend)
	}
	return &snapshotSide{row: row, apiVM: apiVM, snapper: snapper, spec: spec}, stop, nil
}

// machineView is what the benchmark reads of a machine: its snapshot
// fields and where its VM is.
type machineView struct {
	metav1.ObjectMeta `json:"metadata"`
	Spec              struct {
		Snapshots      []infrav1.MachineSnapshot `json:"snapshots,omitempty"`
		RestoreRequest *infrav1.RestoreRequest   `json:"restoreRequest,omitempty"`
	} `json:"spec"`
	Status struct {
		Snapshots []infrav1.MachineSnapshotStatus `json:"snapshots,omitempty"`
		Restore   *infrav1.RestoreStatus          `json:"restore,omitempty"`
		TaskRef   string                          `json:"taskRef,omitempty"`
		Location  *infrav1.BuiltLocation          `json:"location,omitempty"`
	} `json:"status"`
}

// wants: the machine's spec asks for snapshot name.
func (m machineView) wants(name string) bool {
	for _, s := range m.Spec.Snapshots {
		if s.Name == name {
			return true
		}
	}
	return false
}

// phaseOf is the status entry of snapshot name's phase; "" for none.
func (m machineView) phaseOf(name string) string {
	for _, s := range m.Status.Snapshots {
		if s.Name == name {
			return string(s.Phase)
		}
	}
	return ""
}

// restorePhase is the recorded restore's phase when it is id's.
func (m machineView) restorePhase(id string) string {
	if r := m.Status.Restore; r != nil && r.ID == id {
		return string(r.Phase)
	}
	return ""
}

func viewOf(u *unstructured.Unstructured) (machineView, error) {
	var m machineView
	err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &m)
	return m, err
}

// machineResource is the resource of the VM's machine.
func machineResource(vm *v1alpha1.VirtualMachine) (string, error) {
	ref := vm.Status.InfrastructureRef
	if ref == nil || ref.Name == "" {
		return "", fmt.Errorf("VM %s has no machine", vm.Name)
	}
	return strings.ToLower(ref.Kind) + "s", nil
}

// machineOf reads vm's machine.
func (h *harness) machineOf(ctx context.Context, vm *v1alpha1.VirtualMachine) (machineView, error) {
	res, err := machineResource(vm)
	if err != nil {
		return machineView{}, err
	}
	dyn, err := dynamic.NewForConfig(h.admin)
	if err != nil {
		return machineView{}, err
	}
	u, err := dyn.Resource(infrav1.GroupVersion.WithResource(res)).Namespace(vm.Namespace).Get(ctx, vm.Status.InfrastructureRef.Name, metav1.GetOptions{})
	if err != nil {
		return machineView{}, err
	}
	return viewOf(u)
}

// machineLog is every change of one machine, as a watch delivered it,
// with when it arrived.
type machineLog struct {
	mu     sync.Mutex
	seen   []seenMachine
	w      watch.Interface
	done   chan struct{}
	failed error
}

type seenMachine struct {
	at time.Time
	m  machineView
}

// followMachine watches the machine of the VM name from now on.
func (h *harness) followMachine(ctx context.Context, name string) (*machineLog, error) {
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return nil, err
	}
	vm, err := bc.BanlieueV1alpha1().VirtualMachines(snapNS).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return nil, err
	}
	res, err := machineResource(vm)
	if err != nil {
		return nil, err
	}
	dyn, err := dynamic.NewForConfig(h.admin)
	if err != nil {
		return nil, err
	}
	ri := dyn.Resource(infrav1.GroupVersion.WithResource(res)).Namespace(snapNS)
	selector := "metadata.name=" + vm.Status.InfrastructureRef.Name
	list, err := ri.List(ctx, metav1.ListOptions{FieldSelector: selector})
	if err != nil {
		return nil, err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.GetResourceVersion(), &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return ri.Watch(ctx, o)
		},
	})
	if err != nil {
		return nil, err
	}
	l := &machineLog{w: w, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		for ev := range w.ResultChan() {
			u, ok := ev.Object.(*unstructured.Unstructured)
			if !ok {
				continue
			}
			m, err := viewOf(u)
			l.mu.Lock()
			if err != nil {
				l.failed = err
			} else {
				l.seen = append(l.seen, seenMachine{at: time.Now(), m: m})
			}
			l.mu.Unlock()
		}
	}()
	return l, nil
}

func (l *machineLog) stop() {
	l.w.Stop()
	<-l.done
}

// hops splits [start, end] at the first change after start where each of
// marks holds in turn: the seconds from start to the first, between
// them, and from the last to end; -1 for a hop whose mark was not seen.
func (l *machineLog) hops(start, end time.Time, marks ...func(machineView) bool) []float64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	at := make([]time.Time, 0, len(marks))
	from := start
	for _, mark := range marks {
		var found time.Time
		for _, s := range l.seen {
			if !s.at.Before(from) && !s.at.After(end) && mark(s.m) {
				found = s.at
				break
			}
		}
		at = append(at, found)
		if !found.IsZero() {
			from = found
		}
	}
	out := make([]float64, 0, len(marks)+1)
	prev := start
	for _, t := range append(at, end) {
		if t.IsZero() || prev.IsZero() {
			out = append(out, -1)
		} else {
			out = append(out, t.Sub(prev).Seconds())
		}
		prev = t
	}
	return out
}
