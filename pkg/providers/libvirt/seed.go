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
	"encoding/xml"
	"errors"
	"fmt"
	"path"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	"github.com/firestoned/banlieue/pkg/providers"
)

// The domain metadata element that records the seed's state after first
// boot. It lives in the domain's own definition, so a restarted provider
// (or another replica) reads it from libvirt rather than from memory.
const (
	metadataURI = "https://infrastructure.banlieue.io/libvirt"
	metadataKey = "banlieue"
)

// The states of a domain's NoCloud seed after first boot: the provider
// decided to eject it (and may have been interrupted anywhere after),
// then the volume is deleted. "" is attached, or to be.
const (
	seedEjected = "ejected"
	seedRemoved = "removed"
)

// seedElement is the metadata element in the form libvirt hands back
// from DomainGetMetadata (its namespace stripped).
type seedElement struct {
	XMLName xml.Name `xml:"seed"`
	State   string   `xml:"state,attr"`
}

// parseSeedState reads the state out of a metadata element; "" when
// there is none or it is not ours.
func parseSeedState(doc string) string {
	var e seedElement
	if doc == "" || xml.Unmarshal([]byte(doc), &e) != nil {
		return ""
	}
	return e.State
}

// seedMetadata is the domain's <metadata> content recording state, for a
// definition written whole (domainXML): a redefinition must carry it, or
// converge would wipe what DomainSetMetadata recorded.
func seedMetadata(state string) *libvirtxml.DomainMetadata {
	if state == "" {
		return nil
	}
	return &libvirtxml.DomainMetadata{XML: fmt.Sprintf(`<%s:seed xmlns:%s=%q state=%q/>`, metadataKey, metadataKey, metadataURI, state)}
}

// seedState is the state of dom's seed its persistent definition records.
func (c *Client) seedState(dom golibvirt.Domain) (string, error) {
	doc, err := c.l.DomainGetMetadata(dom, int32(golibvirt.DomainMetadataElement), []string{metadataURI}, golibvirt.DomainAffectConfig)
	var e golibvirt.Error
	if errors.As(err, &e) && golibvirt.ErrorNumber(e.Code) == golibvirt.ErrNoDomainMetadata {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("reading the metadata of domain %s: %w", dom.Name, err)
	}
	return parseSeedState(doc), nil
}

// setSeedState records state in dom's definition, and in the running
// domain too when it runs (a redefinition while running keeps the live
// metadata otherwise stale until the next boot).
func (c *Client) setSeedState(dom golibvirt.Domain, state string) error {
	flags := golibvirt.DomainAffectConfig
	if active, err := c.l.DomainIsActive(dom); err == nil && active == 1 {
		flags |= golibvirt.DomainAffectLive
	}
	err := c.l.DomainSetMetadata(dom, int32(golibvirt.DomainMetadataElement),
		[]string{fmt.Sprintf(`<seed state=%q/>`, state)}, []string{metadataKey}, []string{metadataURI}, flags)
	if err != nil {
		return fmt.Errorf("recording seed %s on domain %s: %w", state, dom.Name, err)
	}
	return nil
}

// guestAddress is the first IPv4 address the guest itself made known: a
// DHCP lease of a libvirt network, else an entry of the host's ARP table.
// Unlike observe's address it never falls back to the spec's static
// address, which says nothing about whether the guest booted.
func (c *Client) guestAddress(dom golibvirt.Domain) string {
	for _, src := range []golibvirt.DomainInterfaceAddressesSource{golibvirt.DomainInterfaceAddressesSrcLease, golibvirt.DomainInterfaceAddressesSrcArp} {
		ifaces, err := c.l.DomainInterfaceAddresses(dom, uint32(src), 0)
		if err != nil {
			continue // an inactive domain, or a source this host lacks
		}
		for _, i := range ifaces {
			for _, a := range i.Addrs {
				if a.Type == int32(golibvirt.IPAddrTypeIpv4) {
					return a.Addr
				}
			}
		}
	}
	return ""
}

// removeSeed takes the NoCloud seed away from a domain whose guest booted
// (it has an address of its own: cloud-init's NoCloud datasource reads
// the seed in its local stage, before the network comes up). The seed
// holds the user data, often Cluster API's bootstrap data with its join
// token, on a pool other domains share: it should not outlive its use.
//
// The decision is recorded first (seedEjected), so that from then on
// ensureFirstBoot makes no seed and domainXML attaches none: a provider
// interrupted anywhere after it converges the definition without the
// seed and finishes here, whatever the guest reports by then. Then the
// CD-ROM is ejected, live and in the definition (the drive stays, empty:
// an IDE drive cannot be unplugged live), then the volume deleted (after
// the eject, so a running QEMU never loses a medium it has open), then
// seedRemoved recorded.
//
// Ignition's config is left alone: QEMU gets it as a fw_cfg file, read at
// start, which cannot be removed from a running domain; Ignition itself
// runs on first boot only.
func (c *Client) removeSeed(dom golibvirt.Domain, spec providers.MachineSpec, pool, state string) error {
	if spec.Ignition() || state == seedRemoved {
		return nil
	}
	if state == "" {
		if c.guestAddress(dom) == "" {
			return nil // not booted far enough yet
		}
		if err := c.setSeedState(dom, seedEjected); err != nil {
			return err
		}
	}
	name := volumeName(spec, "seed", "iso")
	if err := c.eject(dom, name); err != nil {
		return err
	}
	if err := c.deleteVolume(pool, name); err != nil {
		return err
	}
	return c.setSeedState(dom, seedRemoved)
}

// eject empties the CD-ROM drive holding volume name, in the running
// domain and in its definition, wherever it still holds it.
func (c *Client) eject(dom golibvirt.Domain, name string) error {
	active, err := c.l.DomainIsActive(dom)
	if err != nil {
		return fmt.Errorf("domain %s: %w", dom.Name, err)
	}
	type view struct {
		xmlFlags golibvirt.DomainXMLFlags
		modify   golibvirt.DomainDeviceModifyFlags
	}
	views := []view{{golibvirt.DomainXMLInactive, golibvirt.DomainDeviceModifyConfig}}
	if active == 1 {
		// Forced: a guest that has the medium open keeps the tray
		// locked, and an eject it is only asked for never happens
		// (libvirt gives up waiting for the tray).
		views = append(views, view{0, golibvirt.DomainDeviceModifyLive | golibvirt.DomainDeviceModifyForce})
	}
	for _, v := range views {
		doc, err := c.l.DomainGetXMLDesc(dom, v.xmlFlags)
		if err != nil {
			return fmt.Errorf("reading domain %s: %w", dom.Name, err)
		}
		d := &libvirtxml.Domain{}
		if err := d.Unmarshal(doc); err != nil {
			return err
		}
		drive := seedDrive(d, name)
		if drive == nil {
			continue
		}
		// The drive as it is, without its medium: libvirt takes that
		// as an eject.
		empty := libvirtxml.DomainDisk{Device: drive.Device, Driver: drive.Driver, Target: drive.Target, ReadOnly: drive.ReadOnly}
		diskXML, err := empty.Marshal()
		if err != nil {
			return err
		}
		if err := c.l.DomainUpdateDeviceFlags(dom, diskXML, v.modify); err != nil {
			return fmt.Errorf("ejecting the seed of domain %s: %w", dom.Name, err)
		}
	}
	return nil
}

// seedDrive is the CD-ROM drive of d holding the volume name, if any.
func seedDrive(d *libvirtxml.Domain, name string) *libvirtxml.DomainDisk {
	if d.Devices == nil {
		return nil
	}
	for i, disk := range d.Devices.Disks {
		if disk.Device == "cdrom" && disk.Source != nil && disk.Source.File != nil && path.Base(disk.Source.File.File) == name {
			return &d.Devices.Disks[i]
		}
	}
	return nil
}

// deleteVolume deletes volume name of pool; one already gone is fine.
func (c *Client) deleteVolume(pool, name string) error {
	p, err := c.l.StoragePoolLookupByName(pool)
	if err != nil {
		return fmt.Errorf("storage pool %s: %w", pool, err)
	}
	vol, err := c.l.StorageVolLookupByName(p, name)
	if isNotFound(err) {
		return nil
	}
	if err == nil {
		err = c.l.StorageVolDelete(vol, 0)
	}
	if err != nil && !isNotFound(err) {
		return fmt.Errorf("deleting volume %s/%s: %w", pool, name, err)
	}
	return nil
}
