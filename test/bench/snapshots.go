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
	"errors"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers"
)

// snapshotOps are the three operations of a round, in order.
var snapshotOps = []string{"create", "restore", "delete"}

// SnapshotBackend is one backend's snapshot rounds through the API
// against the same backend calls made directly, in the same run: one
// row group of snapshots.md.
type SnapshotBackend struct {
	Backend string `json:"backend"`
	// Skipped says why the backend was not measured (or failed).
	Skipped string `json:"skipped,omitempty"`
	// TaskDelay is how long every simulated task runs, both sides;
	// TaskWait how the backend's client learns a task ended, both sides.
	TaskDelay string `json:"taskDelay"`
	TaskWait  string `json:"taskWait,omitempty"`
	// IncludeMemory: the snapshots keep the running VM's memory (a
	// restore resumes it, so neither side powers anything afterwards).
	IncludeMemory bool `json:"includeMemory"`
	Rounds        int  `json:"rounds"`
	// APISeconds and DirectSeconds are each round's seconds per
	// operation (create, restore, delete), in run order.
	APISeconds    map[string][]float64 `json:"apiSeconds"`
	DirectSeconds map[string][]float64 `json:"directSeconds"`
	// Ops are the per-operation figures; Round the three together.
	Ops   []SnapshotOp `json:"ops"`
	Round SnapshotOp   `json:"round"`
	// APIPhasesP50ms is where an API operation's time goes, per
	// operation: the p50 of each hop (phaseNames), as the benchmark saw
	// the objects change on a watch.
	APIPhasesP50ms map[string][]float64 `json:"apiPhasesP50ms"`
	// Requests counts the API requests per round, by "verb resource"
	// (kube-apiserver's and banlieue's counts), the benchmark's own
	// creates and deletes included.
	RequestsPerRound map[string]float64 `json:"requestsPerRound,omitempty"`
}

// SnapshotOp is one operation's figures, both sides.
type SnapshotOp struct {
	Op          string  `json:"op"`
	APIP50ms    float64 `json:"apiP50ms"`
	DirectP50ms float64 `json:"directP50ms"`
	// APIPerS and DirectPerS are operations (or rounds) per second: the
	// rounds over the sum of their seconds.
	APIPerS    float64 `json:"apiPerSecond"`
	DirectPerS float64 `json:"directPerSecond"`
	// Ratio is APIPerS / DirectPerS; the target is ≥ 0.8.
	Ratio float64 `json:"ratio"`
}

// phaseNames are the hops an API operation goes through, as the
// benchmark sees them on a watch of the objects and of the VM's machine.
var phaseNames = []string{"core controller → machine spec", "provider picks it up (first status write)",
	"backend call (+ task and result status writes)", "core controller → object status"}

// snapshotTarget is the target: the API's rate at least 0.8 of the direct calls'.
const snapshotTarget = 0.8

// snapshotSide is one backend set up for the rounds: the VM measured
// through the API and the twin VM the backend is called on directly.
type snapshotSide struct {
	row *SnapshotBackend
	// apiVM is the VM whose snapshots go through the API; its machine's
	// changes are followed by machineLog.
	apiVM string
	// snapper and spec are the direct side: the backend's Snapshots and
	// the twin VM (built by the same provider, same class and image).
	snapper providers.Snapshots
	spec    providers.MachineSpec
}

// snapshotBackend sets one backend up and returns its side, and a stop
// for what it started.
type snapshotBackend func(ctx context.Context, bc *clientset.Clientset, row *SnapshotBackend) (*snapshotSide, func(), error)

// snapshotsBench measures, on Proxmox VE (pvesim), vSphere (vcsim) and
// libvirt (a private libvirtd) in turn, rounds of snapshot create,
// restore and delete through the API (VirtualMachineSnapshot to
// readyToUse, VirtualMachineRestore to Done, the snapshot deleted until
// gone) against the same backend calls made directly with the backend
// package's client on a twin VM of the same backend; writes snapshots.md
// and snapshots.json.
func (h *harness) snapshotsBench(ctx context.Context) error {
	started := time.Now()
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := h.snapshotObjects(ctx, bc); err != nil {
		return err
	}
	if _, err := h.env.StartController(0); err != nil {
		return err
	}
	var rows []SnapshotBackend
	for _, b := range []struct {
		name  string
		setUp snapshotBackend
	}{{"proxmox", h.proxmoxSnapshots}, {"vsphere", h.vsphereSnapshots}, {"libvirt", h.libvirtSnapshots}} {
		logf("snapshots on %s: %d rounds each side", b.name, h.cfg.SnapshotRounds)
		row := SnapshotBackend{Rounds: h.cfg.SnapshotRounds, IncludeMemory: true, TaskDelay: h.cfg.SnapshotTaskDelay.String(),
			APISeconds: map[string][]float64{}, DirectSeconds: map[string][]float64{}, APIPhasesP50ms: map[string][]float64{}}
		err := h.snapshotRounds(ctx, bc, b.setUp, &row)
		if errors.Is(err, errNotHere) {
			logf("  %s: not measured: %s", b.name, row.Skipped)
			err = nil
		}
		if err != nil {
			if h.cfg.Strict || ctx.Err() != nil {
				return fmt.Errorf("snapshots on %s: %w", b.name, err)
			}
			row.Skipped = "failed: " + err.Error()
			logf("  %s: %v", b.name, err)
		}
		rows = append(rows, row)
	}
	return writeSnapshots(h.cfg.Out, rows, started)
}

// snapshotObjects creates the class and image the simulators' VMs use:
// one CPU, 1 GiB, one 10 GiB disk, no network; the image a template on
// each simulator (libvirt's VMs are the test guest's, libvirtObjects).
func (h *harness) snapshotObjects(ctx context.Context, bc *clientset.Clientset) error {
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-snap-class"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 1024, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	if _, err := bc.BanlieueV1alpha1().VMClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "bench-snap-image"}, Spec: v1alpha1.VMImageSpec{OSFamily: "linux",
		Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "debian-12-cloud"},
			{ProviderClass: "vsphere", Kind: "Template", Ref: simTemplate}}}}
	if _, err := bc.BanlieueV1alpha1().VMImages().Create(ctx, img, metav1.CreateOptions{}); err != nil {
		return err
	}
	return h.namespace(ctx, snapNS)
}

// errNotHere: the backend cannot run on this machine (row.Skipped says why).
var errNotHere = errors.New("not here")

// snapNS holds the benchmark's VMs, snapshots and restores.
const snapNS = "bench-snap"

// snapshotRounds sets the backend up, then runs the rounds alternated
// (direct, API, API, direct, ...: neither side always goes first) and
// fills row in.
func (h *harness) snapshotRounds(ctx context.Context, bc *clientset.Clientset, setUp snapshotBackend, row *SnapshotBackend) error {
	side, stop, err := setUp(ctx, bc, row)
	if stop != nil {
		defer stop()
	}
	if err != nil {
		return err
	}
	ml, err := h.followMachine(ctx, side.apiVM)
	if err != nil {
		return err
	}
	defer ml.stop()
	phases := map[string][][]float64{}
	reqs, err := h.startRequests(ctx)
	if err != nil {
		return err
	}
	apiRounds := 0
	for i := range row.Rounds * 2 {
		if i%4 == 0 || i%4 == 3 {
			secs, err := directRound(ctx, side, row.IncludeMemory)
			if err != nil {
				return fmt.Errorf("direct round %d: %w", i/2+1, err)
			}
			for j, op := range snapshotOps {
				row.DirectSeconds[op] = append(row.DirectSeconds[op], secs[j])
			}
			logf("  direct: create %.0f ms, restore %.0f ms, delete %.0f ms", secs[0]*1000, secs[1]*1000, secs[2]*1000)
			continue
		}
		secs, hops, err := apiRound(ctx, bc, side, ml, row.IncludeMemory, apiRounds)
		if err != nil {
			return fmt.Errorf("API round %d: %w", apiRounds+1, err)
		}
		apiRounds++
		for j, op := range snapshotOps {
			row.APISeconds[op] = append(row.APISeconds[op], secs[j])
			phases[op] = append(phases[op], hops[j])
		}
		logf("  API:    create %.0f ms, restore %.0f ms, delete %.0f ms", secs[0]*1000, secs[1]*1000, secs[2]*1000)
	}
	// Per API round (perVM divides by the count it is given; no VM is
	// created meanwhile, so its user-create correction drops out). The
	// direct rounds send none themselves.
	if row.RequestsPerRound, err = reqs.perVM(ctx, apiRounds); err != nil {
		return err
	}
	row.Ops = nil
	var apiTotal, directTotal []float64
	for _, op := range snapshotOps {
		a, d := row.APISeconds[op], row.DirectSeconds[op]
		row.Ops = append(row.Ops, opFigures(op, a, d))
		apiTotal, directTotal = addSeconds(apiTotal, a), addSeconds(directTotal, d)
		for p := range phaseNames {
			var ms []float64
			for _, hop := range phases[op] {
				if hop[p] >= 0 {
					ms = append(ms, hop[p]*1000)
				}
			}
			row.APIPhasesP50ms[op] = append(row.APIPhasesP50ms[op], median(ms))
		}
	}
	row.Round = opFigures("round (create + restore + delete)", apiTotal, directTotal)
	return nil
}

// addSeconds adds b to a element by element.
func addSeconds(a, b []float64) []float64 {
	if a == nil {
		a = make([]float64, len(b))
	}
	for i := range b {
		a[i] += b[i]
	}
	return a
}

func opFigures(op string, api, direct []float64) SnapshotOp {
	o := SnapshotOp{Op: op, APIP50ms: median(api) * 1000, DirectP50ms: median(direct) * 1000,
		APIPerS: perSecond(api), DirectPerS: perSecond(direct)}
	if o.DirectPerS > 0 {
		o.Ratio = o.APIPerS / o.DirectPerS
	}
	return o
}

func perSecond(secs []float64) float64 {
	var sum float64
	for _, s := range secs {
		sum += s
	}
	if sum == 0 {
		return 0
	}
	return float64(len(secs)) / sum
}

// median of v; -1 for none.
func median(v []float64) float64 {
	if len(v) == 0 {
		return -1
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// noRecord is the direct side's TaskRecorder: nothing to record to.
func noRecord(context.Context, string) error { return nil }

// directRound is the same three backend calls the provider makes, on the
// twin VM: CreateSnapshot, RevertSnapshot, DeleteSnapshot, each timed.
func directRound(ctx context.Context, side *snapshotSide, memory bool) ([3]float64, error) {
	var secs [3]float64
	name := providers.SnapshotName(string(uuid.NewUUID()))
	start := time.Now()
	if _, err := side.snapper.CreateSnapshot(ctx, side.spec, providers.SnapshotSpec{Name: name, Description: snapNS + "/direct", IncludeMemory: memory}, "", noRecord); err != nil {
		return secs, fmt.Errorf("creating snapshot %s: %w", name, err)
	}
	secs[0] = time.Since(start).Seconds()
	start = time.Now()
	if err := side.snapper.RevertSnapshot(ctx, side.spec, name, "", noRecord); err != nil {
		return secs, fmt.Errorf("reverting to snapshot %s: %w", name, err)
	}
	secs[1] = time.Since(start).Seconds()
	start = time.Now()
	if err := side.snapper.DeleteSnapshot(ctx, side.spec, name, "", noRecord); err != nil {
		return secs, fmt.Errorf("deleting snapshot %s: %w", name, err)
	}
	secs[2] = time.Since(start).Seconds()
	return secs, nil
}

// apiRound is a VirtualMachineSnapshot created until readyToUse, a
// VirtualMachineRestore to it until Done, then the snapshot deleted until
// gone, each timed from the request to the watch event that shows it
// done; hops are each operation's phases (seconds, -1 when not seen).
func apiRound(ctx context.Context, bc *clientset.Clientset, side *snapshotSide, ml *machineLog, memory bool, round int) ([3]float64, [3][]float64, error) {
	var secs [3]float64
	var hops [3][]float64
	snaps := bc.BanlieueV1alpha1().VirtualMachineSnapshots(snapNS)
	restores := bc.BanlieueV1alpha1().VirtualMachineRestores(snapNS)
	snapName := fmt.Sprintf("%s-snap-%d", side.apiVM, round)
	var backendName string
	start, end, err := timedUntil(ctx, snapName,
		func(ctx context.Context) (string, error) {
			l, err := snaps.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		},
		snaps.Watch,
		func(ctx context.Context) error {
			s, err := snaps.Create(ctx, &v1alpha1.VirtualMachineSnapshot{ObjectMeta: metav1.ObjectMeta{Name: snapName, Namespace: snapNS},
				Spec: v1alpha1.VirtualMachineSnapshotSpec{VMName: side.apiVM, IncludeMemory: memory}}, metav1.CreateOptions{})
			if err == nil {
				backendName = providers.SnapshotName(string(s.UID))
			}
			return err
		},
		func(ev watch.Event) (bool, error) {
			s, ok := ev.Object.(*v1alpha1.VirtualMachineSnapshot)
			if !ok {
				return false, nil
			}
			if c := meta.FindStatusCondition(s.Status.Conditions, v1alpha1.SnapshotReady); c != nil && c.Reason == v1alpha1.SnapshotReasonFailed {
				return false, fmt.Errorf("snapshot %s failed: %s", s.Name, c.Message)
			}
			return s.Status.ReadyToUse, nil
		})
	if err != nil {
		return secs, hops, fmt.Errorf("snapshot %s: %w", snapName, err)
	}
	secs[0] = end.Sub(start).Seconds()
	hops[0] = ml.hops(start, end,
		func(m machineView) bool { return m.wants(backendName) },
		func(m machineView) bool { return m.phaseOf(backendName) == "Creating" },
		func(m machineView) bool { return m.phaseOf(backendName) == "Ready" })

	restoreName := fmt.Sprintf("%s-restore-%d", side.apiVM, round)
	var restoreUID string
	start, end, err = timedUntil(ctx, restoreName,
		func(ctx context.Context) (string, error) {
			l, err := restores.List(ctx, metav1.ListOptions{Limit: 1})
			if err != nil {
				return "", err
			}
			return l.ResourceVersion, nil
		},
		restores.Watch,
		func(ctx context.Context) error {
			r, err := restores.Create(ctx, &v1alpha1.VirtualMachineRestore{ObjectMeta: metav1.ObjectMeta{Name: restoreName, Namespace: snapNS},
				Spec: v1alpha1.VirtualMachineRestoreSpec{VMName: side.apiVM, SnapshotName: snapName}}, metav1.CreateOptions{})
			if err == nil {
				restoreUID = string(r.UID)
			}
			return err
		},
		func(ev watch.Event) (bool, error) {
			r, ok := ev.Object.(*v1alpha1.VirtualMachineRestore)
			if !ok {
				return false, nil
			}
			switch r.Status.Phase {
			case v1alpha1.RestoreFailed, v1alpha1.RestoreUnknown:
				return false, fmt.Errorf("restore %s is %s: %s", r.Name, r.Status.Phase, r.Status.Message)
			}
			return r.Status.Phase == v1alpha1.RestoreDone, nil
		})
	if err != nil {
		return secs, hops, fmt.Errorf("restore %s: %w", restoreName, err)
	}
	secs[1] = end.Sub(start).Seconds()
	hops[1] = ml.hops(start, end,
		func(m machineView) bool {
			return m.Spec.RestoreRequest != nil && m.Spec.RestoreRequest.ID == restoreUID
		},
		func(m machineView) bool { return m.restorePhase(restoreUID) == "Restoring" },
		func(m machineView) bool { return m.restorePhase(restoreUID) == "Done" })

	start, end, err = timedUntil(ctx, snapName,
		func(ctx context.Context) (string, error) {
			s, err := snaps.Get(ctx, snapName, metav1.GetOptions{})
			if err != nil {
				return "", err
			}
			return s.ResourceVersion, nil
		},
		snaps.Watch,
		func(ctx context.Context) error { return snaps.Delete(ctx, snapName, metav1.DeleteOptions{}) },
		func(ev watch.Event) (bool, error) { return ev.Type == watch.Deleted, nil })
	if err != nil {
		return secs, hops, fmt.Errorf("deleting snapshot %s: %w", snapName, err)
	}
	secs[2] = end.Sub(start).Seconds()
	hops[2] = ml.hops(start, end,
		func(m machineView) bool { return !m.wants(backendName) },
		func(m machineView) bool { return m.phaseOf(backendName) == "Deleting" },
		func(m machineView) bool { return m.phaseOf(backendName) == "" })
	return secs, hops, nil
}

// timedUntil watches the object name from the resourceVersion rv
// returns, then calls act and waits until done says so of an event; it
// returns when act was called and when done was seen.
func timedUntil(ctx context.Context, name string, rv func(context.Context) (string, error),
	watchFn func(context.Context, metav1.ListOptions) (watch.Interface, error),
	act func(context.Context) error, done func(watch.Event) (bool, error)) (time.Time, time.Time, error) {
	from, err := rv(ctx)
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	w, err := watchFn(ctx, metav1.ListOptions{ResourceVersion: from, FieldSelector: "metadata.name=" + name})
	if err != nil {
		return time.Time{}, time.Time{}, err
	}
	defer w.Stop()
	start := time.Now()
	if err := act(ctx); err != nil {
		return time.Time{}, time.Time{}, err
	}
	timeout := time.After(2 * time.Minute)
	for {
		select {
		case <-ctx.Done():
			return time.Time{}, time.Time{}, ctx.Err()
		case <-timeout:
			return time.Time{}, time.Time{}, fmt.Errorf("not done in 2 minutes")
		case ev, ok := <-w.ResultChan():
			if !ok {
				return time.Time{}, time.Time{}, fmt.Errorf("the watch ended")
			}
			if ev.Type == watch.Error {
				return time.Time{}, time.Time{}, apierrors.FromObject(ev.Object)
			}
			ok, err := done(ev)
			if err != nil {
				return time.Time{}, time.Time{}, err
			}
			if ok {
				return start, time.Now(), nil
			}
		}
	}
}

// snapshotVMs creates the API VM and its direct twin (same class and
// image, placed on the backend's Provider by its labels) and waits until
// both run on a machine; returns the twin's MachineSpec as the provider
// builds it to find the VM (name, instance UUID, place, last task).
func (h *harness) snapshotVMs(ctx context.Context, bc *clientset.Clientset, backend, class, image string, providerLabels map[string]string) (string, providers.MachineSpec, error) {
	apiVM, twin := "snap-"+backend+"-api", "snap-"+backend+"-direct"
	vms := bc.BanlieueV1alpha1().VirtualMachines(snapNS)
	for _, name := range []string{apiVM, twin} {
		vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: snapNS}, Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: class}, ImageRef: v1alpha1.LocalObjectReference{Name: image},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: providerLabels}}}}
		if _, err := vms.Create(ctx, vm, metav1.CreateOptions{}); err != nil {
			return "", providers.MachineSpec{}, err
		}
	}
	var last *v1alpha1.VirtualMachine
	for _, name := range []string{apiVM, twin} {
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
			vm, err := vms.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			last = vm
			return vm.Status.PowerState == v1alpha1.PowerStatePoweredOn && vm.Status.InfrastructureRef != nil, nil
		})
		if err != nil {
			state := ""
			if last != nil {
				state = fmt.Sprintf(": power %q, conditions %+v", last.Status.PowerState, last.Status.Conditions)
			}
			return "", providers.MachineSpec{}, fmt.Errorf("VM %s not running on a machine in 3 minutes%s", name, state)
		}
	}
	m, err := h.machineOf(ctx, last)
	if err != nil {
		return "", providers.MachineSpec{}, err
	}
	spec := providers.MachineSpec{Name: providers.BackendName(snapNS, twin), InstanceUUID: string(m.UID), TaskRef: m.Status.TaskRef}
	if l := m.Status.Location; l != nil {
		spec.Location.Datacenter, spec.Location.Cluster, spec.Location.Host = l.Datacenter, l.Cluster, l.Host
	}
	return apiVM, spec, nil
}

// writeSnapshots writes snapshots.md and snapshots.json into dir.
func writeSnapshots(dir string, rows []SnapshotBackend, started time.Time) error {
	var b strings.Builder
	host, _ := os.Hostname()
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(&b, "# banlieue snapshot benchmark\n\nRun %s on %s: %d cores, %s, %s/%s, load average at the end %s. Took %s.\n\n",
		started.UTC().Format(time.RFC3339), host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH,
		strings.Join(strings.Fields(string(load))[:min(3, len(strings.Fields(string(load))))], " "), time.Since(started).Round(time.Second))
	b.WriteString("Each backend in turn, in one run: Proxmox VE and vSphere on in-process simulators (pvesim, vcsim), libvirt on a private " +
		"libvirtd with the test guest (QEMU without KVM). Per backend, two running VMs of the same class and image, built by " +
		"the backend's provider: on one, rounds through the API (a VirtualMachineSnapshot created until `readyToUse`, a " +
		"VirtualMachineRestore to it until `Done`, the snapshot deleted until it is gone; requests through kube-apiserver's " +
		"aggregation, each timed from the request to the watch event showing it done); on the other, the same backend calls " +
		"the provider makes, made directly by the benchmark with the backend package's client (`providers.SnapshotsOf(backend)`: " +
		"`CreateSnapshot`, `RevertSnapshot`, `DeleteSnapshot`). Rounds alternated (direct, API, API, direct, ...). Snapshots keep the " +
		"running VM's memory, so a restore resumes it and neither side powers anything afterwards. Rates are the rounds over the " +
		"sum of their seconds; the target is the API's rate at least 0.8 of the direct calls'.\n\n")
	b.WriteString("| backend | backend task delay (both sides) | operation | API p50 ms | direct p50 ms | API /s | direct /s | API / direct | target | met |\n" +
		"|---|---|---|---:|---:|---:|---:|---:|---|---|\n")
	for _, r := range rows {
		delay := r.TaskDelay
		if r.TaskWait != "" {
			delay += "; " + r.TaskWait
		}
		if r.Skipped != "" {
			fmt.Fprintf(&b, "| %s | %s | | | | | | | ≥ %.1f | not measured: %s |\n", r.Backend, delay, snapshotTarget, r.Skipped)
			continue
		}
		for _, o := range append(slices.Clone(r.Ops), r.Round) {
			met := "yes"
			if o.Ratio < snapshotTarget {
				met = "**no**"
			}
			op := o.Op
			if op == r.Round.Op {
				op = "**" + op + "**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %.0f | %.0f | %.2f | %.2f | %.2f | ≥ %.1f | %s |\n",
				r.Backend, delay, op, o.APIP50ms, o.DirectP50ms, o.APIPerS, o.DirectPerS, o.Ratio, snapshotTarget, met)
		}
	}
	b.WriteString("\nWhere an API operation's time goes (p50 ms of each hop, as the benchmark saw the objects and the API VM's machine " +
		"change on watches; the hops' p50s need not add up to the total's):\n\n")
	b.WriteString("| backend | operation | " + strings.Join(phaseNames, " | ") + " | API total p50 | direct calls p50 |\n|---|---|" +
		strings.Repeat("---:|", len(phaseNames)+2) + "\n")
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		for i, op := range snapshotOps {
			fmt.Fprintf(&b, "| %s | %s |", r.Backend, op)
			for _, ms := range r.APIPhasesP50ms[op] {
				if ms < 0 {
					b.WriteString(" n/a |")
				} else {
					fmt.Fprintf(&b, " %.0f |", ms)
				}
			}
			fmt.Fprintf(&b, " %.0f | %.0f |\n", r.Ops[i].APIP50ms, r.Ops[i].DirectP50ms)
		}
	}
	b.WriteString("\nThe hops: the core snapshot controller writes the machine's `spec.snapshots` (or `spec.restoreRequest`, or drops " +
		"the entry); the provider's machine reconciler records the step in the machine's status (`Creating`, `Restoring`, " +
		"`Deleting`) before it asks the backend; the backend call, during which the provider also records the backend task in " +
		"the status, ends with the result written (`Ready`, `Done`, the entry dropped); the core controller mirrors it onto the " +
		"VirtualMachineSnapshot or VirtualMachineRestore (or releases the snapshot's finalizer, and the object goes).\n\n")
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		var parts []string
		for i, op := range snapshotOps {
			ph := r.APIPhasesP50ms[op]
			if len(ph) != len(phaseNames) || slices.Contains(ph, -1) {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s: API − direct %+.0f ms, of which the control plane's hops (core controller, provider pick-up, "+
				"mirroring back) %.0f ms, and the backend hop − the direct calls %+.0f ms (the provider's task and result status writes, "+
				"and the backend's own spread)",
				op, r.Ops[i].APIP50ms-r.Ops[i].DirectP50ms, ph[0]+ph[1]+ph[3], ph[2]-r.Ops[i].DirectP50ms))
		}
		fmt.Fprintf(&b, "- **%s**, at p50: %s.\n", r.Backend, strings.Join(parts, "; "))
	}
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		// API rounds come in pairs between direct ones: the first of a
		// pair starts with the VM's controllers idle, the second right
		// after the first's last operation.
		var parts []string
		for _, op := range snapshotOps {
			var idle, after []float64
			for k, v := range r.APISeconds[op] {
				if k%2 == 0 {
					idle = append(idle, v*1000)
				} else {
					after = append(after, v*1000)
				}
			}
			parts = append(parts, fmt.Sprintf("%s %.0f ms after a direct round, %.0f ms right after an API round", op, median(idle), median(after)))
		}
		fmt.Fprintf(&b, "- **%s**, API p50 by what went before (API rounds come in pairs between direct ones): %s.\n", r.Backend, strings.Join(parts, "; "))
	}
	for _, r := range rows {
		if r.Skipped != "" || len(r.RequestsPerRound) == 0 {
			continue
		}
		keys := make([]string, 0, len(r.RequestsPerRound))
		for k := range r.RequestsPerRound {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		var parts []string
		var total float64
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %.1f", k, r.RequestsPerRound[k]))
			total += r.RequestsPerRound[k]
		}
		fmt.Fprintf(&b, "- **%s**: API requests per API round (the benchmark's own and its watches' setup included), %.0f in all: %s.\n",
			r.Backend, total, strings.Join(parts, ", "))
	}
	for _, r := range rows {
		if r.Skipped != "" {
			continue
		}
		fmt.Fprintf(&b, "- **%s** seconds per round in run order: API create %s; restore %s; delete %s. Direct create %s; restore %s; delete %s.\n",
			r.Backend, seconds2(r.APISeconds["create"]), seconds2(r.APISeconds["restore"]), seconds2(r.APISeconds["delete"]),
			seconds2(r.DirectSeconds["create"]), seconds2(r.DirectSeconds["restore"]), seconds2(r.DirectSeconds["delete"]))
	}
	logf("wrote %s", dir+"/snapshots.md")
	return writeReport(os.Stdout, dir, "snapshots", b.String(), map[string]any{"started": started, "cores": runtime.NumCPU(),
		"go": runtime.Version(), "target": snapshotTarget, "phases": phaseNames, "backends": rows})
}

func seconds2(s []float64) string {
	out := make([]string, 0, len(s))
	for _, v := range s {
		out = append(out, fmt.Sprintf("%.2f", v))
	}
	return strings.Join(out, ", ")
}
