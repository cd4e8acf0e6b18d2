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
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// LibvirtProvisioning is the pipeline's rate on a real libvirtd against
// the same define+start done directly through libvirt in the same run.
type LibvirtProvisioning struct {
	VMs int `json:"vms"`
	// Skipped says why the row was not measured (no libvirtd here).
	Skipped        string  `json:"skipped,omitempty"`
	ReadyPerMin    float64 `json:"readyPerMinute"`
	RawPerMin      float64 `json:"rawDefineStartPerMinute"`
	SecondsToReady float64 `json:"secondsToAllReady"`
}

const libvirtNS = "bench-libvirt"

// libvirtProvisioning runs a private libvirtd, measures define+start of
// copy-on-write domains directly through libvirt (8 at a time, as the
// provider's workers), then VirtualMachines through the controller and
// the libvirt provider until all are Ready.
func (h *harness) libvirtProvisioning(ctx context.Context, r *report, vms int) error {
	if m := libvirtd.Missing(); m != "" {
		r.libvirt = &LibvirtProvisioning{VMs: vms, Skipped: "libvirtd cannot run here: needs " + m}
		logf("  libvirt: not measured: %s", r.libvirt.Skipped)
		return nil
	}
	d, stop, err := h.guestLibvirtd(ctx)
	if err != nil {
		return err
	}
	defer stop()
	raw, err := rawDefineStart(d, vms)
	if err != nil {
		return fmt.Errorf("raw define+start: %w", err)
	}
	logf("  libvirt alone: %.0f define+start per minute", raw)

	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := h.libvirtObjects(ctx, bc, d); err != nil {
		return err
	}
	if err := h.ensureController(); err != nil {
		return err
	}
	proc, metrics, err := h.startProvider("libvirt", "provider-libvirt", "--domain-type=qemu")
	if err != nil {
		return err
	}
	defer proc.Stop()
	if err := h.userDataFor(ctx, libvirtNS, "libvirt"); err != nil {
		return err
	}
	if err := waitImageReady(ctx, bc, "bench-libvirt-guest", devenv.Namespace+"/bench-libvirt"); err != nil {
		return err
	}
	pids := h.env.PIDs()
	pids[benchProcess] = os.Getpid()
	create, name := createVMs(bc, libvirtNS, "lv", "bench-libvirt-small", "bench-libvirt-guest", "libvirt")
	measured, err := h.provision(ctx, bc, pids, provisionJob{ns: libvirtNS, n: vms, create: create, name: name,
		sources: map[string]callSource{countedByProvider: func(ctx context.Context) (map[string]float64, error) { return providerCalls(ctx, metrics) }}})
	if err != nil {
		return err
	}
	took := measured.ready
	r.libvirt = &LibvirtProvisioning{VMs: vms, ReadyPerMin: float64(vms) / took.Minutes(), RawPerMin: raw, SecondsToReady: took.Seconds()}
	r.backends = append(r.backends, costOf("libvirt (real libvirtd, QEMU)", vms, measured, countedByProvider,
		"the provider, the RPCs it wrote (libvirtd counts none)"))
	logf("  libvirt: %d VMs Ready in %.1fs (%.0f per minute; libvirt alone %.0f)", vms, took.Seconds(), r.libvirt.ReadyPerMin, raw)
	return deleteVMs(ctx, bc, libvirtNS)
}

// guestLibvirtd starts a private libvirtd with the test guest's image
// (hack/build-guest-image.sh) in its pool as guest.qcow2; stop ends it.
func (h *harness) guestLibvirtd(ctx context.Context) (*libvirtd.Daemon, func(), error) {
	root, err := filepath.Abs(filepath.Join(h.cfg.Bin, ".."))
	if err != nil {
		return nil, nil, err
	}
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	if out, err := exec.Command(filepath.Join(root, "hack", "build-guest-image.sh"), guest).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("building the guest image: %v: %s", err, out)
	}
	log, err := os.Create(filepath.Join(h.env.Logs(), "libvirtd.log"))
	if err != nil {
		return nil, nil, err
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := libvirtd.Start(startCtx, filepath.Join(h.env.Dir(), "libvirtd"), filepath.Join(root, "bin", ".libvirt-cache"), log)
	if err != nil {
		_ = log.Close()
		return nil, nil, err
	}
	stop := func() { d.Stop(); _ = log.Close() }
	if err := d.ImportVolume(guest, "guest.qcow2"); err != nil {
		stop()
		return nil, nil, err
	}
	return d, stop, nil
}

func (h *harness) libvirtObjects(ctx context.Context, bc *clientset.Clientset, d *libvirtd.Daemon) error {
	api := bc.BanlieueV1alpha1()
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-libvirt", Namespace: devenv.Namespace, Labels: map[string]string{"bench": "libvirt"}},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "libvirt"},
			Connection:       v1alpha1.ProviderConnection{Endpoint: d.URI},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Pool: libvirtd.Pool}}},
			},
		},
	}
	if _, err := api.Providers(devenv.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return err
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "bench-libvirt-guest"}, Spec: v1alpha1.VMImageSpec{
		Sources: []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: v1alpha1.ImageSourceVolume, Ref: libvirtd.Pool + "/guest.qcow2"}}}}
	if _, err := api.VMImages().Create(ctx, img, metav1.CreateOptions{}); err != nil {
		return err
	}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "bench-libvirt-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 128, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Firmware: "bios"}}
	_, err := api.VMClasses().Create(ctx, class, metav1.CreateOptions{})
	return err
}

func waitImageReady(ctx context.Context, bc *clientset.Clientset, image, provider string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		if img, err := bc.BanlieueV1alpha1().VMImages().Get(ctx, image, metav1.GetOptions{}); err == nil {
			for _, s := range img.Status.PerProvider {
				if s.Provider == provider && s.Ready {
					return nil
				}
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("image %s never became ready on %s", image, provider)
}

// rawDefineStart is what libvirt alone does per minute of what the
// provider asks of it per VM: a copy-on-write overlay of the image, a
// domain defined on it, started; 8 at a time. The domains and volumes are
// removed afterwards.
func rawDefineStart(d *libvirtd.Daemon, n int) (float64, error) {
	l, pool, disconnect, err := imagePool(d)
	if err != nil {
		return 0, err
	}
	defer disconnect()
	base, err := l.StorageVolLookupByName(pool, "guest.qcow2")
	if err != nil {
		return 0, err
	}
	basePath, err := l.StorageVolGetPath(base)
	if err != nil {
		return 0, err
	}
	// One domain first, not timed: the QEMU driver's first use probes
	// QEMU's capabilities (seconds), which neither side should pay here.
	if err := defineStart(l, pool, basePath, -1); err != nil {
		return 0, err
	}
	jobs := make(chan int)
	errs := make(chan error, n)
	var wg sync.WaitGroup
	start := time.Now()
	for range providerWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				errs <- defineStart(l, pool, basePath, i)
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	took := time.Since(start)
	close(errs)
	for err := range errs {
		if err != nil {
			return 0, err
		}
	}
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		return 0, err
	}
	for _, dom := range doms {
		_ = l.DomainDestroy(dom)
		_ = l.DomainUndefine(dom)
	}
	vols, _, _ := l.StoragePoolListAllVolumes(pool, 1, 0)
	for _, v := range vols {
		if v.Name != "guest.qcow2" {
			_ = l.StorageVolDelete(v, 0)
		}
	}
	return float64(n) / took.Minutes(), nil
}

// imagePool connects to d and looks up its pool; disconnect ends the
// connection.
func imagePool(d *libvirtd.Daemon) (*golibvirt.Libvirt, golibvirt.StoragePool, func(), error) {
	l, err := d.Connect()
	if err != nil {
		return nil, golibvirt.StoragePool{}, nil, err
	}
	pool, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		_ = l.Disconnect()
		return nil, golibvirt.StoragePool{}, nil, fmt.Errorf("looking up pool %s: %w", libvirtd.Pool, err)
	}
	return l, pool, func() { _ = l.Disconnect() }, nil
}

func defineStart(l *golibvirt.Libvirt, pool golibvirt.StoragePool, basePath string, i int) error {
	name := fmt.Sprintf("raw-%d", i)
	vol := fmt.Sprintf(`<volume><name>%s.qcow2</name><capacity unit='GiB'>1</capacity><target><format type='qcow2'/></target>
<backingStore><path>%s</path><format type='qcow2'/></backingStore></volume>`, name, basePath)
	v, err := l.StorageVolCreateXML(pool, vol, 0)
	if err != nil {
		return err
	}
	path, err := l.StorageVolGetPath(v)
	if err != nil {
		return err
	}
	dom := fmt.Sprintf(`<domain type='qemu'><name>%s</name><uuid>%s</uuid><memory unit='MiB'>128</memory><vcpu>1</vcpu>
<os><type arch='x86_64'>hvm</type><boot dev='hd'/></os><devices>
<disk type='file' device='disk'><driver name='qemu' type='qcow2'/><source file='%s'/><target dev='vda' bus='virtio'/></disk>
</devices></domain>`, name, uuid.NewString(), path)
	dm, err := l.DomainDefineXML(dom)
	if err != nil {
		return err
	}
	return l.DomainCreate(dm)
}
