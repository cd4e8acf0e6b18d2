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

// Command bench measures banlieue side by side with its alternatives in one
// run on one machine: (A) through kube-apiserver's aggregation proxy, (B)
// banlieue's own port, (C) the same schema as a CRD on the same
// kube-apiserver and etcd, (D) raw etcd. It prints a Markdown table of
// absolute figures and ratios, and writes it with the raw results as JSON.
// "make bench" runs it at full size; "make bench-smoke" (in "make test")
// runs it tiny so it never rots.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsclient "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
)

type config struct {
	N, C, Watchers, WatchEvents, VMs, Samples int
	Out, Bin                                  string
	// Profile, when set, is where CPU profiles of banlieue (path B) and
	// kube-apiserver (path C) are written during the first round's verbs.
	Profile string
	// ProfilePhases are the phases -profile samples.
	ProfilePhases map[string]bool
	// Phases to run (all by default), to study one at a time.
	Phases map[string]bool
	Settle time.Duration
	// Strict fails the run on any failed operation or lost watch event
	// (bench-smoke: the benchmark must keep working, whatever its figures).
	Strict bool
	// Scale runs "make bench-scale" instead (scale.go): VCenters simulated
	// vCenters provisioning FleetVMs, then VMs stored in steps of Sizes.
	Scale    bool
	Images   bool
	ImageMiB int
	// Console runs the console benchmark instead (console.go).
	Console            bool
	ConsoleKeys        int
	Sizes              []int
	VCenters, FleetVMs int

	// Snapshots runs the snapshot benchmark instead (snapshots.go).
	Snapshots         bool
	SnapshotRounds    int
	SnapshotTaskDelay time.Duration
}

func main() {
	var cfg config
	flag.IntVar(&cfg.N, "n", 10000, "Objects per path and verb.")
	flag.IntVar(&cfg.C, "c", 16, "Concurrent clients.")
	flag.IntVar(&cfg.Watchers, "watchers", 100, "Watchers per path in the fan-out test.")
	flag.IntVar(&cfg.WatchEvents, "watch-events", 200, "Writes observed by every watcher.")
	flag.IntVar(&cfg.VMs, "vms", 1000, "VirtualMachines provisioned on vcsim by the controllers (0 skips).")
	flag.IntVar(&cfg.Samples, "samples", 1000, "Requests per GET, /resolved and /placement measurement.")
	flag.DurationVar(&cfg.Settle, "settle", 2*time.Second, "Wait before reading memory after a bulk write (garbage is collected first).")
	flag.StringVar(&cfg.Out, "out", "bench/results", "Where latest.md and latest.json are written.")
	flag.BoolVar(&cfg.Strict, "strict", false, "Fail on any failed operation or undelivered watch event.")
	flag.StringVar(&cfg.Profile, "profile", "", "Write CPU profiles to this folder: of banlieue (path B) and kube-apiserver (path C) during round 1 of each CRUD verb, of every process during provisioning.")
	profiled := flag.String("profile-phases", "crud,provision", "With -profile: the phases profiled (crud, provision; populated writes each server's heap with N objects stored).")
	flag.StringVar(&cfg.Bin, "bin", "bin", "Folder with etcd, kube-apiserver, kube-controller-manager, kubectl and banlieue.")
	flag.BoolVar(&cfg.Images, "images", false, "Measure image import instead (make bench-images): on libvirt, Proxmox VE (pvesim) and vSphere (vcsim), a VMImage import against the same bytes copied straight to the same backend; writes images.md and images.json.")
	flag.IntVar(&cfg.ImageMiB, "image-mib", 1024, "With -images: the image's size in MiB.")
	flag.BoolVar(&cfg.Console, "console", false, "Measure the console instead (make bench-console): keystroke echo through virtualmachines/NAME/console against the same console opened at libvirtd; writes console.md and console.json.")
	flag.IntVar(&cfg.ConsoleKeys, "console-keys", 300, "With -console: keystrokes per session.")
	flag.BoolVar(&cfg.Snapshots, "snapshots", false, "Measure snapshots instead (make bench-snapshots): on Proxmox VE (pvesim) and vSphere (vcsim), snapshot create, restore and delete through the API against the same backend calls made directly; writes snapshots.md and snapshots.json.")
	flag.IntVar(&cfg.SnapshotRounds, "snapshot-rounds", 20, "With -snapshots: rounds (create, restore, delete) per side and backend.")
	flag.DurationVar(&cfg.SnapshotTaskDelay, "snapshot-task-delay", 50*time.Millisecond, "With -snapshots: how long every simulated task runs, on both simulators, for both sides (pvesim's default).")
	flag.BoolVar(&cfg.Scale, "scale", false, "Measure growth instead (make bench-scale): a fleet over -vcenters, then VMs stored in steps of -sizes; writes scale.md and scale.json.")
	sizes := flag.String("sizes", "1000,10000,50000", "With -scale: the numbers of VMs stored, ascending.")
	flag.IntVar(&cfg.VCenters, "vcenters", 20, "With -scale: simulated vCenters, one Provider each (0 skips the fleet).")
	flag.IntVar(&cfg.FleetVMs, "fleet-vms", 2000, "With -scale: VMs provisioned over the vCenters.")
	phases := flag.String("phases", strings.Join(allPhases, ","), "Phases to run, comma-separated (a partial run's targets table is partial too).")
	flag.Parse()
	cfg.Phases = map[string]bool{}
	for _, p := range strings.Split(*phases, ",") {
		if !slices.Contains(allPhases, p) {
			fmt.Fprintf(os.Stderr, "bench: unknown phase %q (known: %v)\n", p, allPhases)
			os.Exit(2)
		}
		cfg.Phases[p] = true
	}
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(f)
		if err != nil || n <= 0 || len(cfg.Sizes) > 0 && n <= cfg.Sizes[len(cfg.Sizes)-1] {
			fmt.Fprintf(os.Stderr, "bench: -sizes %q: want positive numbers, ascending\n", *sizes)
			os.Exit(2)
		}
		cfg.Sizes = append(cfg.Sizes, n)
	}
	cfg.ProfilePhases = map[string]bool{}
	for _, p := range strings.Split(*profiled, ",") {
		cfg.ProfilePhases[p] = true
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := benchmark(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// clientProcess names this process (the benchmark's clients) in CPU figures.
const clientProcess = "client"

// allPhases are the benchmark's parts, in the order they run.
var allPhases = []string{"populated", "crud", "tenant", "encodings", "storage", "watch", "provision", "proxmox", "libvirt"}

// harness is the running environment and the four paths.
type harness struct {
	env  *devenv.Env
	kube kubernetes.Interface
	pids map[string]int
	a, b *apiPath
	c    *apiPath
	d    *etcdPath
	// etcd reaches the environment's etcd (path D's client too).
	etcd  *clientv3.Client
	cfg   config
	admin *restclient.Config
	// direct reaches banlieue's own port with the admin's client certificate.
	direct *restclient.Config
	// controllerStarted: the provisioning phases share one controller.
	controllerStarted bool
	// providerMetrics reaches the running vSphere provider's /metrics
	// (plain HTTP on loopback), to count its calls to the vCenters.
	providerMetrics *restclient.Config
}

func benchmark(ctx context.Context, cfg config) error {
	bin, err := filepath.Abs(cfg.Bin)
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "banlieue-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logf("starting etcd (fsync on), kube-apiserver, kube-controller-manager and banlieue in %s", dir)
	env, err := devenv.Start(ctx, devenv.Config{Dir: dir, BinDir: bin, Durable: true, Setup: dev.InstallRBAC,
		// /debug/pprof/heap?gc=1 lets the memory measurement collect garbage first.
		KubeAPIServerArgs: []string{"--profiling=true"},
		// Every encoding banlieue can serve is measured.
		BanlieueArgs: []string{"--feature-gates=CBORServingAndStorage=true"}})
	if err != nil {
		return fmt.Errorf("environment: %w (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	defer env.Stop()
	h, err := newHarness(ctx, env, cfg)
	if err != nil {
		return err
	}
	if cfg.Scale {
		return h.scale(ctx)
	}
	if cfg.Images {
		return h.images(ctx)
	}
	if cfg.Console {
		return h.consoleBench(ctx)
	}
	if cfg.Snapshots {
		return h.snapshotsBench(ctx)
	}
	r := &report{cfg: cfg, started: time.Now()}
	// Memory first, on fresh servers: after the CRUD rounds their watch
	// caches still hold the churned objects, and growth would not be what
	// storing N objects costs.
	if cfg.Phases["populated"] {
		logf("memory, list and subresources with N=%d stored per path", cfg.N)
		if err := h.populated(ctx, r); err != nil {
			return err
		}
	}
	if cfg.Phases["crud"] {
		logf("CRUD: N=%d, C=%d, order A,B,C,D then D,C,B,A", cfg.N, cfg.C)
		if err := h.crud(ctx, r); err != nil {
			return err
		}
	}
	if cfg.Phases["tenant"] {
		logf("a tenant: create, get and delete of N=%d on paths A and C as a ServiceAccount bound to edit", cfg.N)
		if err := h.tenant(ctx, r); err != nil {
			return err
		}
	}
	if cfg.Phases["encodings"] {
		logf("encodings: create, get and delete of N=%d in JSON, protobuf and CBOR on paths A and B", cfg.N)
		if err := h.encodings(ctx, r); err != nil {
			return err
		}
	}
	if cfg.Phases["storage"] {
		logf("storage: banlieue storing JSON, then protobuf: create, get and update of N=%d on path B", cfg.N)
		if err := h.storage(ctx, r); err != nil {
			return err
		}
	}
	if cfg.Phases["watch"] {
		logf("watch fan-out: %d watchers x %d writes per path", cfg.Watchers, cfg.WatchEvents)
		if err := h.watchFanOut(ctx, r); err != nil {
			return err
		}
	}
	if cfg.VMs > 0 && cfg.Phases["provision"] {
		logf("provisioning: %d VirtualMachines on vcsim through the controllers and the vSphere provider", cfg.VMs)
		if err := h.provisioning(ctx, r); err != nil {
			return err
		}
	}
	if cfg.VMs > 0 && cfg.Phases["proxmox"] {
		vms := min(cfg.VMs, 200)
		logf("Proxmox VE provisioning: %d VirtualMachines on pvesim through the controller and the Proxmox VE provider", vms)
		if err := h.proxmoxProvisioning(ctx, r, vms); err != nil {
			return err
		}
	}
	if cfg.VMs > 0 && cfg.Phases["libvirt"] {
		vms := min(cfg.VMs, 20)
		logf("libvirt provisioning: %d VirtualMachines on a real libvirtd (QEMU, software emulation) through the controller and the libvirt provider", vms)
		if err := h.libvirtProvisioning(ctx, r, vms); err != nil {
			return err
		}
	}
	if err := r.write(os.Stdout, cfg.Out); err != nil {
		return err
	}
	if cfg.Strict {
		return r.problems()
	}
	return nil
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
}

func newHarness(ctx context.Context, env *devenv.Env, cfg config) (*harness, error) {
	h := &harness{env: env, cfg: cfg, admin: env.Admin, pids: map[string]int{}}
	for name, pid := range env.PIDs() {
		if name == "etcd" || name == "kube-apiserver" || name == "banlieue" {
			h.pids[name] = pid
		}
	}
	// The clients share the machine's cores with the servers: what they
	// spend is what the servers could not.
	h.pids[clientProcess] = os.Getpid()
	h.direct = env.Direct()
	var err error
	// One etcd client for path D and every look into etcd the phases make.
	if h.etcd, err = clientv3.New(clientv3.Config{Endpoints: []string{env.EtcdURL()}, DialTimeout: 5 * time.Second}); err != nil {
		return nil, err
	}
	if h.kube, err = kubernetes.NewForConfig(env.Admin); err != nil {
		return nil, err
	}
	if err := installCRD(ctx, env.Admin); err != nil {
		return nil, err
	}
	if err := h.seedClassAndImage(ctx); err != nil {
		return nil, err
	}
	if h.a, err = newAPIPath("A aggregated", env.Admin, v1alpha1.GroupName); err != nil {
		return nil, err
	}
	if h.b, err = newAPIPath("B direct", h.direct, v1alpha1.GroupName); err != nil {
		return nil, err
	}
	if h.c, err = newAPIPath("C CRD", env.Admin, BenchGroup); err != nil {
		return nil, err
	}
	size, err := h.storedSize(ctx)
	if err != nil {
		return nil, err
	}
	h.d = newEtcdPath(h.etcd, size)
	return h, nil
}

func (h *harness) namespace(ctx context.Context, name string) error {
	_, err := h.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// installCRD installs the CRD twin and waits until it is served.
func installCRD(ctx context.Context, cfg *restclient.Config) error {
	crd, err := virtualMachineCRD()
	if err != nil {
		return err
	}
	c, err := apiextensionsclient.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if _, err := c.ApiextensionsV1().CustomResourceDefinitions().Create(ctx, crd, metav1.CreateOptions{}); err != nil {
		return fmt.Errorf("installing %s: %w", crd.Name, err)
	}
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		got, err := c.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, cond := range got.Status.Conditions {
			if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// seedClassAndImage creates what the benchmark VMs reference, so admission
// and /resolved do their real work.
func (h *harness) seedClassAndImage(ctx context.Context) error {
	c, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-class"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 8, MemoryMiB: 32768, Disks: []v1alpha1.DiskSpec{
			{Name: "root", SizeGiB: 80, StorageClass: "gold"}, {Name: "data", SizeGiB: 500, StorageClass: "gold"}}},
		Network:  &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}},
		Firmware: "efi",
	}}
	if _, err := c.BanlieueV1alpha1().VMClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		return err
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "bench-image"}, Spec: v1alpha1.VMImageSpec{OSFamily: "linux",
		Sources: []v1alpha1.ImageSource{{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"}}}}
	_, err = c.BanlieueV1alpha1().VMImages().Create(ctx, img, metav1.CreateOptions{})
	return err
}

// storedSize is the size of the value banlieue stores in etcd for one
// benchmark VM: what path D writes.
func (h *harness) storedSize(ctx context.Context) (int, error) {
	if err := h.namespace(ctx, "bench-probe"); err != nil {
		return 0, err
	}
	if err := h.b.create(ctx, "bench-probe", 0); err != nil {
		return 0, fmt.Errorf("probe VM: %w", err)
	}
	defer h.b.delete(ctx, "bench-probe", 0)
	return h.valueSize(ctx, "bench-probe", 0)
}

var verbs = []string{"create", "get", "update", "delete"}

// profiled names the server whose CPU profile -profile asks for while p is
// measured, and how to reach it: banlieue for path B, kube-apiserver for C.
func (h *harness) profiled(p path) (string, *restclient.Config) {
	switch {
	case h.cfg.Profile == "" || !h.cfg.ProfilePhases["crud"]:
		return "", nil
	case p == path(h.b):
		return "banlieue", h.direct
	case p == path(h.c):
		return "kube-apiserver", h.admin
	}
	return "", nil
}

// crud measures create, get, update and delete of N objects on each path,
// in the order A,B,C,D then D,C,B,A.
func (h *harness) crud(ctx context.Context, r *report) error {
	paths := []path{h.a, h.b, h.c, h.d}
	for round, order := range [][]int{{0, 1, 2, 3}, {3, 2, 1, 0}} {
		for _, i := range order {
			p := paths[i]
			ns := fmt.Sprintf("bench-%c-%d", "abcd"[i], round+1)
			if err := h.namespace(ctx, ns); err != nil {
				return err
			}
			for _, verb := range verbs {
				op := verbOp(p, verb)
				profiled := func() {}
				if server, cfg := h.profiled(p); cfg != nil && round == 0 {
					profiled = startProfile(ctx, cfg, h.cfg.Profile, server+"-"+verb, profileSeconds)
				}
				res := run(ctx, h.pids, p.Name(), verb, round+1, h.cfg.N, h.cfg.C, func(ctx context.Context, i int) error { return op(ctx, ns, i) })
				logf("  %-12s %-6s round %d: %8.0f ops/s  p50 %6.2f ms  p99 %7.2f ms  errors %d", p.Name(), verb, round+1, res.OpsPerS, res.P50ms, res.P99ms, res.Errors)
				r.crud = append(r.crud, res)
				profiled()
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}
