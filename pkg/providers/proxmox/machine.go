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

package proxmox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	proxmox "github.com/luthermonson/go-proxmox"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/providers/power"
)

// ownerMark is the line of a VM's description that says which object it
// belongs to: a VM without it, or with another UID, is never touched.
func ownerMark(uid string) string { return "banlieue-uid: " + uid }

// handle is how a VM is named in status.taskRef: NODE/VMID, then /UPID of
// the task running on it.
type handle struct {
	node string
	vmid int
	upid string
}

func (h handle) String() string { return fmt.Sprintf("%s/%d", h.node, h.vmid) }

func parseHandle(ref string) (handle, bool) {
	parts := strings.SplitN(ref, "/", 3)
	if len(parts) < 2 {
		return handle{}, false
	}
	id, err := strconv.Atoi(parts[1])
	if err != nil {
		return handle{}, false
	}
	h := handle{node: parts[0], vmid: id}
	if len(parts) == 3 {
		h.upid = parts[2]
	}
	return h, true
}

// EnsureMachine finds the VM (by the handle recorded in spec.TaskRef, else
// by name, owned by spec's UID), clones the template when there is none,
// converges its configuration, size and cloud-init seed, and drives its
// power state. The VMID is recorded before the clone starts and every task
// before it is awaited: a restarted provider waits for the recorded task
// and finds the VM it was making, never cloning a second.
func (c *Client) EnsureMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (providers.MachineStatus, error) {
	c.resume(ctx, spec.TaskRef)
	vm, err := c.find(ctx, spec)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	created := vm == nil
	if created {
		if spec.UserDataOmitted {
			return providers.MachineStatus{}, providers.ErrUserDataNeeded
		}
		if vm, err = c.clone(ctx, spec, record); err != nil {
			return providers.MachineStatus{}, err
		}
	}
	if err := c.unlocked(ctx, vm); err != nil {
		return providers.MachineStatus{}, err
	}
	h := handle{node: vm.Node, vmid: int(vm.VMID)}
	if vm.IsHibernated() && spec.PowerState != infrav1.PowerStateSuspended {
		// A hibernated VM's configuration is locked until it resumes:
		// power first, converge after.
		if _, err := c.power(ctx, vm, spec, false, record, h); err != nil {
			return providers.MachineStatus{Created: created, Handle: h.String()}, fmt.Errorf("powering %s: %w", spec.Name, err)
		}
	}
	restart := false
	if !vm.IsHibernated() {
		if restart, err = c.converge(ctx, vm, spec, record, h); err != nil {
			return providers.MachineStatus{Created: created, Handle: h.String()}, fmt.Errorf("configuring %s: %w", spec.Name, err)
		}
	}
	restarting, err := c.power(ctx, vm, spec, restart, record, h)
	if err != nil {
		return providers.MachineStatus{Created: created, Handle: h.String()}, fmt.Errorf("powering %s: %w", spec.Name, err)
	}
	st, err := c.observe(ctx, vm)
	st.Created, st.Restarting = created, restarting
	if err != nil || st.IPAddress == "" {
		return st, err
	}
	if err := c.removeSeed(ctx, vm, spec, record, h); err != nil {
		return st, fmt.Errorf("configuring %s: %w", spec.Name, err)
	}
	return st, nil
}

// resume waits for the task a recorded handle names. Its outcome is read
// from the VM next; a task the node no longer knows is forgotten.
func (c *Client) resume(ctx context.Context, ref string) {
	if h, ok := parseHandle(ref); ok && h.upid != "" {
		_ = c.await(ctx, proxmox.NewTask(proxmox.UPID(h.upid), c.api))
	}
}

// find is the VM owned by spec's UID: at the recorded handle, else among
// the VMs of spec's name. nil when there is none.
func (c *Client) find(ctx context.Context, spec providers.MachineSpec) (*proxmox.VirtualMachine, error) {
	if h, ok := parseHandle(spec.TaskRef); ok {
		if vm, err := c.owned(ctx, h.node, h.vmid, spec.InstanceUUID); vm != nil || err != nil {
			return vm, err
		}
	}
	cl, err := c.api.Cluster(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the cluster: %w", err)
	}
	resources, err := cl.Resources(ctx, "vm")
	if err != nil {
		return nil, fmt.Errorf("listing VMs: %w", err)
	}
	for _, r := range resources {
		if r.Type != "qemu" || r.Name != spec.Name || r.Template == 1 {
			continue
		}
		if vm, err := c.owned(ctx, r.Node, int(r.VMID), spec.InstanceUUID); vm != nil || err != nil {
			return vm, err
		}
	}
	return nil, nil
}

// unlocked waits while a task holds the VM (a clone an interrupted call
// started and recorded no UPID of).
func (c *Client) unlocked(ctx context.Context, vm *proxmox.VirtualMachine) error {
	deadline := time.Now().Add(c.opts.TaskTimeout)
	// A hibernated VM keeps its lock until it is started: it is at rest,
	// not busy.
	for vm.Lock != "" && !vm.IsHibernated() {
		if time.Now().After(deadline) {
			return fmt.Errorf("VM %d is still locked (%s)", vm.VMID, vm.Lock)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(c.opts.TaskPoll):
		}
		if err := vm.Ping(ctx); err != nil {
			return err
		}
	}
	return nil
}

// owned reads VM vmid of node when its description carries uid's mark.
func (c *Client) owned(ctx context.Context, node string, vmid int, uid string) (*proxmox.VirtualMachine, error) {
	vm, err := c.api.NodeRef(node).VirtualMachine(ctx, vmid)
	if err != nil {
		if proxmox.IsNotFound(err) || strings.Contains(err.Error(), "does not exist") {
			return nil, nil
		}
		return nil, fmt.Errorf("reading VM %d on %s: %w", vmid, node, err)
	}
	if !strings.Contains(vm.VirtualMachineConfig.Description, ownerMark(uid)) {
		return nil, nil
	}
	return vm, nil
}

// clone makes the VM: a full clone of the node's template onto a VMID
// /cluster/nextid proposes, recorded before the clone starts. nextid
// reserves nothing: when another client takes the VMID first, the clone is
// refused and the next one is tried.
func (c *Client) clone(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (*proxmox.VirtualMachine, error) {
	node := spec.Location.Host
	tmpl, err := c.template(ctx, node, spec.Image)
	if err != nil {
		return nil, err
	}
	if tmpl == nil {
		return nil, fmt.Errorf("template %q is on no node", spec.Image)
	}
	cl, err := c.api.Cluster(ctx)
	if err != nil {
		return nil, err
	}
	for attempt := 0; attempt < 5; attempt++ {
		id, err := cl.NextID(ctx)
		if err != nil {
			return nil, fmt.Errorf("asking for a VMID: %w", err)
		}
		h := handle{node: node, vmid: id}
		if err := record(ctx, h.String()); err != nil {
			return nil, fmt.Errorf("recording VMID %d: %w", id, err)
		}
		opts := &proxmox.VirtualMachineCloneOptions{NewID: id, Name: spec.Name, Full: true, Description: ownerMark(spec.InstanceUUID)}
		if tmpl.Node != node {
			opts.Target = node
		}
		if t := spec.BootTarget(); t != "" {
			opts.Storage = t
		}
		_, task, err := tmpl.Clone(ctx, opts)
		if err != nil && strings.Contains(err.Error(), "already exists") {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("cloning %s: %w", spec.Image, err)
		}
		if err := c.wait(ctx, task, record, h.String()); err != nil {
			return nil, fmt.Errorf("cloning %s: %w", spec.Image, err)
		}
		return c.api.NodeRef(node).VirtualMachine(ctx, id)
	}
	return nil, fmt.Errorf("cloning %s: every VMID /cluster/nextid proposed was taken by the time of the clone", spec.Image)
}

// converge applies the config spec wants that the VM lacks, in one task.
// Each step reads the VM again only after it changed it: vm is what the
// API last said (find, clone or the step before).
// It reports whether the VM must restart for changes Proxmox VE keeps
// pending while it runs.
func (c *Client) converge(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec, record providers.TaskRecorder, h handle) (bool, error) {
	cfg := vm.VirtualMachineConfig
	want, err := c.desired(ctx, vm, spec)
	if err != nil {
		return false, err
	}
	var opts []proxmox.VirtualMachineOption
	for _, k := range sortedKeys(want) {
		if current(cfg, k) != want[k] {
			opts = append(opts, proxmox.VirtualMachineOption{Name: k, Value: want[k]})
		}
	}
	if len(opts) > 0 {
		task, err := vm.Config(ctx, opts...)
		if err != nil {
			return false, err
		}
		if err := c.wait(ctx, task, record, h.String()); err != nil {
			return false, err
		}
		if err := vm.Ping(ctx); err != nil {
			return false, err
		}
	}
	if err := c.grow(ctx, vm, spec, record, h); err != nil {
		return false, err
	}
	// The seed's network config names the NICs by the MACs PVE gave them.
	if err := c.attachSeed(ctx, vm, spec, record, h); err != nil {
		return false, err
	}
	var pending []map[string]any
	if err := c.api.Get(ctx, fmt.Sprintf("/nodes/%s/qemu/%d/pending", vm.Node, vm.VMID), &pending); err != nil {
		return false, err
	}
	for _, p := range pending {
		if _, ok := p["pending"]; ok && vm.Status == "running" {
			return true, nil
		}
	}
	return false, nil
}

// desired is the config spec asks for: size, firmware, vTPM, guest OS,
// NICs and their addresses, extra disks, the SMBIOS UUID, the guest agent
// and the cloud-init seed.
func (c *Client) desired(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec) (map[string]string, error) {
	cfg := vm.VirtualMachineConfig
	want := map[string]string{
		"cores": strconv.Itoa(int(spec.CPUs)), "sockets": "1", "memory": strconv.FormatInt(spec.MemoryMiB, 10),
		"agent": "1", "smbios1": "uuid=" + spec.InstanceUUID,
	}
	storage := spec.BootTarget()
	if storage == "" {
		storage, _, _ = strings.Cut(cfg.SCSIs["scsi0"], ":")
	}
	switch spec.Firmware {
	case "efi", "efi-secure":
		want["bios"] = "ovmf"
		if cfg.EFIDisk0 == "" {
			keys := map[bool]string{true: "1", false: "0"}[spec.Firmware == "efi-secure"]
			want["efidisk0"] = storage + ":1,efitype=4m,pre-enrolled-keys=" + keys
		}
	case "bios":
		want["bios"] = "seabios"
	}
	// No firmware named (neither class nor image): the template's stays.
	// The guest OS too; Proxmox VE applies a new ostype at the next start
	// only, so a running VM takes it at its next power-off, not with a
	// restart of its own.
	if os := OSType(spec.GuestOS); os != "" && vm.Status != proxmox.StatusVirtualMachineRunning {
		want["ostype"] = os
	}
	// A serial port on a socket, which the console (console.go) attaches
	// to; privilege VM.Config.HWType, already needed for smbios1. A new VM
	// gets it before its first start. PVE cannot plug one into a running
	// VM (it stays pending until the next start), so a VM made before
	// this, running, gets it when next converged while off, not with a
	// restart of its own; until then it has no console.
	if vm.Status != proxmox.StatusVirtualMachineRunning {
		want["serial0"] = "socket"
	}
	if spec.TPM && cfg.TPMState0 == "" {
		want["tpmstate0"] = storage + ":1,version=v2.0"
	}
	defaultBridge := bridgeOf(cfg.Nets["net0"])
	for i, n := range spec.NICs {
		key := fmt.Sprintf("net%d", i)
		bridge := n.Bridge
		if bridge == "" {
			bridge = defaultBridge
		}
		v := "virtio"
		if mac := macOf(cfg.Nets[key]); mac != "" {
			v += "=" + mac
		}
		v += ",bridge=" + bridge
		if n.VLAN != 0 {
			v += ",tag=" + strconv.Itoa(int(n.VLAN))
		}
		if cur := cfg.Nets[key]; cur != "" && sameNIC(cur, v) {
			v = cur
		}
		want[key] = v
		ip := "ip=dhcp"
		if s := n.Static; s != nil {
			ip = fmt.Sprintf("ip=%s/%d", s.Address, s.Prefix)
			if s.Gateway != "" {
				ip += ",gw=" + s.Gateway
			}
			if len(s.Nameservers) > 0 {
				want["nameserver"] = strings.Join(s.Nameservers, " ")
			}
		}
		want[fmt.Sprintf("ipconfig%d", i)] = ip
	}
	for i, d := range spec.Disks {
		if i == 0 {
			continue
		}
		key := fmt.Sprintf("scsi%d", i)
		if cfg.SCSIs[key] == "" {
			target := d.Target
			if target == "" {
				target = storage
			}
			want[key] = fmt.Sprintf("%s:%d", target, d.SizeGiB)
		}
	}
	return want, nil
}

// attachSeed puts the cloud-init seed on ide2 when it is not there, and
// it was never removed from the VM.
func (c *Client) attachSeed(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec, record providers.TaskRecorder, h handle) error {
	if seedState(vm.VirtualMachineConfig.Description) != "" {
		return nil // consumed: never uploaded or attached again
	}
	var macs []string
	for i := range spec.NICs {
		macs = append(macs, strings.ToLower(macOf(vm.VirtualMachineConfig.Nets[fmt.Sprintf("net%d", i)])))
	}
	ide2, err := c.seed(ctx, vm, spec, macs)
	if err != nil || vm.VirtualMachineConfig.IDEs["ide2"] == ide2 {
		return err
	}
	task, err := vm.Config(ctx, proxmox.VirtualMachineOption{Name: "ide2", Value: ide2})
	if err != nil {
		return err
	}
	if err := c.wait(ctx, task, record, h.String()); err != nil {
		return err
	}
	return vm.Ping(ctx)
}

// seed uploads the NoCloud seed (user data, meta data, network config) as
// an ISO named after the VM's UID, once, and returns the ide2 value.
func (c *Client) seed(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec, macs []string) (string, error) {
	storage, err := c.isoStorage(ctx, vm.Node)
	if err != nil {
		return "", err
	}
	name := seedName(spec.InstanceUUID)
	volid := storage + ":iso/" + name
	if cur := vm.VirtualMachineConfig.IDEs["ide2"]; strings.HasPrefix(cur, volid+",") {
		return cur, nil
	}
	var content []map[string]any
	if err := c.api.Get(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content?content=iso", vm.Node, storage), &content); err != nil {
		return "", fmt.Errorf("listing the ISOs of %s: %w", storage, err)
	}
	present := false
	for _, e := range content {
		present = present || e["volid"] == volid
	}
	if !present {
		if spec.UserDataOmitted {
			return "", providers.ErrUserDataNeeded // the seed went missing: it is made again from the user data
		}
		iso, err := cloudinit.NoCloudSeed(spec, macs)
		if err != nil {
			return "", err
		}
		var upid proxmox.UPID
		path := fmt.Sprintf("/nodes/%s/storage/%s/upload", vm.Node, storage)
		if err := c.api.UploadReader(path, map[string]string{"content": "iso"}, name, bytes.NewReader(iso), int64(len(iso)), &upid); err != nil {
			return "", fmt.Errorf("uploading the cloud-init seed: %w", err)
		}
		if err := c.await(ctx, proxmox.NewTask(upid, c.api)); err != nil {
			return "", fmt.Errorf("uploading the cloud-init seed: %w", err)
		}
	}
	return volid + ",media=cdrom", nil
}

// isoStorage is the storage seeds go to on node.
func (c *Client) isoStorage(ctx context.Context, node string) (string, error) {
	if c.opts.ISOStorage != "" {
		return c.opts.ISOStorage, nil
	}
	storages, err := c.api.NodeRef(node).Storages(ctx)
	if err != nil {
		return "", fmt.Errorf("listing the storages of %s: %w", node, err)
	}
	for _, s := range storages {
		if strings.Contains(","+s.Content+",", ",iso,") {
			return s.Name, nil
		}
	}
	return "", fmt.Errorf("%w: node %s has no storage for ISO images, where cloud-init seeds and installers go", errNoISOStorage, node)
}

// errNoISOStorage: the node has no storage for iso content.
var errNoISOStorage = errors.New("no ISO storage")

// grow resizes disks smaller than spec's sizes (never shrinking).
func (c *Client) grow(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec, record providers.TaskRecorder, h handle) error {
	grown := false
	for i, d := range spec.Disks {
		key := fmt.Sprintf("scsi%d", i)
		if size := sizeOf(vm.VirtualMachineConfig.SCSIs[key]); size > 0 && size < d.SizeGiB {
			task, err := vm.ResizeDisk(ctx, key, fmt.Sprintf("%dG", d.SizeGiB))
			if err != nil {
				return fmt.Errorf("growing %s: %w", key, err)
			}
			if err := c.wait(ctx, task, record, h.String()); err != nil {
				return fmt.Errorf("growing %s: %w", key, err)
			}
			grown = true
		}
	}
	if grown {
		return vm.Ping(ctx)
	}
	return nil
}

// power drives the VM to spec.PowerState as package power decides;
// restart first powers off a running VM whose configuration waits for its
// next start, as spec.powerOffMode says. A guest asked to shut down has
// its grace: the VM is left running and restarting reports it, a later
// call starts it once it is off (PVE applies the pending configuration
// then). Suspended is PVE's hibernation (suspend todisk=1): the memory in
// a state volume, the VM stopped with the lock "suspended"; a start
// resumes it.
func (c *Client) power(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec, restart bool, record providers.TaskRecorder, h handle) (restarting bool, err error) {
	p := vmPower{c: c, vm: vm, record: record, h: h}
	if vm.IsPaused() {
		// banlieue never pauses a VM (Suspended hibernates it): one
		// paused by hand, or by an earlier banlieue, runs again first.
		if err := p.step(ctx, vm.Resume); err != nil {
			return false, fmt.Errorf("resuming paused VM %d: %w", vm.VMID, err)
		}
	}
	desired := spec.PowerState
	if desired == "" {
		desired = infrav1.PowerStatePoweredOn
	}
	grace := spec.PowerOffGrace
	if grace <= 0 {
		grace = power.DefaultGrace
	}
	drive := func(to infrav1.PowerState) error {
		return power.Drive(ctx, p, power.Request{Desired: to, Mode: spec.PowerOffMode, Grace: grace,
			SoftRequested: spec.SoftPowerOffTime, Record: spec.RecordSoftPowerOff})
	}
	if restart && vm.IsRunning() {
		if err := drive(infrav1.PowerStatePoweredOff); err != nil {
			return false, err
		}
		if vm.IsRunning() {
			// Asked to shut down (SoftOff reads the VM no more), or
			// within the grace of that request.
			return desired != infrav1.PowerStatePoweredOff, nil
		}
	}
	return false, drive(desired)
}

// vmPower is a Proxmox VE VM's power primitives.
type vmPower struct {
	c      *Client
	vm     *proxmox.VirtualMachine
	record providers.TaskRecorder
	h      handle
}

// step runs a power task, waits for it and reads the VM again.
func (p vmPower) step(ctx context.Context, do func(context.Context) (*proxmox.Task, error)) error {
	task, err := do(ctx)
	if err != nil {
		return err
	}
	if err := p.c.wait(ctx, task, p.record, p.h.String()); err != nil {
		return err
	}
	return p.vm.Ping(ctx)
}

func (p vmPower) Observe(context.Context) (infrav1.PowerState, error) { return powerState(p.vm), nil }

func (p vmPower) Start(ctx context.Context) error { return p.step(ctx, p.vm.Start) }

// Resume starts the hibernated VM, which PVE resumes from its state volume.
func (p vmPower) Resume(ctx context.Context) error { return p.step(ctx, p.vm.Start) }

func (p vmPower) Suspend(ctx context.Context) error { return p.step(ctx, p.vm.Hibernate) }

// SoftOff asks PVE to shut the guest down (ACPI, or the guest agent when
// enabled) without waiting for its task, which lasts as long as the guest
// takes: the grace period is counted from the recorded request. Without
// forceStop the task never powers the VM off itself.
func (p vmPower) SoftOff(ctx context.Context) error {
	if _, err := p.vm.Shutdown(ctx); err != nil {
		return err
	}
	return nil
}

// HardOff stops the VM. A hibernated VM is started (resumed) first: PVE
// drops its state volume with the resume, and only a running VM stops.
func (p vmPower) HardOff(ctx context.Context) error {
	if p.vm.IsHibernated() {
		if err := p.step(ctx, p.vm.Start); err != nil {
			return fmt.Errorf("resuming hibernated VM %d to power it off: %w", p.vm.VMID, err)
		}
	}
	return p.step(ctx, p.vm.Stop)
}

// powerState is vm's power state as last read: hibernated (stopped with
// the lock "suspended") is Suspended; running, even paused, is PoweredOn.
func powerState(vm *proxmox.VirtualMachine) infrav1.PowerState {
	switch {
	case vm.IsHibernated():
		return infrav1.PowerStateSuspended
	case vm.Status == proxmox.StatusVirtualMachineRunning:
		return infrav1.PowerStatePoweredOn
	}
	return infrav1.PowerStatePoweredOff
}

// observe reads what the VM is.
func (c *Client) observe(ctx context.Context, vm *proxmox.VirtualMachine) (providers.MachineStatus, error) {
	if err := vm.Ping(ctx); err != nil {
		return providers.MachineStatus{}, err
	}
	cfg := vm.VirtualMachineConfig
	st := providers.MachineStatus{Handle: handle{node: vm.Node, vmid: int(vm.VMID)}.String(), PowerState: powerState(vm),
		CPUs: int32(vm.CPUs), MemoryMiB: int64(cfg.Memory), TPM: cfg.TPMState0 != "", Firmware: "bios"}
	if m := uuidRe.FindStringSubmatch(cfg.SMBios1); m != nil {
		st.BIOSUUID, st.InstanceUUID, st.ProviderID = m[1], m[1], "proxmox://"+m[1]
	}
	if cfg.Bios != nil && *cfg.Bios == "ovmf" {
		st.Firmware = "efi"
		if strings.Contains(cfg.EFIDisk0, "pre-enrolled-keys=1") {
			st.Firmware = "efi-secure"
		}
	}
	for _, k := range indexed(cfg.SCSIs, "scsi") {
		st.DiskSizesGiB = append(st.DiskSizesGiB, sizeOf(cfg.SCSIs[k]))
	}
	for _, k := range indexed(cfg.Nets, "net") {
		st.Networks = append(st.Networks, bridgeOf(cfg.Nets[k]))
		st.MACAddresses = append(st.MACAddresses, strings.ToLower(macOf(cfg.Nets[k])))
	}
	if st.PowerState == infrav1.PowerStatePoweredOn {
		ip, err := c.address(ctx, vm)
		if err != nil {
			return st, err
		}
		st.IPAddress = ip
	}
	return st, nil
}

// address is the guest agent's first IPv4 address, "" until it answers.
// A token not allowed to ask is an error, not an address never coming.
func (c *Client) address(ctx context.Context, vm *proxmox.VirtualMachine) (string, error) {
	ifaces, err := vm.AgentGetNetworkIFaces(ctx)
	if errors.Is(err, proxmox.ErrNotAuthorized) {
		return "", fmt.Errorf("reading the guest agent's addresses: %w", err)
	}
	if err != nil {
		return "", nil
	}
	for _, i := range ifaces {
		for _, a := range i.IPAddresses {
			if a.IPAddressType == "ipv4" && !strings.HasPrefix(a.IPAddress, "127.") {
				return a.IPAddress, nil
			}
		}
	}
	return "", nil
}

// DeleteMachine stops and destroys the VM with its disks (purge, and the
// volumes no config references), then its cloud-init seed.
func (c *Client) DeleteMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) error {
	c.resume(ctx, spec.TaskRef)
	vm, err := c.find(ctx, spec)
	if err != nil {
		return err
	}
	if vm != nil {
		h := handle{node: vm.Node, vmid: int(vm.VMID)}
		if vm.Status == "running" {
			task, err := vm.Stop(ctx)
			if err != nil {
				return fmt.Errorf("stopping %s: %w", spec.Name, err)
			}
			if err := c.wait(ctx, task, record, h.String()); err != nil {
				return fmt.Errorf("stopping %s: %w", spec.Name, err)
			}
		}
		task, err := vm.Delete(ctx, &proxmox.VirtualMachineDeleteOptions{Purge: true, DestroyUnreferencedDisks: true})
		if err != nil {
			return fmt.Errorf("destroying %s: %w", spec.Name, err)
		}
		if err := c.wait(ctx, task, record, h.String()); err != nil {
			return fmt.Errorf("destroying %s: %w", spec.Name, err)
		}
	}
	return c.deleteSeed(ctx, spec.Location.Host, spec.InstanceUUID)
}

// The states of a VM's seed after first boot, each a line of its
// description (with ownerMark), so a restarted provider reads them from
// the VM: ejected from the CD-ROM drive, then removed from storage.
const (
	seedEjected = "ejected"
	seedRemoved = "removed"
)

// seedMarkPrefix starts the description line of the seed's state.
const seedMarkPrefix = "banlieue-seed: "

// seedState is the seed's state a description records: "" (attached, or
// to be), seedEjected or seedRemoved.
func seedState(description string) string {
	for _, line := range strings.Split(description, "\n") {
		if state, ok := strings.CutPrefix(strings.TrimSpace(line), seedMarkPrefix); ok {
			return state
		}
	}
	return ""
}

// withSeedState is description with its seed state line set to state.
func withSeedState(description, state string) string {
	var lines []string
	for _, line := range strings.Split(description, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), seedMarkPrefix) {
			lines = append(lines, line)
		}
	}
	return strings.Join(append(lines, seedMarkPrefix+state), "\n")
}

// removeSeed takes the cloud-init seed away from a VM whose guest booted
// (the guest agent reports an address: cloud-init's NoCloud datasource
// read the seed in its local stage, before the network came up). The seed
// holds the user data, often Cluster API's bootstrap data with its join
// token, on storage that is often shared: it should not outlive its use.
// The CD-ROM is ejected first (ide2=none: a change of medium PVE applies
// to a running VM, where deleting the drive would wait, pending, for a
// restart), then the ISO deleted: PVE deletes an ISO a VM still names
// (the storage API checks no VM config), and that VM would then fail to
// start. Each step is recorded in the description before the next, so
// an interrupted removal goes on from where it stopped, and a VM whose
// seed went is never given it again.
func (c *Client) removeSeed(ctx context.Context, vm *proxmox.VirtualMachine, spec providers.MachineSpec, record providers.TaskRecorder, h handle) error {
	configure := func(opts ...proxmox.VirtualMachineOption) error {
		task, err := vm.Config(ctx, opts...)
		if err != nil {
			return err
		}
		if err := c.wait(ctx, task, record, h.String()); err != nil {
			return err
		}
		return vm.Ping(ctx)
	}
	desc := vm.VirtualMachineConfig.Description
	switch seedState(desc) {
	case seedRemoved:
		return nil
	case "":
		opts := []proxmox.VirtualMachineOption{{Name: "description", Value: withSeedState(desc, seedEjected)}}
		if strings.Contains(vm.VirtualMachineConfig.IDEs["ide2"], seedName(spec.InstanceUUID)) {
			opts = append(opts, proxmox.VirtualMachineOption{Name: "ide2", Value: "none,media=cdrom"})
		}
		if err := configure(opts...); err != nil {
			return fmt.Errorf("ejecting the cloud-init seed: %w", err)
		}
	}
	if err := c.deleteSeed(ctx, vm.Node, spec.InstanceUUID); err != nil {
		return err
	}
	if err := configure(proxmox.VirtualMachineOption{Name: "description", Value: withSeedState(vm.VirtualMachineConfig.Description, seedRemoved)}); err != nil {
		return fmt.Errorf("recording the cloud-init seed's removal: %w", err)
	}
	return nil
}

// seedName is the file name of the seed ISO of the VM of uid.
func seedName(uid string) string { return "banlieue-" + uid + ".iso" }

// deleteSeed removes the seed ISO of the VM of uid from node's ISO
// storage; one already gone is fine.
func (c *Client) deleteSeed(ctx context.Context, node, uid string) error {
	storage, err := c.isoStorage(ctx, node)
	if err != nil {
		return err
	}
	volid := storage + ":iso/" + seedName(uid)
	var upid proxmox.UPID
	err = c.api.Delete(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content/%s", node, storage, volid), &upid)
	if err != nil {
		if strings.Contains(err.Error(), "does not exist") {
			return nil
		}
		return fmt.Errorf("deleting the cloud-init seed: %w", err)
	}
	if upid != "" {
		return c.await(ctx, proxmox.NewTask(upid, c.api))
	}
	return nil
}

var (
	uuidRe   = regexp.MustCompile(`uuid=([0-9a-fA-F-]{36})`)
	sizeRe   = regexp.MustCompile(`size=(\d+)G`)
	macRe    = regexp.MustCompile(`=([0-9A-Fa-f]{2}(?::[0-9A-Fa-f]{2}){5})`)
	bridgeRe = regexp.MustCompile(`bridge=([^,]+)`)
)

func sizeOf(disk string) int64 {
	if m := sizeRe.FindStringSubmatch(disk); m != nil {
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	return 0
}

func macOf(nic string) string {
	if m := macRe.FindStringSubmatch(nic); m != nil {
		return m[1]
	}
	return ""
}

func bridgeOf(nic string) string {
	if m := bridgeRe.FindStringSubmatch(nic); m != nil {
		return m[1]
	}
	return ""
}

// sameNIC: the same model, bridge and tag (the MAC is the VM's own).
func sameNIC(a, b string) bool {
	norm := func(s string) string { return macRe.ReplaceAllString(s, "") }
	return norm(a) == norm(b)
}

// current is cfg's value of key as the config API returns it.
func current(cfg *proxmox.VirtualMachineConfig, key string) string {
	for prefix, m := range map[string]map[string]string{"net": cfg.Nets, "scsi": cfg.SCSIs, "ide": cfg.IDEs, "ipconfig": cfg.IPConfigs} {
		if strings.HasPrefix(key, prefix) && strings.Trim(strings.TrimPrefix(key, prefix), "0123456789") == "" {
			return m[key]
		}
	}
	switch key {
	case "cores":
		return intString(cfg.Cores)
	case "sockets":
		return intString(cfg.Sockets)
	case "memory":
		return strconv.Itoa(int(cfg.Memory))
	case "agent":
		return cfg.Agent
	case "smbios1":
		return cfg.SMBios1
	case "bios":
		if cfg.Bios == nil {
			return "seabios"
		}
		return *cfg.Bios
	case "efidisk0":
		return cfg.EFIDisk0
	case "tpmstate0":
		return cfg.TPMState0
	case "nameserver":
		return cfg.Nameserver
	case "serial0":
		return cfg.Serials["serial0"]
	case "ostype":
		if cfg.OSType == nil {
			return "other" // Proxmox VE's default
		}
		return *cfg.OSType
	}
	return ""
}

func intString(p *int) string {
	if p == nil {
		return ""
	}
	return strconv.Itoa(*p)
}

// indexed are a device map's keys in index order (scsi0, scsi1, scsi10).
func indexed(m map[string]string, prefix string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		a, _ := strconv.Atoi(strings.TrimPrefix(keys[i], prefix))
		b, _ := strconv.Atoi(strings.TrimPrefix(keys[j], prefix))
		return a < b
	})
	return keys
}

func sortedKeys(m map[string]string) []string {
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
