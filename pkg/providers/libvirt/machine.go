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

package libvirt

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
	"libvirt.org/go/libvirtxml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/cloudinit"
	"github.com/firestoned/banlieue/pkg/providers/power"
)

const gib = 1 << 30

// EnsureMachine finds the domain by its UUID (the object's UID) or
// defines it with its volumes and seed, grows disks, converges its
// definition and drives it to spec.PowerState. Each step finds what an
// interrupted earlier call left (volumes by name, the domain by UUID), so
// a retry after a crash neither repeats nor duplicates anything.
func (c *Client) EnsureMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (providers.MachineStatus, error) {
	defer c.bound(ctx)()
	st, err := c.ensureMachine(ctx, spec, record)
	return st, c.timedOut(ctx, err)
}

func (c *Client) ensureMachine(ctx context.Context, spec providers.MachineSpec, record providers.TaskRecorder) (providers.MachineStatus, error) {
	id, err := uuid.Parse(spec.InstanceUUID)
	if err != nil {
		return providers.MachineStatus{}, fmt.Errorf("instance UUID %q: %w", spec.InstanceUUID, err)
	}
	dom, err := c.l.DomainLookupByUUID(golibvirt.UUID(id))
	if err != nil && !isNotFound(err) {
		return providers.MachineStatus{}, fmt.Errorf("looking up domain %s: %w", spec.Name, err)
	}
	fresh := isNotFound(err)
	if fresh && spec.UserDataOmitted {
		return providers.MachineStatus{}, providers.ErrUserDataNeeded
	}
	seedState := ""
	if !fresh {
		// A seed removed after first boot is the desired state from then
		// on: neither made again nor attached (ensureFirstBoot, domainXML).
		if seedState, err = c.seedState(dom); err != nil {
			return providers.MachineStatus{}, err
		}
	}
	vols, err := c.ensureVolumes(spec, fresh, seedState)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	disks := vols.disks
	want, err := domainXML(spec, c.opts, vols)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	created, restarting := false, false
	switch {
	case fresh:
		if dom, err = c.l.DomainDefineXML(want); err != nil {
			return providers.MachineStatus{}, fmt.Errorf("defining domain %s: %w", spec.Name, err)
		}
		created = true
	default:
		if err := c.converge(dom, want); err != nil {
			return providers.MachineStatus{}, err
		}
		pending, err := c.restartPending(dom, want)
		if err != nil {
			return providers.MachineStatus{}, err
		}
		if pending && spec.PowerState == infrav1.PowerStatePoweredOn {
			// New CPUs or memory apply at the next start: power off (as
			// spec.powerOffMode says) and the next call starts it.
			spec.PowerState, restarting = infrav1.PowerStatePoweredOff, true
		}
	}
	if err := c.growDisks(dom, spec, disks); err != nil {
		return providers.MachineStatus{}, err
	}
	if err := c.power(ctx, dom, spec); err != nil {
		return providers.MachineStatus{}, err
	}
	st, err := c.observe(dom, spec)
	st.Created, st.Restarting = created, restarting
	if err != nil {
		return st, err
	}
	// Once the guest booted, its seed goes: here, as the reconciler
	// converges a libvirt machine until it reports an address.
	if err := c.removeSeed(dom, spec, vols.pool, seedState); err != nil {
		return st, fmt.Errorf("removing the seed of %s: %w", spec.Name, err)
	}
	return st, nil
}

// ensureVolumes creates, when missing, the boot overlay of the image, the
// further disks and the seed ISO, and returns them as the domain attaches
// them. The seed's contents are uploaded while the domain is not defined
// yet (fresh): a crash between creating the seed and filling it is then
// repaired by the retry, and a defined domain's seed is never rewritten
// (cloud-init's first boot data stays what the VM was created with).
// seedState is what the domain records of its seed (removeSeed).
func (c *Client) ensureVolumes(spec providers.MachineSpec, fresh bool, seedState string) (volumes, error) {
	base, err := c.lookupVolume(spec.Image)
	if err != nil {
		return volumes{}, err
	}
	baseXML, err := c.volumeXML(base)
	if err != nil {
		return volumes{}, err
	}
	disks := spec.Disks
	if len(disks) == 0 {
		disks = []providers.Disk{{Name: "root"}}
	}
	var out []attachedDisk
	for i, d := range disks {
		pool := d.Target
		if pool == "" {
			pool = base.Pool
		}
		v := libvirtxml.StorageVolume{Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(d.SizeGiB) * gib}}
		format := "qcow2"
		var flags golibvirt.StorageVolCreateFlags
		var from *golibvirt.StorageVol
		switch {
		case i == 0 && spec.ImageIsInstaller:
			// The boot disk the installer (the image, a CD-ROM) installs
			// to: blank, allocated as a data disk is.
			format, flags = allocated(&v, d.Provisioning)
		case i == 0 && (d.Provisioning == "thick" || d.Provisioning == "eagerZeroed"):
			// A thick boot disk: a full copy of the image (no backing
			// store), at least its size, raw and allocated in full.
			// Raw for thick too: libvirt copies with qemu-img convert at
			// the image's size and grows a volume with allocation for
			// raw only, so a preallocated qcow2 copy could not reach the
			// class size allocated.
			v.Capacity.Value = max(v.Capacity.Value, baseXML.Capacity.Value)
			v.Allocation = &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: v.Capacity.Value}
			format, from = "raw", &base
		case i == 0:
			// The boot disk: a copy-on-write overlay, at least the image's size.
			v.Capacity.Value = max(v.Capacity.Value, baseXML.Capacity.Value)
			v.BackingStore = &libvirtxml.StorageVolumeBackingStore{Path: baseXML.Target.Path,
				Format: &libvirtxml.StorageVolumeTargetFormat{Type: baseXML.Target.Format.Type}}
		default:
			format, flags = allocated(&v, d.Provisioning)
		}
		v.Name = volumeName(spec, d.Name, format)
		v.Target = &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: format}}
		path, err := c.ensureVolume(pool, v, nil, from, flags)
		if err != nil {
			return volumes{}, err
		}
		out = append(out, attachedDisk{path: path, format: format, dev: diskDev(i)})
	}
	vols := volumes{disks: out, pool: base.Pool, seedState: seedState}
	if spec.ImageIsInstaller {
		vols.installer = attachedDisk{path: baseXML.Target.Path, format: "raw"}
		if f := baseXML.Target.Format; f != nil && f.Type != "" && f.Type != "iso" {
			vols.installer.format = f.Type // an ISO is raw to QEMU
		}
	}
	if seedState == "" {
		vols.seed, err = c.ensureFirstBoot(spec, base.Pool, fresh)
	}
	return vols, err
}

// volumes are what a domain attaches: its disks, the first-boot data
// (a seed ISO or an Ignition config; "" for none) and, for an image used
// as an installer, that image (a CD-ROM). pool holds the first-boot
// data; seedState is the seed's state after first boot (removeSeed),
// which the definition carries in its metadata.
type volumes struct {
	disks     []attachedDisk
	seed      string
	installer attachedDisk
	pool      string
	seedState string
}

// ensureFirstBoot creates the volume the guest's agent reads its first
// boot data from: a NoCloud seed ISO for cloud-init, the Ignition config
// itself (given to QEMU as fw_cfg opt/com.coreos/config) for Ignition.
// Filled only while the domain is not defined yet (fresh).
func (c *Client) ensureFirstBoot(spec providers.MachineSpec, pool string, fresh bool) (string, error) {
	name, data := volumeName(spec, "seed", "iso"), []byte(nil)
	if spec.Ignition() {
		name = volumeName(spec, "ignition", "json")
		switch {
		case spec.UserDataOmitted:
			// Built already: the config it was given, if it was given one.
			return c.existingVolume(pool, name)
		case spec.UserData == nil:
			return "", nil // Ignition boots without a config
		}
	}
	if fresh {
		data = spec.UserData
		if !spec.Ignition() {
			iso, err := cloudinit.NoCloudSeed(spec, macAddresses(spec))
			if err != nil {
				return "", err
			}
			data = iso
		}
		if data == nil {
			data = []byte{}
		}
	}
	v := libvirtxml.StorageVolume{Name: name,
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(max(len(data), 1))},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}}}
	return c.ensureVolume(pool, v, data, nil, 0)
}

// allocated sets v's allocation for provisioning and returns the format
// and creation flags that give it: thick a preallocated qcow2,
// eagerZeroed a raw volume allocated in full, thin (or empty) a sparse
// qcow2.
func allocated(v *libvirtxml.StorageVolume, provisioning string) (string, golibvirt.StorageVolCreateFlags) {
	switch provisioning {
	case "thick":
		// With this flag and allocation = capacity libvirt has
		// qemu-img preallocate the whole qcow2 (falloc).
		v.Allocation = &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: v.Capacity.Value}
		return "qcow2", golibvirt.StorageVolCreatePreallocMetadata
	case "eagerZeroed":
		// Raw and allocated in full: every block written up front.
		v.Allocation = &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: v.Capacity.Value}
		return "raw", 0
	default:
		v.Allocation = &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 0}
		return "qcow2", 0
	}
}

// existingVolume is the path of volume name in pool, "" when there is none.
func (c *Client) existingVolume(pool, name string) (string, error) {
	p, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", pool, err)
	}
	vol, err := c.l.StorageVolLookupByName(p, name)
	switch {
	case isNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("volume %s/%s: %w", pool, name, err)
	}
	return c.l.StorageVolGetPath(vol)
}

// ensureVolume creates v in pool unless a volume of its name exists (a
// copy of volume from when given), uploads contents when given, and
// returns its path.
func (c *Client) ensureVolume(pool string, v libvirtxml.StorageVolume, contents []byte, from *golibvirt.StorageVol, flags golibvirt.StorageVolCreateFlags) (string, error) {
	p, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return "", fmt.Errorf("storage pool %s: %w", pool, err)
	}
	vol, err := c.l.StorageVolLookupByName(p, v.Name)
	if err == nil && contents != nil {
		// Left by a call interrupted before its domain was defined: made
		// again, as its contents (and size) may differ now.
		if err := c.l.StorageVolDelete(vol, 0); err != nil {
			return "", fmt.Errorf("volume %s/%s: %w", pool, v.Name, err)
		}
		_, err = c.l.StorageVolLookupByName(p, v.Name)
	}
	if isNotFound(err) {
		doc, merr := v.Marshal()
		if merr != nil {
			return "", merr
		}
		if from != nil {
			vol, err = c.l.StorageVolCreateXMLFrom(p, doc, *from, flags)
			if err == nil && v.Allocation != nil && v.Allocation.Value >= v.Capacity.Value {
				if err = c.allocateCopy(vol, v.Capacity.Value); err != nil {
					// Not left half made: the retry copies again.
					_ = c.l.StorageVolDelete(vol, 0)
				}
			}
		} else {
			vol, err = c.l.StorageVolCreateXML(p, doc, flags)
		}
	}
	if err != nil {
		return "", fmt.Errorf("volume %s/%s: %w", pool, v.Name, err)
	}
	if contents != nil {
		if err := c.l.StorageVolUpload(vol, bytes.NewReader(contents), 0, uint64(len(contents)), 0); err != nil {
			return "", fmt.Errorf("uploading %s/%s: %w", pool, v.Name, err)
		}
	}
	return c.l.StorageVolGetPath(vol)
}

// allocateCopy allocates a raw copy made to be allocated in full, at
// least capacity bytes: libvirt copies with qemu-img convert, which makes
// the copy the source's size and skips its holes (the copy is sparse), so
// the copy is grown, and its holes filled, with allocation.
func (c *Client) allocateCopy(vol golibvirt.StorageVol, capacity uint64) error {
	_, got, allocation, err := c.l.StorageVolGetInfo(vol)
	if err != nil {
		return err
	}
	if got >= capacity && allocation >= got {
		return nil
	}
	return c.l.StorageVolResize(vol, max(got, capacity), golibvirt.StorageVolResizeAllocate)
}

func (c *Client) volumeXML(v golibvirt.StorageVol) (*libvirtxml.StorageVolume, error) {
	doc, err := c.l.StorageVolGetXMLDesc(v, 0)
	if err != nil {
		return nil, fmt.Errorf("volume %s/%s: %w", v.Pool, v.Name, err)
	}
	out := &libvirtxml.StorageVolume{}
	if err := out.Unmarshal(doc); err != nil {
		return nil, err
	}
	if out.Target == nil || out.Target.Format == nil || out.Capacity == nil {
		return nil, fmt.Errorf("volume %s/%s: no format or capacity", v.Pool, v.Name)
	}
	return out, nil
}

// converge redefines the domain when its persistent definition differs
// from want in what the spec controls (CPUs, memory, disks, NICs, the
// guest OS its metadata names); a running domain takes the change at its
// next boot.
func (c *Client) converge(dom golibvirt.Domain, want string) error {
	have, err := c.definition(dom)
	if err != nil {
		return err
	}
	w := &libvirtxml.Domain{}
	if err := w.Unmarshal(want); err != nil {
		return err
	}
	if summary(have) == summary(w) {
		return nil
	}
	if _, err := c.l.DomainDefineXML(want); err != nil {
		return fmt.Errorf("redefining domain %s: %w", dom.Name, err)
	}
	return nil
}

// restartPending tells whether dom runs with fewer or more CPUs or memory
// than want, the definition converge just made its own: QEMU without
// hotplug applies those at start.
func (c *Client) restartPending(dom golibvirt.Domain, want string) (bool, error) {
	active, err := c.l.DomainIsActive(dom)
	if err != nil || active == 0 {
		return false, err
	}
	running, err := c.l.DomainGetXMLDesc(dom, 0)
	if err != nil {
		return false, fmt.Errorf("domain %s: %w", dom.Name, err)
	}
	r, d := &libvirtxml.Domain{}, &libvirtxml.Domain{}
	if err := r.Unmarshal(running); err != nil {
		return false, err
	}
	if err := d.Unmarshal(want); err != nil {
		return false, err
	}
	return r.VCPU.Value != d.VCPU.Value || memoryKiB(r.Memory) != memoryKiB(d.Memory), nil
}

// memoryKiB is a domain's memory in KiB, whatever unit it is written in.
func memoryKiB(m *libvirtxml.DomainMemory) uint {
	if m == nil {
		return 0
	}
	switch m.Unit {
	case "MiB", "M":
		return m.Value * 1024
	case "GiB", "G":
		return m.Value * 1024 * 1024
	case "b", "bytes":
		return m.Value / 1024
	}
	return m.Value // KiB, libvirt's default
}

// summary is what converge compares of a definition.
func summary(d *libvirtxml.Domain) string {
	var b strings.Builder
	fmt.Fprintf(&b, "vcpu=%d mem=%d%s", d.VCPU.Value, d.Memory.Value, d.Memory.Unit)
	if id := osInfoIDOf(d.Metadata); id != "" {
		fmt.Fprintf(&b, " os=%s", id)
	}
	for _, disk := range d.Devices.Disks {
		if disk.Source != nil && disk.Source.File != nil {
			fmt.Fprintf(&b, " disk=%s", disk.Source.File.File)
		}
	}
	for _, n := range d.Devices.Interfaces {
		if n.Source != nil && n.Source.Network != nil {
			fmt.Fprintf(&b, " net=%s", n.Source.Network.Network)
		}
		if n.Source != nil && n.Source.Bridge != nil {
			fmt.Fprintf(&b, " bridge=%s", n.Source.Bridge.Bridge)
		}
		if n.MAC != nil {
			fmt.Fprintf(&b, "/%s", n.MAC.Address)
		}
	}
	return b.String()
}

// definition is the domain's persistent (inactive) definition.
func (c *Client) definition(dom golibvirt.Domain) (*libvirtxml.Domain, error) {
	doc, err := c.l.DomainGetXMLDesc(dom, golibvirt.DomainXMLInactive)
	if err != nil {
		return nil, fmt.Errorf("reading domain %s: %w", dom.Name, err)
	}
	d := &libvirtxml.Domain{}
	return d, d.Unmarshal(doc)
}

// growDisks grows every volume smaller than its spec size (never shrinks):
// through the running domain when it runs, so the guest sees it at once.
func (c *Client) growDisks(dom golibvirt.Domain, spec providers.MachineSpec, disks []attachedDisk) error {
	active, err := c.l.DomainIsActive(dom)
	if err != nil {
		return err
	}
	for i, d := range spec.Disks {
		if i >= len(disks) {
			break
		}
		vol, err := c.l.StorageVolLookupByPath(disks[i].path)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		_, capacity, _, err := c.l.StorageVolGetInfo(vol)
		if err != nil {
			return fmt.Errorf("disk %s: %w", d.Name, err)
		}
		want := uint64(d.SizeGiB) * gib
		if capacity >= want {
			continue
		}
		if active == 1 {
			err = c.l.DomainBlockResize(dom, disks[i].dev, want, golibvirt.DomainBlockResizeBytes)
		} else {
			// A raw disk allocated in full (thick boot, eagerZeroed)
			// grows allocated; libvirt allocates on resize for raw only,
			// and not for a running guest's disk.
			var flags golibvirt.StorageVolResizeFlags
			if disks[i].format == "raw" && (d.Provisioning == "thick" || d.Provisioning == "eagerZeroed") {
				flags = golibvirt.StorageVolResizeAllocate
			}
			err = c.l.StorageVolResize(vol, want, flags)
		}
		if err != nil {
			return fmt.Errorf("growing disk %s to %d GiB: %w", d.Name, d.SizeGiB, err)
		}
	}
	return nil
}

// power drives the domain to spec.PowerState as package power decides.
// Suspended is a managed save: the guest's memory is written to a file
// on the host and the domain shut off; DomainCreate restores it.
func (c *Client) power(ctx context.Context, dom golibvirt.Domain, spec providers.MachineSpec) error {
	state, _, err := c.l.DomainGetState(dom, 0)
	if err != nil {
		return fmt.Errorf("domain %s state: %w", dom.Name, err)
	}
	if golibvirt.DomainState(state) == golibvirt.DomainPaused {
		// banlieue never pauses a domain (Suspended saves its memory):
		// one paused by hand, or by an earlier banlieue, runs again first,
		// as a paused guest can neither be saved cleanly nor shut down.
		if err := c.l.DomainResume(dom); err != nil {
			return fmt.Errorf("resuming paused domain %s: %w", dom.Name, err)
		}
	}
	grace := spec.PowerOffGrace
	if grace <= 0 {
		grace = c.opts.ShutdownGrace
	}
	return power.Drive(ctx, domainPower{c: c, dom: dom}, power.Request{Desired: spec.PowerState, Mode: spec.PowerOffMode,
		Grace: grace, SoftRequested: spec.SoftPowerOffTime, Record: spec.RecordSoftPowerOff})
}

// domainPower is a domain's power primitives.
type domainPower struct {
	c   *Client
	dom golibvirt.Domain
}

func (p domainPower) Observe(context.Context) (infrav1.PowerState, error) {
	return p.c.powerState(p.dom)
}

func (p domainPower) Start(context.Context) error {
	if err := p.c.l.DomainCreate(p.dom); err != nil {
		return fmt.Errorf("starting domain %s: %w", p.dom.Name, err)
	}
	return nil
}

// Resume starts the domain, which restores its managed save.
func (p domainPower) Resume(context.Context) error {
	if err := p.c.l.DomainCreate(p.dom); err != nil {
		return fmt.Errorf("restoring domain %s from its managed save: %w", p.dom.Name, err)
	}
	return nil
}

func (p domainPower) Suspend(context.Context) error {
	if err := p.c.l.DomainManagedSave(p.dom, 0); err != nil {
		return fmt.Errorf("saving domain %s: %w", p.dom.Name, err)
	}
	return nil
}

// SoftOff presses the ACPI power button.
func (p domainPower) SoftOff(context.Context) error {
	if err := p.c.l.DomainShutdown(p.dom); err != nil && !isNotRunning(err) {
		return fmt.Errorf("shutting down domain %s: %w", p.dom.Name, err)
	}
	return nil
}

// HardOff destroys a running domain, or drops a shut-off one's managed
// save.
func (p domainPower) HardOff(context.Context) error {
	if err := p.c.l.DomainDestroy(p.dom); err != nil && !isNotRunning(err) {
		return fmt.Errorf("destroying domain %s: %w", p.dom.Name, err)
	}
	// libvirt fails removing a managed save that is not there
	// ("Failed to remove managed save file ...: No such file or
	// directory"): only one that is.
	saved, err := p.c.l.DomainHasManagedSaveImage(p.dom, 0)
	if err != nil {
		return fmt.Errorf("domain %s managed save: %w", p.dom.Name, err)
	}
	if saved == 1 {
		if err := p.c.l.DomainManagedSaveRemove(p.dom, 0); err != nil {
			return fmt.Errorf("dropping the managed save of domain %s: %w", p.dom.Name, err)
		}
	}
	return nil
}

func isNotRunning(err error) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && golibvirt.ErrorNumber(e.Code) == golibvirt.ErrOperationInvalid
}

// powerState is the domain's power state: running (or shutting down, or
// paused with its memory in the host's RAM) is PoweredOn; shut off with a
// managed save is Suspended.
func (c *Client) powerState(dom golibvirt.Domain) (infrav1.PowerState, error) {
	state, _, err := c.l.DomainGetState(dom, 0)
	if err != nil {
		return "", fmt.Errorf("domain %s state: %w", dom.Name, err)
	}
	switch golibvirt.DomainState(state) {
	case golibvirt.DomainShutoff, golibvirt.DomainCrashed, golibvirt.DomainNostate:
	default:
		return infrav1.PowerStatePoweredOn, nil
	}
	saved, err := c.l.DomainHasManagedSaveImage(dom, 0)
	if err != nil {
		return "", fmt.Errorf("domain %s managed save: %w", dom.Name, err)
	}
	if saved == 1 {
		return infrav1.PowerStateSuspended, nil
	}
	return infrav1.PowerStatePoweredOff, nil
}

// observe reads back what the domain is: identity, power, size, disks,
// networks, firmware, and the first IPv4 address (the DHCP lease of a
// libvirt network or the host's ARP entry, else the static address the
// spec gave).
func (c *Client) observe(dom golibvirt.Domain, spec providers.MachineSpec) (providers.MachineStatus, error) {
	def, err := c.definition(dom)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	ps, err := c.powerState(dom)
	if err != nil {
		return providers.MachineStatus{}, err
	}
	st := providers.MachineStatus{
		InstanceUUID: def.UUID, ProviderID: "libvirt://" + def.UUID,
		PowerState: ps,
		CPUs:       int32(def.VCPU.Value), MemoryMiB: int64(def.Memory.Value) / 1024, // libvirt reports KiB
		Firmware: "bios", TPM: len(def.Devices.TPMs) > 0,
	}
	if def.OS.Firmware == "efi" {
		st.Firmware = "efi"
		if def.Features != nil && def.Features.SMM != nil {
			st.Firmware = "efi-secure"
		}
	}
	for _, d := range def.Devices.Disks {
		if d.Device != "disk" || d.Source == nil || d.Source.File == nil {
			continue
		}
		vol, err := c.l.StorageVolLookupByPath(d.Source.File.File)
		if err != nil {
			return st, fmt.Errorf("disk %s: %w", d.Source.File.File, err)
		}
		_, capacity, _, err := c.l.StorageVolGetInfo(vol)
		if err != nil {
			return st, err
		}
		st.DiskSizesGiB = append(st.DiskSizesGiB, int64(capacity/gib))
	}
	for _, n := range def.Devices.Interfaces {
		switch {
		case n.Source != nil && n.Source.Network != nil:
			st.Networks = append(st.Networks, n.Source.Network.Network)
		case n.Source != nil && n.Source.Bridge != nil:
			st.Networks = append(st.Networks, n.Source.Bridge.Bridge)
		}
		if n.MAC != nil {
			st.MACAddresses = append(st.MACAddresses, n.MAC.Address)
		}
	}
	if st.PowerState == infrav1.PowerStatePoweredOn {
		st.IPAddress = c.address(dom, spec)
	}
	return st, nil
}

func (c *Client) address(dom golibvirt.Domain, spec providers.MachineSpec) string {
	if a := c.guestAddress(dom); a != "" {
		return a
	}
	for _, n := range spec.NICs {
		if n.Static != nil {
			return n.Static.Address
		}
	}
	return ""
}

// DeleteMachine destroys and undefines the domain (its NVRAM, TPM state,
// managed save and snapshots' metadata with it) and deletes every volume
// of the machine: the overlays, data disks and seed (and so the internal
// snapshots' data in them), found by the UID in their names, so a retry
// after a crash finishes the job.
func (c *Client) DeleteMachine(ctx context.Context, spec providers.MachineSpec, _ providers.TaskRecorder) error {
	defer c.bound(ctx)()
	return c.timedOut(ctx, c.deleteMachine(spec))
}

func (c *Client) deleteMachine(spec providers.MachineSpec) error {
	id, err := uuid.Parse(spec.InstanceUUID)
	if err != nil {
		return fmt.Errorf("instance UUID %q: %w", spec.InstanceUUID, err)
	}
	dom, err := c.l.DomainLookupByUUID(golibvirt.UUID(id))
	switch {
	case isNotFound(err):
	case err != nil:
		return fmt.Errorf("looking up domain %s: %w", spec.Name, err)
	default:
		if active, err := c.l.DomainIsActive(dom); err == nil && active == 1 {
			if err := c.l.DomainDestroy(dom); err != nil && !isNotRunning(err) {
				return fmt.Errorf("destroying domain %s: %w", spec.Name, err)
			}
		}
		// Snapshots' metadata goes with it (their data is in the
		// volumes deleted below): libvirt refuses to undefine a domain
		// that has snapshots otherwise.
		flags := golibvirt.DomainUndefineManagedSave | golibvirt.DomainUndefineNvram | golibvirt.DomainUndefineTpm |
			golibvirt.DomainUndefineSnapshotsMetadata
		if err := c.l.DomainUndefineFlags(dom, flags); err != nil && !isNotFound(err) {
			return fmt.Errorf("undefining domain %s: %w", spec.Name, err)
		}
	}
	return c.deleteVolumes(spec.InstanceUUID)
}

// deleteVolumes deletes the volumes, in every pool, named for the machine
// of uid (volumeName).
func (c *Client) deleteVolumes(uid string) error {
	pools, _, err := c.l.ConnectListAllStoragePools(1, golibvirt.ConnectListStoragePoolsActive)
	if err != nil {
		return fmt.Errorf("listing storage pools: %w", err)
	}
	for _, p := range pools {
		vols, _, err := c.l.StoragePoolListAllVolumes(p, 1, 0)
		if err != nil {
			return fmt.Errorf("listing volumes of %s: %w", p.Name, err)
		}
		for _, v := range vols {
			if !strings.Contains(v.Name, "-"+uid+".") {
				continue
			}
			if err := c.l.StorageVolDelete(v, 0); err != nil && !isNotFound(err) {
				return fmt.Errorf("deleting volume %s/%s: %w", p.Name, v.Name, err)
			}
		}
	}
	return nil
}
