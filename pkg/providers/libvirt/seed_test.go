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
	"strings"
	"testing"
	"time"

	golibvirt "github.com/digitalocean/go-libvirt"
	"libvirt.org/go/libvirtxml"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestParseSeedState: the metadata element as libvirt hands it back (its
// namespace stripped) or as domainXML writes it.
func TestParseSeedState(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{"", ""},
		{`<seed state="ejected"/>`, seedEjected},
		{`<seed state='removed'></seed>`, seedRemoved},
		{seedMetadata(seedRemoved).XML, seedRemoved},
		{`<other state="removed"/>`, ""},
		{`not xml`, ""},
	} {
		if got := parseSeedState(tc.doc); got != tc.want {
			t.Errorf("parseSeedState(%q) = %q, want %q", tc.doc, got, tc.want)
		}
	}
	if seedMetadata("") != nil {
		t.Error("an attached seed wrote metadata")
	}
}

// seedOf tells where the seed volume name is: in the running domain's
// CD-ROM, in its definition's, in the pool; and what the definition
// records of it.
func seedOf(t *testing.T, domain, name string) (live, config, onPool bool, state string) {
	t.Helper()
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	dom, err := l.DomainLookupByName(domain)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []struct {
		flags golibvirt.DomainXMLFlags
		into  *bool
	}{{0, &live}, {golibvirt.DomainXMLInactive, &config}} {
		doc, err := l.DomainGetXMLDesc(dom, v.flags)
		if err != nil {
			t.Fatal(err)
		}
		d := &libvirtxml.Domain{}
		if err := d.Unmarshal(doc); err != nil {
			t.Fatal(err)
		}
		*v.into = seedDrive(d, name) != nil
	}
	if doc, err := l.DomainGetMetadata(dom, int32(golibvirt.DomainMetadataElement), []string{metadataURI}, golibvirt.DomainAffectConfig); err == nil {
		state = parseSeedState(doc)
	}
	p, err := l.StoragePoolLookupByName(libvirtd.Pool)
	if err != nil {
		t.Fatal(err)
	}
	if err := l.StoragePoolRefresh(p, 0); err != nil {
		t.Fatal(err)
	}
	_, err = l.StorageVolLookupByName(p, name)
	return live, config, err == nil, state
}

// TestSeedRemovalResumes: a provider that recorded its decision and
// ejected the CD-ROM from the running domain, then stopped (crashed)
// before ejecting it from the definition and deleting the volume, has
// the job finished by the next reconcile, by another client; the seed
// is not uploaded, made or attached again.
func TestSeedRemovalResumes(t *testing.T) {
	ctx := context.Background()
	spec := providers.MachineSpec{
		Name: "ns.crash-0", HostName: "crash-0", InstanceUUID: "7d2e4f60-1a3b-4c5d-8e6f-708192a3b4c5",
		Location: failuredomain.Location{Host: "h"}, Image: image, CPUs: 1, MemoryMiB: 256,
		Disks:    []providers.Disk{{Name: "root", SizeGiB: 1}},
		NICs:     []providers.NIC{{Name: "eth0", Network: libvirtd.Network}},
		UserData: []byte("#!/bin/sh\necho secret-join-token\n"), PowerState: infrav1.PowerStatePoweredOn,
	}
	seed := volumeName(spec, "seed", "iso")
	c := connect(t)
	rec := &recorder{}
	if _, err := c.EnsureMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.DeleteMachine(ctx, spec, rec.record) })
	if live, config, onPool, state := seedOf(t, spec.Name, seed); !live || !config || !onPool || state != "" {
		t.Fatalf("before first boot: seed live %t, defined %t, on the pool %t, state %q", live, config, onPool, state)
	}

	// What the interrupted provider did: the decision, the live eject.
	l, err := daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	interrupted := &Client{l: l, opts: c.opts}
	dom, err := l.DomainLookupByName(spec.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := interrupted.setSeedState(dom, seedEjected); err != nil {
		t.Fatal(err)
	}
	drive := libvirtxml.DomainDisk{Device: "cdrom", Driver: &libvirtxml.DomainDiskDriver{Name: "qemu", Type: "raw"},
		Target: &libvirtxml.DomainDiskTarget{Dev: "hdc", Bus: "ide"}, ReadOnly: &libvirtxml.DomainDiskReadOnly{}}
	doc, err := drive.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	// As the provider would have: after the guest booted. While it boots
	// its firmware and kernel load the tray of the drive they probe, so a
	// forced eject finds it shut again ("Tray of device ... is not
	// open"); the provider only ejects once the guest has an address.
	waitSerial(t, spec.Name, "BANLIEUE-READY")
	for try := 1; ; try++ {
		err := l.DomainUpdateDeviceFlags(dom, doc, golibvirt.DomainDeviceModifyLive|golibvirt.DomainDeviceModifyForce)
		if err == nil {
			break
		}
		if try == 20 {
			t.Fatalf("ejecting the seed live, %d tries: %v", try, err)
		}
		time.Sleep(250 * time.Millisecond)
	}
	_ = l.Disconnect()
	if live, config, onPool, state := seedOf(t, spec.Name, seed); live || !config || !onPool || state != seedEjected {
		t.Fatalf("after the interrupted removal: seed live %t, defined %t, on the pool %t, state %q", live, config, onPool, state)
	}

	// Another provider (a restart), with the user data given or omitted.
	omitted := spec
	omitted.UserData, omitted.UserDataOmitted = nil, true
	for i, s := range []providers.MachineSpec{spec, omitted, spec} {
		if _, err := connect(t).EnsureMachine(ctx, s, rec.record); err != nil {
			t.Fatalf("ensure %d: %v", i, err)
		}
		if live, config, onPool, state := seedOf(t, spec.Name, seed); live || config || onPool || state != seedRemoved {
			t.Errorf("ensure %d: seed live %t, defined %t, on the pool %t, state %q", i, live, config, onPool, state)
		}
	}
	if def := domainXMLOf(t, spec.Name); !strings.Contains(def, metadataURI) {
		t.Errorf("the running domain lost the seed's record:\n%s", def)
	}
	// A definition written whole (converge's redefinition) keeps the
	// record in the form domainXML writes it.
	l, err = daemon.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	def, err := (&Client{l: l}).definition(dom)
	if err != nil {
		t.Fatal(err)
	}
	def.Metadata = seedMetadata(seedRemoved)
	doc, err = def.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.DomainDefineXML(doc); err != nil {
		t.Fatal(err)
	}
	if state, err := (&Client{l: l}).seedState(dom); err != nil || state != seedRemoved {
		t.Errorf("after a redefinition: seed state %q, %v", state, err)
	}
	if err := c.DeleteMachine(ctx, spec, rec.record); err != nil {
		t.Fatal(err)
	}
	if left := volumesOf(t, spec.InstanceUUID); len(left) > 0 {
		t.Errorf("volumes left behind: %v", left)
	}
}
