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
	"context"
	"errors"
	"fmt"
	"path"
	"strconv"
	"strings"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"github.com/google/uuid"
	"libvirt.org/go/libvirtxml"

	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
)

// Snapshots on libvirt are QEMU internal snapshots: kept inside the
// domain's qcow2 volumes (qemu-img snapshot on a shut-off domain, savevm
// on a running one, which always saves the guest's memory and device
// state too), with libvirt's snapshot metadata beside the domain. Every
// call is synchronous: there is no task to record, and a call repeated
// after a crash finds what the first one did by the snapshot's name.
//
// Whether memory was asked for is kept in the snapshot's description:
// a snapshot of a running domain taken without IncludeMemory ends its
// description with noMemoryMark, and a revert to it leaves the domain
// shut off on the snapshot's disks. libvirt keeps no other per-snapshot
// metadata (domain snapshots have no <metadata>), the description is
// stored and returned verbatim, and the mark is only ever added, so a
// snapshot without it is what libvirt says it is.
var (
	_ providers.Snapshots = &Client{}
	_ providers.Snapshots = &hostSet{}
)

// noMemoryMark ends the description of a snapshot of a running domain
// taken without IncludeMemory (its memory is in it all the same: savevm).
const noMemoryMark = "[banlieue: disks only, reverts powered off]"

// snapshotLimits are machinespec.SnapshotLimits, answered once there.
var snapshotLimits = machinespec.SnapshotLimits

// SnapshotLimits are libvirt's.
func (c *Client) SnapshotLimits() providers.SnapshotLimits { return snapshotLimits }

// SnapshotLimits are libvirt's, the same on every host.
func (s *hostSet) SnapshotLimits() providers.SnapshotLimits { return snapshotLimits }

// ListSnapshots lists the domain's snapshots named with
// providers.SnapshotPrefix.
func (c *Client) ListSnapshots(ctx context.Context, spec providers.MachineSpec) ([]providers.SnapshotInfo, error) {
	defer c.bound(ctx)()
	out, err := c.listSnapshots(spec)
	return out, c.timedOut(ctx, err)
}

func (c *Client) listSnapshots(spec providers.MachineSpec) ([]providers.SnapshotInfo, error) {
	dom, err := c.snapshotDomain(spec)
	if err != nil {
		return nil, err
	}
	snaps, _, err := c.l.DomainListAllSnapshots(dom, 1, 0)
	if err != nil {
		if isNotFound(err) {
			return nil, fmt.Errorf("domain %s: %w", spec.Name, providers.ErrNoMachine)
		}
		return nil, fmt.Errorf("listing the snapshots of domain %s: %w", spec.Name, err)
	}
	out := []providers.SnapshotInfo{}
	for _, s := range snaps {
		if !strings.HasPrefix(s.Name, providers.SnapshotPrefix) {
			continue
		}
		info, err := c.snapshotInfo(s)
		if isNoSnapshot(err) {
			continue // deleted since the list
		}
		if err != nil {
			return nil, err
		}
		out = append(out, info)
	}
	return out, nil
}

// CreateSnapshot takes an internal snapshot of the domain named snap.Name,
// or returns the one of that name it has. resume is ignored: libvirt has
// no task to await, and the name is the snapshot's identity, so a call
// repeated after a crash finds the snapshot by it (a creation still
// running in libvirtd fails the repeat with a busy domain, and the next
// one finds it). Nothing is recorded, for the same reason.
func (c *Client) CreateSnapshot(ctx context.Context, spec providers.MachineSpec, snap providers.SnapshotSpec, _ string, _ providers.TaskRecorder) (providers.SnapshotInfo, error) {
	defer c.bound(ctx)()
	info, err := c.createSnapshot(spec, snap)
	return info, c.timedOut(ctx, err)
}

func (c *Client) createSnapshot(spec providers.MachineSpec, snap providers.SnapshotSpec) (providers.SnapshotInfo, error) {
	if !strings.HasPrefix(snap.Name, providers.SnapshotPrefix) {
		return providers.SnapshotInfo{}, fmt.Errorf("snapshot name %q does not start with %s", snap.Name, providers.SnapshotPrefix)
	}
	dom, err := c.snapshotDomain(spec)
	if err != nil {
		return providers.SnapshotInfo{}, err
	}
	if s, err := c.l.DomainSnapshotLookupByName(dom, snap.Name, 0); err == nil {
		return c.snapshotInfo(s)
	} else if !isNoSnapshot(err) {
		return providers.SnapshotInfo{}, fmt.Errorf("looking up snapshot %s of domain %s: %w", snap.Name, spec.Name, err)
	}
	active, err := c.l.DomainIsActive(dom)
	if err != nil {
		return providers.SnapshotInfo{}, fmt.Errorf("domain %s: %w", spec.Name, err)
	}
	desc := snap.Description
	if active == 1 && !snap.IncludeMemory {
		desc = strings.TrimSpace(desc + " " + noMemoryMark)
	}
	doc, err := (&libvirtxml.DomainSnapshot{Name: snap.Name, Description: desc}).Marshal()
	if err != nil {
		return providers.SnapshotInfo{}, err
	}
	s, err := c.l.DomainSnapshotCreateXML(dom, doc, 0)
	if err != nil {
		// Taken by a call that ran at the same time: that one is it.
		if s, lerr := c.l.DomainSnapshotLookupByName(dom, snap.Name, 0); lerr == nil {
			return c.snapshotInfo(s)
		}
		return providers.SnapshotInfo{}, c.refusal(dom, spec, err)
	}
	return c.snapshotInfo(s)
}

// refusal says why libvirt would not snapshot the domain, when it is
// something of the domain's own (its firmware, a raw disk) rather than
// the host's.
func (c *Client) refusal(dom golibvirt.Domain, spec providers.MachineSpec, err error) error {
	def, derr := c.definition(dom)
	if derr != nil {
		return fmt.Errorf("snapshotting domain %s: %w", spec.Name, err)
	}
	msg := err.Error()
	pflash := def.OS != nil && (def.OS.Firmware == "efi" || (def.OS.Loader != nil && def.OS.Loader.Type == "pflash"))
	if pflash && strings.Contains(msg, "pflash") {
		fw := "efi"
		if def.Features != nil && def.Features.SMM != nil {
			fw = "efi-secure"
		}
		return fmt.Errorf("libvirt cannot take an internal snapshot of a VM with UEFI pflash firmware (%s): %w", fw, err)
	}
	for _, d := range def.Devices.Disks {
		if d.Device != "disk" || d.Driver == nil || d.Driver.Type == "qcow2" || d.Target == nil {
			continue
		}
		if strings.Contains(msg, "unsupported for storage type") || strings.Contains(msg, "does not support snapshotting") {
			return fmt.Errorf("libvirt takes internal snapshots of qcow2 disks only, and disk %s of %s is %s (a thick or eagerZeroed boot disk, or an eagerZeroed data disk): %w",
				d.Target.Dev, spec.Name, d.Driver.Type, err)
		}
	}
	return fmt.Errorf("snapshotting domain %s: %w", spec.Name, err)
}

// RevertSnapshot reverts the domain to snapshot name (libvirt's revert:
// disks, and memory and running state when the snapshot holds them). A
// snapshot taken without memory of a running domain is reverted paused,
// and the domain destroyed at once: it ends shut off on the snapshot's
// disks, the guest never having run from the snapshot's memory. A
// snapshot of a shut-off domain leaves it shut off. A managed save left
// from before is dropped: its memory belongs to disks no longer there.
// libvirt restores the definition the snapshot holds too (CPUs, memory,
// devices, metadata): the next EnsureMachine converges it to the spec; a
// NoCloud seed removed since the snapshot stays removed (seedStandIn).
// resume is ignored: the revert is one synchronous call.
func (c *Client) RevertSnapshot(ctx context.Context, spec providers.MachineSpec, name, _ string, _ providers.TaskRecorder) error {
	defer c.bound(ctx)()
	return c.timedOut(ctx, c.revertSnapshot(spec, name))
}

func (c *Client) revertSnapshot(spec providers.MachineSpec, name string) error {
	dom, err := c.snapshotDomain(spec)
	if err != nil {
		return err
	}
	s, err := c.l.DomainSnapshotLookupByName(dom, name, 0)
	switch {
	case isNoSnapshot(err):
		return fmt.Errorf("snapshot %s of domain %s: %w", name, spec.Name, providers.ErrNoSnapshot)
	case isNotFound(err):
		return fmt.Errorf("domain %s: %w", spec.Name, providers.ErrNoMachine)
	case err != nil:
		return fmt.Errorf("looking up snapshot %s of domain %s: %w", name, spec.Name, err)
	}
	def, err := c.snapshotDef(s)
	if err != nil {
		return err
	}
	withMemory := snapshotMemory(def)
	var flags golibvirt.DomainSnapshotRevertFlags
	if !withMemory && def.State != "shutoff" {
		flags = golibvirt.DomainSnapshotRevertPaused
	}
	// The managed save goes first: its memory belongs to the disks the
	// revert replaces. (libvirt fails removing one that is not there.)
	if saved, err := c.l.DomainHasManagedSaveImage(dom, 0); err != nil {
		return fmt.Errorf("domain %s managed save: %w", spec.Name, err)
	} else if saved == 1 {
		if err := c.l.DomainManagedSaveRemove(dom, 0); err != nil {
			return fmt.Errorf("dropping the managed save of domain %s: %w", spec.Name, err)
		}
	}
	seed, pool, err := c.seedStandIn(dom, spec, def)
	if err != nil {
		return err
	}
	if err := c.l.DomainRevertToSnapshot(s, uint32(flags)); err != nil {
		return fmt.Errorf("reverting domain %s to snapshot %s: %w", spec.Name, name, err)
	}
	if !withMemory {
		if active, err := c.l.DomainIsActive(dom); err != nil {
			return fmt.Errorf("domain %s: %w", spec.Name, err)
		} else if active == 1 {
			if err := c.l.DomainDestroy(dom); err != nil && !isNotRunning(err) {
				return fmt.Errorf("powering off domain %s reverted to %s (a snapshot without memory): %w", spec.Name, name, err)
			}
		}
	}
	if seed == "" {
		return nil
	}
	// The seed goes again, as removeSeed takes it: decided, ejected
	// (live and defined), deleted, recorded. Interrupted, the next
	// EnsureMachine finishes it (the definition says seedEjected), or,
	// before the decision, removes it once the guest has an address.
	if err := c.setSeedState(dom, seedEjected); err != nil {
		return err
	}
	if err := c.eject(dom, seed); err != nil {
		return err
	}
	if err := c.deleteVolume(pool, seed); err != nil {
		return err
	}
	return c.setSeedState(dom, seedRemoved)
}

// seedStandIn: a snapshot taken before the guest's NoCloud seed was
// removed (removeSeed) names the seed volume in the definition it holds,
// which a revert restores, and libvirt then refuses to start the domain
// without it ("Cannot access storage file ...: No such file or
// directory"). When the domain's seed is gone now, seedStandIn makes an
// empty volume of its name in its pool for the revert to open, and
// returns its name and pool; the revert removes it after, so the domain
// ends without its seed, as it was. "" when the snapshot's definition
// names no seed that is gone.
func (c *Client) seedStandIn(dom golibvirt.Domain, spec providers.MachineSpec, snap *libvirtxml.DomainSnapshot) (name, pool string, err error) {
	if snap.Domain == nil || snap.Domain.Devices == nil {
		return "", "", nil
	}
	state, err := c.seedState(dom)
	if err != nil || state == "" {
		return "", "", err // the seed is there (or to be): nothing to stand in for
	}
	file := ""
	for _, d := range snap.Domain.Devices.Disks {
		if d.Device == "cdrom" && d.Source != nil && d.Source.File != nil &&
			strings.HasSuffix(path.Base(d.Source.File.File), "-seed-"+spec.InstanceUUID+".iso") {
			file = d.Source.File.File
		}
	}
	if file == "" {
		return "", "", nil
	}
	if _, err := c.l.StorageVolLookupByPath(file); err == nil || !isNotFound(err) {
		return "", "", err // there after all, or the host cannot say
	}
	p, err := c.l.StoragePoolLookupByTargetPath(path.Dir(file))
	if err != nil {
		return "", "", fmt.Errorf("the pool of %s's seed %s: %w", spec.Name, file, err)
	}
	name = path.Base(file)
	v := libvirtxml.StorageVolume{Name: name, Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: 1},
		Target: &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}}}
	if _, err := c.ensureVolume(p.Name, v, nil, nil, 0); err != nil {
		return "", "", fmt.Errorf("a stand-in for %s's removed seed, for the revert: %w", spec.Name, err)
	}
	return name, p.Name, nil
}

// DeleteSnapshot deletes snapshot name (its data in the qcow2 volumes and
// libvirt's metadata); the domain's current state and its other
// snapshots stay. A missing snapshot or domain is fine.
func (c *Client) DeleteSnapshot(ctx context.Context, spec providers.MachineSpec, name, _ string, _ providers.TaskRecorder) error {
	defer c.bound(ctx)()
	return c.timedOut(ctx, c.deleteSnapshot(spec, name))
}

func (c *Client) deleteSnapshot(spec providers.MachineSpec, name string) error {
	dom, err := c.snapshotDomain(spec)
	if errors.Is(err, providers.ErrNoMachine) {
		return nil
	}
	if err != nil {
		return err
	}
	s, err := c.l.DomainSnapshotLookupByName(dom, name, 0)
	if isNoSnapshot(err) || isNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("looking up snapshot %s of domain %s: %w", name, spec.Name, err)
	}
	if err := c.l.DomainSnapshotDelete(s, 0); err != nil && !isNoSnapshot(err) && !isNotFound(err) {
		return fmt.Errorf("deleting snapshot %s of domain %s: %w", name, spec.Name, err)
	}
	return nil
}

// snapshotDomain finds the domain by its UUID; ErrNoMachine when there
// is none.
func (c *Client) snapshotDomain(spec providers.MachineSpec) (golibvirt.Domain, error) {
	id, err := uuid.Parse(spec.InstanceUUID)
	if err != nil {
		return golibvirt.Domain{}, fmt.Errorf("instance UUID %q: %w", spec.InstanceUUID, err)
	}
	dom, err := c.l.DomainLookupByUUID(golibvirt.UUID(id))
	switch {
	case isNotFound(err):
		return golibvirt.Domain{}, fmt.Errorf("domain %s: %w", spec.Name, providers.ErrNoMachine)
	case err != nil:
		return golibvirt.Domain{}, fmt.Errorf("looking up domain %s: %w", spec.Name, err)
	}
	return dom, nil
}

func (c *Client) snapshotDef(s golibvirt.DomainSnapshot) (*libvirtxml.DomainSnapshot, error) {
	doc, err := c.l.DomainSnapshotGetXMLDesc(s, 0)
	if err != nil {
		return nil, fmt.Errorf("reading snapshot %s: %w", s.Name, err)
	}
	def := &libvirtxml.DomainSnapshot{}
	if err := def.Unmarshal(doc); err != nil {
		return nil, fmt.Errorf("snapshot %s: %w", s.Name, err)
	}
	return def, nil
}

// snapshotInfo reads a snapshot back.
func (c *Client) snapshotInfo(s golibvirt.DomainSnapshot) (providers.SnapshotInfo, error) {
	def, err := c.snapshotDef(s)
	if err != nil {
		return providers.SnapshotInfo{}, err
	}
	info := providers.SnapshotInfo{Name: s.Name, Ref: s.Name, Memory: snapshotMemory(def)}
	if def.CreationTime != "" {
		sec, err := strconv.ParseInt(def.CreationTime, 10, 64)
		if err != nil {
			return info, fmt.Errorf("snapshot %s: creation time %q: %w", s.Name, def.CreationTime, err)
		}
		info.CreationTime = time.Unix(sec, 0).UTC()
	}
	return info, nil
}

// snapshotMemory: a revert to the snapshot restores the guest's memory
// (it was taken of a running domain, and with memory: no noMemoryMark).
func snapshotMemory(def *libvirtxml.DomainSnapshot) bool {
	switch def.State {
	case "running", "paused", "blocked", "pmsuspended":
	default:
		return false
	}
	if def.Memory != nil && def.Memory.Snapshot == "no" {
		return false
	}
	return !strings.HasSuffix(strings.TrimSpace(def.Description), noMemoryMark)
}

func isNoSnapshot(err error) bool {
	var e golibvirt.Error
	return errors.As(err, &e) && golibvirt.ErrorNumber(e.Code) == golibvirt.ErrNoDomainSnapshot
}

// ListSnapshots, CreateSnapshot, RevertSnapshot and DeleteSnapshot reach
// the machine's host.
func (s *hostSet) ListSnapshots(ctx context.Context, spec providers.MachineSpec) ([]providers.SnapshotInfo, error) {
	c, err := s.client(spec.Location)
	if err != nil {
		return nil, err
	}
	return c.ListSnapshots(ctx, spec)
}

func (s *hostSet) CreateSnapshot(ctx context.Context, spec providers.MachineSpec, snap providers.SnapshotSpec, resume string, record providers.TaskRecorder) (providers.SnapshotInfo, error) {
	c, err := s.client(spec.Location)
	if err != nil {
		return providers.SnapshotInfo{}, err
	}
	return c.CreateSnapshot(ctx, spec, snap, resume, record)
}

func (s *hostSet) RevertSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	c, err := s.client(spec.Location)
	if err != nil {
		return err
	}
	return c.RevertSnapshot(ctx, spec, name, resume, record)
}

func (s *hostSet) DeleteSnapshot(ctx context.Context, spec providers.MachineSpec, name, resume string, record providers.TaskRecorder) error {
	c, err := s.client(spec.Location)
	if err != nil {
		return err
	}
	return c.DeleteSnapshot(ctx, spec, name, resume, record)
}
