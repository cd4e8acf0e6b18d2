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
	"crypto/sha256"
	"encoding/xml"
	"fmt"
	"regexp"
	"strings"

	"libvirt.org/go/libvirtxml"

	"github.com/firestoned/banlieue/pkg/providers"
)

// attachedDisk is a volume as the domain sees it.
type attachedDisk struct {
	path, format, dev string
}

// volumeName is the name of one of a machine's volumes: readable, and
// never another object's (the UID is in it). deleteVolumes relies on the
// "-UID." part.
func volumeName(spec providers.MachineSpec, part, ext string) string {
	return fmt.Sprintf("%s-%s-%s.%s", spec.Name, part, spec.InstanceUUID, ext)
}

// machineVolumeName is volumeName's shape: "-UID.EXT" ends it.
var machineVolumeName = regexp.MustCompile(`-[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}\.[A-Za-z0-9]+$`)

// machineVolume tells whether a volume named name is (or could be) one
// of a machine's (volumeName). No image may be: a machine's overlay would
// then be backed by another machine's disk, and as no base image has a
// machine's name, no overlay's name is ever a base image's.
func machineVolume(name string) bool {
	return machineVolumeName.MatchString(name)
}

// macAddress is NIC i's MAC: QEMU's 52:54:00 prefix and three bytes of a
// hash of the VM's identity, so it stays the same across restarts,
// redefinitions and a provider crash, and the network config written
// before the domain exists matches it.
func macAddress(uuid string, i int) string {
	sum := sha256.Sum256([]byte(fmt.Sprintf("%s/%d", uuid, i)))
	return fmt.Sprintf("52:54:00:%02x:%02x:%02x", sum[0], sum[1], sum[2])
}

func macAddresses(spec providers.MachineSpec) []string {
	out := make([]string, 0, len(spec.NICs))
	for i := range spec.NICs {
		mac := spec.NICs[i].MAC
		if mac == "" {
			mac = macAddress(spec.InstanceUUID, i)
		}
		out = append(out, mac)
	}
	return out
}

// domainXML is the domain for spec: disks, the seed CD-ROM, NICs on their
// networks or bridges with stable MACs, firmware, a vTPM when asked, a
// serial console (a pty, logged to a file libvirt keeps beside QEMU's
// log), the image's architecture, and metadata naming the guest OS
// (libosinfo) beside the seed's state.
func domainXML(spec providers.MachineSpec, opts Options, vols volumes) (string, error) {
	disks, seed := vols.disks, vols.seed
	d := &libvirtxml.Domain{
		Type: opts.DomainType, Name: spec.Name, UUID: spec.InstanceUUID,
		Memory: &libvirtxml.DomainMemory{Value: uint(spec.MemoryMiB), Unit: "MiB"},
		VCPU:   &libvirtxml.DomainVCPU{Value: uint(spec.CPUs)},
		OS: &libvirtxml.DomainOS{
			Type:        &libvirtxml.DomainOSType{Arch: Arch(spec.Architecture), Type: "hvm"},
			BootDevices: []libvirtxml.DomainBootDevice{{Dev: "hd"}},
		},
		Features:   &libvirtxml.DomainFeatureList{ACPI: &libvirtxml.DomainFeature{}, APIC: &libvirtxml.DomainFeatureAPIC{}},
		OnPoweroff: "destroy", OnReboot: "restart", OnCrash: "destroy",
		Devices:  &libvirtxml.DomainDeviceList{},
		Metadata: domainMetadata(OSInfoID(spec.GuestOS), vols.seedState),
	}
	cdromBus := "ide"
	switch spec.Firmware {
	case "efi":
		d.OS.Firmware = "efi"
	case "efi-secure":
		// Secure boot needs SMM, which needs the q35 machine (no IDE there).
		d.OS.Type.Machine = "q35"
		d.OS.Firmware = "efi"
		d.OS.FirmwareInfo = &libvirtxml.DomainOSFirmwareInfo{Features: []libvirtxml.DomainOSFirmwareFeature{
			{Name: "secure-boot", Enabled: "yes"}, {Name: "enrolled-keys", Enabled: "yes"}}}
		d.Features.SMM = &libvirtxml.DomainFeatureSMM{State: "on"}
		cdromBus = "sata"
	case "", "bios":
	default:
		return "", fmt.Errorf("firmware %q: want bios, efi or efi-secure", spec.Firmware)
	}
	for _, disk := range disks {
		d.Devices.Disks = append(d.Devices.Disks, libvirtxml.DomainDisk{
			Device: "disk",
			Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: disk.format},
			Source: &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: disk.path}},
			Target: &libvirtxml.DomainDiskTarget{Dev: disk.dev, Bus: "virtio"},
		})
	}
	if vols.installer.path != "" {
		// Booted after the (blank, then installed) disk.
		d.OS.BootDevices = append(d.OS.BootDevices, libvirtxml.DomainBootDevice{Dev: "cdrom"})
		// The first CD-ROM of the bus is the one firmware boots: the
		// installer, never the seed (hdc before hdd on IDE, sdy before sdz).
		dev := "hdc"
		if cdromBus == "sata" {
			dev = "sdy"
		}
		d.Devices.Disks = append(d.Devices.Disks, libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: vols.installer.format},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: vols.installer.path}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: dev, Bus: cdromBus},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		})
	}
	switch {
	case seed != "" && spec.Ignition():
		// Where Ignition looks on QEMU.
		d.SysInfo = []libvirtxml.DomainSysInfo{{FWCfg: &libvirtxml.DomainSysInfoFWCfg{
			Entry: []libvirtxml.DomainSysInfoEntry{{Name: IgnitionFWCfg, File: seed}}}}}
	case seed != "":
		dev := "hdc"
		if vols.installer.path != "" {
			dev = "hdd"
		}
		if cdromBus == "sata" {
			dev = "sdz"
		}
		d.Devices.Disks = append(d.Devices.Disks, libvirtxml.DomainDisk{
			Device:   "cdrom",
			Driver:   &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
			Source:   &libvirtxml.DomainDiskSource{File: &libvirtxml.DomainDiskSourceFile{File: seed}},
			Target:   &libvirtxml.DomainDiskTarget{Dev: dev, Bus: cdromBus},
			ReadOnly: &libvirtxml.DomainDiskReadOnly{},
		})
	}
	macs := macAddresses(spec)
	for i, nic := range spec.NICs {
		iface := libvirtxml.DomainInterface{
			MAC:   &libvirtxml.DomainInterfaceMAC{Address: macs[i]},
			Model: &libvirtxml.DomainInterfaceModel{Type: "virtio"},
		}
		switch {
		case nic.Bridge != "":
			iface.Source = &libvirtxml.DomainInterfaceSource{Bridge: &libvirtxml.DomainInterfaceSourceBridge{Bridge: nic.Bridge}}
		case nic.Network != "":
			iface.Source = &libvirtxml.DomainInterfaceSource{Network: &libvirtxml.DomainInterfaceSourceNetwork{Network: nic.Network}}
		default:
			return "", fmt.Errorf("interface %s: needs a network or a bridge", nic.Name)
		}
		d.Devices.Interfaces = append(d.Devices.Interfaces, iface)
	}
	if spec.TPM {
		d.Devices.TPMs = []libvirtxml.DomainTPM{{Model: "tpm-crb",
			Backend: &libvirtxml.DomainTPMBackend{Emulator: &libvirtxml.DomainTPMBackendEmulator{Version: "2.0"}}}}
	}
	d.Devices.Serials = []libvirtxml.DomainSerial{{
		Source: &libvirtxml.DomainChardevSource{Pty: &libvirtxml.DomainChardevSourcePty{}},
		Log:    &libvirtxml.DomainChardevLog{File: serialLog(spec.Name), Append: "on"},
	}}
	d.Devices.Consoles = []libvirtxml.DomainConsole{{Target: &libvirtxml.DomainConsoleTarget{Type: "serial"}}}
	return d.Marshal()
}

// libosinfoURI is the namespace of the libosinfo metadata element, which
// names the domain's guest OS for virt-manager, virt-install and other
// libosinfo users.
const libosinfoURI = "http://libosinfo.org/xmlns/libvirt/domain/1.0"

// domainMetadata is the domain's <metadata>: the libosinfo element naming
// its guest OS (osID, none when "") and the seed's state (seedMetadata),
// one beside the other, as libvirt keeps an element per namespace.
func domainMetadata(osID, seedState string) *libvirtxml.DomainMetadata {
	var b strings.Builder
	if osID != "" {
		b.WriteString(`<libosinfo:libosinfo xmlns:libosinfo="` + libosinfoURI + `"><libosinfo:os id="`)
		_ = xml.EscapeText(&b, []byte(osID))
		b.WriteString(`"/></libosinfo:libosinfo>`)
	}
	if m := seedMetadata(seedState); m != nil {
		b.WriteString(m.XML)
	}
	if b.Len() == 0 {
		return nil
	}
	return &libvirtxml.DomainMetadata{XML: b.String()}
}

// osInfoIDOf is the libosinfo os id a domain's metadata names, "" for none.
func osInfoIDOf(m *libvirtxml.DomainMetadata) string {
	if m == nil {
		return ""
	}
	dec := xml.NewDecoder(strings.NewReader("<metadata>" + m.XML + "</metadata>"))
	for {
		tok, err := dec.Token()
		if err != nil {
			return ""
		}
		if e, ok := tok.(xml.StartElement); ok && e.Name.Space == libosinfoURI && e.Name.Local == "os" {
			for _, a := range e.Attr {
				if a.Name.Local == "id" {
					return a.Value
				}
			}
		}
	}
}

// IgnitionFWCfg is the fw_cfg entry Ignition reads its config from on QEMU.
const IgnitionFWCfg = "opt/com.coreos/config"

// serialLog is where the host keeps a domain's serial console output.
func serialLog(name string) string {
	return "/var/log/libvirt/qemu/" + name + ".serial.log"
}

// diskDev is the guest device of disk i: vda, vdb, ...
func diskDev(i int) string {
	return "vd" + string(rune('a'+i))
}
