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

// Package vcsim runs govmomi's vCenter simulator in process, shaped like the
// seed guide's vCenter, for "banlieue dev" and tests: datacenters of
// compute clusters, a VM template in each datacenter, enforced credentials,
// TLS on loopback, webmks tickets (AcquireTicket, which vcsim lacks), and
// optionally a simulated DHCP that gives powered-on VMs an address (vcsim
// alone only reports addresses set by guest customization).
package vcsim

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/view"
	"github.com/vmware/govmomi/vim25"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/pki"
)

// Config shapes the simulated vCenter.
type Config struct {
	// Datacenters and Clusters per datacenter (names DC0.., DC0_C0..).
	Datacenters, Clusters int
	// Template is the name of the VM template made in every datacenter.
	Template string
	// Username and Password are the only credentials accepted.
	Username, Password string
	// DHCP gives every powered-on VM without an address one: the static
	// address its cloud-init metadata asks for, or the next of 10.10.0.0/16.
	DHCP bool
	// ServingIPs are more addresses its serving certificate names, beside
	// 127.0.0.1: where pods of a local node reach it (the certificate is
	// then of a CA of its own, which CABundle holds).
	ServingIPs []net.IP
}

// Simulator is a running simulated vCenter.
type Simulator struct {
	// Endpoint is the SDK URL (https, loopback); CABundle verifies it.
	Endpoint string
	CABundle []byte

	model  *simulator.Model
	server *simulator.Server
	// gc is the simulator's own session (set-up, DHCP, Sessions).
	gc     *govmomi.Client
	calls  *callCounter
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// Start creates and serves the simulator.
func Start(ctx context.Context, cfg Config) (*Simulator, error) {
	model := simulator.VPX()
	model.Datacenter, model.Cluster = cfg.Datacenters, cfg.Clusters
	if err := model.Create(); err != nil {
		return nil, fmt.Errorf("creating the vCenter model: %w", err)
	}
	// The counter first: the handlers below chain to the one before them.
	calls := newCallCounter()
	model.Map().Handler = calls.handle
	HonourCloneDiskBacking(model)
	AcquireTickets(model)
	model.Service.Listen = &url.URL{User: url.UserPassword(cfg.Username, cfg.Password)}
	model.Service.TLS = new(tls.Config)
	var ca []byte
	if len(cfg.ServingIPs) > 0 {
		cert, caPEM, err := pki.LoopbackServing("vcsim", cfg.ServingIPs)
		if err != nil {
			return nil, fmt.Errorf("the serving certificate: %w", err)
		}
		model.Service.TLS.Certificates, ca = []tls.Certificate{cert}, caPEM
	}
	server := model.Service.NewServer()
	if ca == nil { // httptest's own certificate, self-signed
		ca = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: server.Certificate().Raw})
	}
	s := &Simulator{Endpoint: "https://" + server.URL.Host + "/sdk", CABundle: ca, model: model, server: server, calls: calls}
	gc, err := Login(ctx, s.Endpoint, cfg.Username, cfg.Password)
	if err == nil {
		err = calls.leaveOut(ctx, gc)
	}
	if err != nil {
		s.Close()
		return nil, err
	}
	s.gc = gc
	if cfg.Template != "" {
		if err := makeTemplates(ctx, gc, cfg.Template); err != nil {
			s.Close()
			return nil, err
		}
	}
	if cfg.DHCP {
		ctx, s.cancel = context.WithCancel(context.Background())
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			dhcp(ctx, gc)
		}()
	}
	return s, nil
}

// ReachedAt tells the simulator the SDK URL its clients reach it at
// (endpoint, https://HOST:PORT/sdk), when that is not its loopback one
// (pods of a local node): an image import uploads its disks to the URLs
// of an NFC lease, which vcsim makes of this URL where a vCenter names an
// ESX host.
func (s *Simulator) ReachedAt(endpoint string) {
	s.model.Map().OptionManager().UpdateOptions(&types.UpdateOptions{ChangedValue: []types.BaseOptionValue{
		&types.OptionValue{Key: "vcsim.server.url", Value: endpoint}}})
}

// Login opens a session on the simulator at endpoint, trusting its
// certificate (tests and the simulator's own helpers; never the provider).
func Login(ctx context.Context, endpoint, username, password string) (*govmomi.Client, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	u.User = url.UserPassword(username, password)
	gc, err := govmomi.NewClient(ctx, u, true)
	if err != nil {
		return nil, fmt.Errorf("logging in to the simulator: %w", err)
	}
	return gc, nil
}

// Close stops serving and removes the simulator's files.
func (s *Simulator) Close() {
	if s.cancel != nil {
		s.cancel()
		s.wg.Wait()
	}
	CloseServer(s.server, closeWait)
	s.model.Remove()
}

// closeWait is how long CloseServer waits for requests in flight.
const closeWait = 30 * time.Second

// CloseServer closes srv, waiting at most within for the requests in
// flight, and says whether they all ended. govmomi's simulator answers a
// WaitForUpdatesEx only on an update, its MaxWaitSeconds or
// CancelWaitForUpdates, never on the request's context: the long poll of
// a client killed while it waited (the crash tests SIGKILL providers
// waiting on tasks) would hold httptest's Close forever.
func CloseServer(srv *simulator.Server, within time.Duration) bool {
	done := make(chan struct{})
	go func() {
		srv.Close()
		close(done)
	}()
	select {
	case <-done:
		return true
	case <-time.After(within):
		klog.InfoS("vcsim: requests still in flight after closing; left behind", "within", within,
			"why", "WaitForUpdatesEx of a client that is gone never returns")
		return false
	}
}

// makeTemplates makes a template named name in every datacenter.
func makeTemplates(ctx context.Context, gc *govmomi.Client, name string) error {
	dcs, err := find.NewFinder(gc.Client, false).DatacenterList(ctx, "*")
	if err != nil {
		return err
	}
	for _, dc := range dcs {
		if _, err := MarkTemplate(ctx, gc.Client, dc.Name(), name); err != nil {
			return err
		}
	}
	return nil
}

// MarkTemplate turns the first VM of datacenter dc into a template
// (templates must be powered off), renamed to name unless name is empty,
// and returns the template's name. A template already named name is kept.
func MarkTemplate(ctx context.Context, c *vim25.Client, dc, name string) (string, error) {
	f := find.NewFinder(c, false)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		return "", err
	}
	f.SetDatacenter(d)
	if name != "" {
		if _, err := f.VirtualMachine(ctx, name); err == nil {
			return name, nil
		}
	}
	vms, err := f.VirtualMachineList(ctx, "*")
	if err != nil || len(vms) == 0 {
		return "", fmt.Errorf("VMs of %s: %v", dc, err)
	}
	vm := vms[0]
	if task, err := vm.PowerOff(ctx); err != nil || task.Wait(ctx) != nil {
		return "", fmt.Errorf("powering off %s: %v", vm.Name(), err)
	}
	if name == "" {
		name = vm.Name()
	} else if task, err := vm.Rename(ctx, name); err != nil || task.Wait(ctx) != nil {
		return "", fmt.Errorf("renaming %s: %v", vm.Name(), err)
	}
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return "", fmt.Errorf("marking %s a template: %w", name, err)
	}
	return name, nil
}

// dhcp plays the network: every half second, powered-on VMs without a
// guest address get one. A guest with cloud-init metadata naming a static
// address gets that (what cloud-init would configure), others the next
// free address of 10.10.0.0/16.
func dhcp(ctx context.Context, gc *govmomi.Client) {
	next := 0
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		v, err := view.NewManager(gc.Client).CreateContainerView(ctx, gc.ServiceContent.RootFolder, []string{"VirtualMachine"}, true)
		if err != nil {
			continue
		}
		// Only the VMs that need an address have their extraConfig (user
		// data, metadata: kilobytes each) read: reading every VM's twice a
		// second cost more CPU than the provider did.
		var vms []mo.VirtualMachine
		err = v.Retrieve(ctx, []string{"VirtualMachine"}, []string{"runtime.powerState", "guest.ipAddress", "config.template"}, &vms)
		_ = v.Destroy(ctx)
		if err != nil {
			continue
		}
		pc := property.DefaultCollector(gc.Client)
		for _, vm := range vms {
			if vm.Runtime.PowerState != types.VirtualMachinePowerStatePoweredOn || (vm.Guest != nil && vm.Guest.IpAddress != "") ||
				vm.Config == nil || vm.Config.Template {
				continue
			}
			var extra mo.VirtualMachine
			if err := pc.RetrieveOne(ctx, vm.Self, []string{"config.extraConfig"}, &extra); err != nil || extra.Config == nil {
				continue
			}
			ip := staticAddress(extra.Config.ExtraConfig)
			if ip == "" {
				next++
				ip = fmt.Sprintf("10.10.%d.%d", next/250, next%250+1)
			}
			ref := vm.Self
			task, err := object.NewVirtualMachine(gc.Client, ref).Reconfigure(ctx, types.VirtualMachineConfigSpec{
				ExtraConfig: []types.BaseOptionValue{&types.OptionValue{Key: "SET.guest.ipAddress", Value: ip}},
			})
			if err == nil {
				err = task.Wait(ctx)
			}
			if err != nil {
				klog.V(2).InfoS("Simulated DHCP could not address a VM", "vm", ref.Value, "err", err)
			}
		}
	}
}

// staticAddress is the first static address of the guest's cloud-init
// network metadata (guestinfo.metadata, base64 JSON) or of Afterburn's
// network kernel arguments (an Ignition guest), or "".
func staticAddress(extra []types.BaseOptionValue) string {
	var raw, encoding, kargs string
	for _, o := range extra {
		v := o.GetOptionValue()
		switch v.Key {
		case "guestinfo.metadata":
			raw, _ = v.Value.(string)
		case "guestinfo.metadata.encoding":
			encoding, _ = v.Value.(string)
		case "guestinfo.afterburn.initrd.network-kargs":
			kargs, _ = v.Value.(string)
		}
	}
	if kargs != "" {
		return kargsAddress(kargs)
	}
	if raw == "" {
		return ""
	}
	data := []byte(raw)
	if encoding == "base64" {
		var err error
		if data, err = base64.StdEncoding.DecodeString(raw); err != nil {
			return ""
		}
	}
	var md struct {
		Network struct {
			Ethernets map[string]struct {
				Addresses []string `json:"addresses"`
			} `json:"ethernets"`
		} `json:"network"`
	}
	if json.Unmarshal(data, &md) != nil {
		return ""
	}
	best := ""
	for name, e := range md.Network.Ethernets {
		if len(e.Addresses) > 0 && (best == "" || name < best) {
			best = name
		}
	}
	if best == "" {
		return ""
	}
	addr, _, _ := strings.Cut(md.Network.Ethernets[best].Addresses[0], "/")
	return addr
}

// kargsAddress is the first static address of dracut ip= arguments
// (ip=ADDRESS::GATEWAY:NETMASK:HOST:IFACE:none), what the initramfs of an
// Ignition guest configures.
func kargsAddress(kargs string) string {
	for _, arg := range strings.Fields(kargs) {
		v, ok := strings.CutPrefix(arg, "ip=")
		if !ok || strings.HasSuffix(v, ":dhcp") {
			continue
		}
		if rest, ok := strings.CutPrefix(v, "["); ok {
			addr, _, _ := strings.Cut(rest, "]")
			return addr
		}
		addr, _, _ := strings.Cut(v, ":")
		return addr
	}
	return ""
}

// ReadVM reads the VM named name in datacenter dc of the vCenter at
// endpoint (config, runtime and guest), or nil when there is none. Tests use
// it to check what a provider built.
func ReadVM(ctx context.Context, endpoint, username, password, dc, name string) (*mo.VirtualMachine, error) {
	gc, err := Login(ctx, endpoint, username, password)
	if err != nil {
		return nil, err
	}
	defer func() { _ = gc.Logout(ctx) }()
	f := find.NewFinder(gc.Client, false)
	d, err := f.Datacenter(ctx, dc)
	if err != nil {
		return nil, err
	}
	f.SetDatacenter(d)
	vm, err := f.VirtualMachine(ctx, name)
	if _, ok := err.(*find.NotFoundError); ok {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m mo.VirtualMachine
	if err := vm.Properties(ctx, vm.Reference(), []string{"config", "runtime", "guest"}, &m); err != nil {
		// Destroyed between the lookup and the read: absent.
		if fault.Is(err, &types.ManagedObjectNotFound{}) {
			return nil, nil
		}
		return nil, err
	}
	return &m, nil
}

// BuildRate builds n VMs the way the vSphere provider builds one, from
// workers goroutines, and returns VMs per second: the ceiling a provider on
// this simulator can reach doing the same work. Each is a clone of the
// template of its datacenter into the next cluster of all of them (round
// robin), then one reconfigure (CPUs, memory, EFI firmware, guestinfo user
// data and metadata), then a power-on. The VMs are destroyed after.
func (s *Simulator) BuildRate(ctx context.Context, username, password, template string, n, workers int) (float64, error) {
	gc, err := Login(ctx, s.Endpoint, username, password)
	if err != nil {
		return 0, err
	}
	defer func() { _ = gc.Logout(ctx) }()
	targets, err := buildTargets(ctx, gc, template)
	if err != nil {
		return 0, err
	}
	jobs := make(chan int)
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	start := time.Now()
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				if err := targets[i%len(targets)].build(ctx, fmt.Sprintf("build-rate-%d", i)); err != nil {
					mu.Lock()
					firstErr = cmp.Or(firstErr, err)
					mu.Unlock()
				}
			}
		}()
	}
	for i := 0; i < n; i++ {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	rate := float64(n) / time.Since(start).Seconds()
	if firstErr != nil {
		return 0, fmt.Errorf("building: %w", firstErr)
	}
	return rate, destroyBuilt(ctx, gc)
}

// buildTarget is one cluster a build goes to, with its datacenter's
// template and VM folder.
type buildTarget struct {
	tmpl   *object.VirtualMachine
	folder *object.Folder
	pool   types.ManagedObjectReference
}

func buildTargets(ctx context.Context, gc *govmomi.Client, template string) ([]buildTarget, error) {
	f := find.NewFinder(gc.Client, false)
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil {
		return nil, err
	}
	var out []buildTarget
	for _, dc := range dcs {
		f.SetDatacenter(dc)
		tmpl, err := f.VirtualMachine(ctx, template)
		if err != nil {
			return nil, err
		}
		folder, err := f.DefaultFolder(ctx)
		if err != nil {
			return nil, err
		}
		clusters, err := f.ClusterComputeResourceList(ctx, "*")
		if err != nil {
			return nil, err
		}
		for _, c := range clusters {
			pool, err := c.ResourcePool(ctx)
			if err != nil {
				return nil, err
			}
			out = append(out, buildTarget{tmpl: tmpl, folder: folder, pool: pool.Reference()})
		}
	}
	return out, nil
}

// build clones, reconfigures and powers on one VM, as the provider does.
func (t buildTarget) build(ctx context.Context, name string) error {
	task, err := t.tmpl.Clone(ctx, t.folder, name, types.VirtualMachineCloneSpec{Location: types.VirtualMachineRelocateSpec{Pool: &t.pool}})
	if err != nil {
		return err
	}
	info, err := task.WaitForResult(ctx)
	if err != nil {
		return err
	}
	vm := object.NewVirtualMachine(t.tmpl.Client(), info.Result.(types.ManagedObjectReference))
	userData := base64.StdEncoding.EncodeToString([]byte("#cloud-config\npackage_update: true\n"))
	metadata := base64.StdEncoding.EncodeToString([]byte(`{"instance-id":"` + name + `","local-hostname":"` + name + `"}`))
	task, err = vm.Reconfigure(ctx, types.VirtualMachineConfigSpec{NumCPUs: 8, MemoryMB: 32768, Firmware: string(types.GuestOsDescriptorFirmwareTypeEfi),
		ExtraConfig: []types.BaseOptionValue{
			&types.OptionValue{Key: "guestinfo.userdata", Value: userData}, &types.OptionValue{Key: "guestinfo.userdata.encoding", Value: "base64"},
			&types.OptionValue{Key: "guestinfo.metadata", Value: metadata}, &types.OptionValue{Key: "guestinfo.metadata.encoding", Value: "base64"},
		}})
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return fmt.Errorf("reconfiguring %s: %w", name, err)
	}
	if task, err = vm.PowerOn(ctx); err == nil {
		err = task.Wait(ctx)
	}
	return err
}

// destroyBuilt powers off and destroys every VM BuildRate made.
func destroyBuilt(ctx context.Context, gc *govmomi.Client) error {
	f := find.NewFinder(gc.Client, false)
	dcs, err := f.DatacenterList(ctx, "*")
	if err != nil {
		return err
	}
	for _, dc := range dcs {
		f.SetDatacenter(dc)
		vms, err := f.VirtualMachineList(ctx, "build-rate-*")
		if err != nil {
			continue // none in this datacenter
		}
		for _, vm := range vms {
			if task, err := vm.PowerOff(ctx); err == nil {
				_ = task.Wait(ctx)
			}
			if task, err := vm.Destroy(ctx); err == nil {
				_ = task.Wait(ctx)
			}
		}
	}
	return nil
}

// HonourCloneDiskBacking makes model's clones take the disk backing their
// relocate spec asks for (spec.location.disk[i].diskBackingInfo: thin,
// thick or eagerly scrubbed), as vCenter does. govmomi's simulator ignores
// the locators: its clone keeps the template's backing. Here each
// CloneVM_Task's locators are noted as the call arrives (the registry's
// Handler), and applied, by device key, to the clone the simulator creates
// under that name once its devices exist (its "name" update, before the
// clone task completes). Call it after model.Create.
func HonourCloneDiskBacking(model *simulator.Model) {
	r := model.Map()
	h := &cloneDiskBacking{
		self:    types.ManagedObjectReference{Type: "BanlieueCloneDiskBacking", Value: "clone-disk-backing"},
		pending: map[string][]types.VirtualMachineRelocateSpecDiskLocator{},
	}
	prev := r.Handler
	r.Handler = func(ctx *simulator.Context, m *simulator.Method) (mo.Reference, types.BaseMethodFault) {
		if req, ok := m.Body.(*types.CloneVM_Task); ok {
			// The latest clone of a name wins: one that failed before
			// creating its VM leaves nothing for the next.
			h.mu.Lock()
			if len(req.Spec.Location.Disk) > 0 {
				h.pending[req.Name] = req.Spec.Location.Disk
			} else {
				delete(h.pending, req.Name)
			}
			h.mu.Unlock()
		}
		if prev != nil {
			return prev(ctx, m)
		}
		return nil, nil
	}
	r.AddHandler(h)
}

// cloneDiskBacking applies noted clone disk locators (HonourCloneDiskBacking).
type cloneDiskBacking struct {
	self    types.ManagedObjectReference
	mu      sync.Mutex
	pending map[string][]types.VirtualMachineRelocateSpecDiskLocator // by clone name
}

func (h *cloneDiskBacking) Reference() types.ManagedObjectReference { return h.self }

func (h *cloneDiskBacking) PutObject(*simulator.Context, mo.Reference) {}

func (h *cloneDiskBacking) RemoveObject(*simulator.Context, types.ManagedObjectReference) {}

func (h *cloneDiskBacking) UpdateObject(_ *simulator.Context, obj mo.Reference, changes []types.PropertyChange) {
	vm, ok := obj.(*mo.VirtualMachine)
	if !ok || vm.Config == nil {
		return
	}
	var name string
	for _, c := range changes {
		if c.Name == "name" {
			name, _ = c.Val.(string)
		}
	}
	h.mu.Lock()
	locators, ok := h.pending[name]
	delete(h.pending, name)
	h.mu.Unlock()
	if !ok {
		return
	}
	for _, loc := range locators {
		want, ok := loc.DiskBackingInfo.(*types.VirtualDiskFlatVer2BackingInfo)
		if !ok {
			continue
		}
		for _, d := range vm.Config.Hardware.Device {
			disk, ok := d.(*types.VirtualDisk)
			if !ok || disk.Key != loc.DiskId {
				continue
			}
			if b, ok := disk.Backing.(*types.VirtualDiskFlatVer2BackingInfo); ok {
				b.ThinProvisioned = types.NewBool(want.ThinProvisioned != nil && *want.ThinProvisioned)
				b.EagerlyScrub = types.NewBool(want.EagerlyScrub != nil && *want.EagerlyScrub)
			}
		}
	}
}
