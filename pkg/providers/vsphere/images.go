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

package vsphere

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"html"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vmware/govmomi/fault"
	"github.com/vmware/govmomi/nfc"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/ovf"
	"github.com/vmware/govmomi/property"
	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/soap"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/vmdk"
	"github.com/firestoned/banlieue/pkg/providers"
)

// An import is built once per datacenter (the kind's Scope), as an OVF
// deployment does it: CreateImportSpec from a descriptor (an OVA's own,
// or a one-disk one generated for a qcow2 or raw image), ImportVApp into
// the datacenter's VM folder on the target datastore, each disk streamed
// as a streamOptimized VMDK through the NFC lease, the lease completed,
// the VM marked a template. The template named NAME at the root of the
// datacenter's VM folder is the import's only durable record: a VM of
// that name that is not a template is what an interrupted import left,
// destroyed before the next try. Its ref is NAME, the path under the VM
// folder a machine's spec.template names.
//
// The bytes never touch local disk except a qcow2's: a qcow2 is read out
// of order to be converted, so it is staged in a scratch file of the
// temporary directory (banlieue-import-pidPID-*, at most ScratchLimit
// bytes) before anything is built (its checksum is checked by then), and
// always removed when the import ends; those a killed process left are
// swept by the next one (scratch.go). A raw image is converted while it
// streams, an OVA's files are uploaded as they come out of the tar.

// ScratchLimit bounds the scratch file a qcow2 import stages its image in.
var ScratchLimit int64 = 64 << 30

// scratchPattern matches the qcow2 imports' scratch files in
// os.TempDir(), of any process (scratchCreatePattern).
const scratchPattern = "banlieue-import-*.qcow2"

// leaseKeepAlive is how often an open NFC lease is told the upload's
// progress, which also keeps it from timing out (vCenter's default
// timeout is five minutes).
var leaseKeepAlive = 10 * time.Second

// ImportedImage finds the template of target in the location's
// datacenter.
func (c *Client) ImportedImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget) (string, bool, error) {
	found, err := c.TemplateExists(ctx, loc.Datacenter, t.Name)
	return t.Name, found, err
}

// ImportImage sniffs the bytes' format before anything is built, removes
// what an interrupted import left, then imports, completes and marks the
// template. On an error nothing of target is left in the datacenter (what
// a cancelled context keeps this from removing, the next import removes
// first), and no scratch file.
func (c *Client) ImportImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget, body io.Reader) (string, error) {
	switch t.Format {
	case v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw, v1alpha1.ImageFormatOVA, v1alpha1.ImageFormatISO:
	default:
		return "", fmt.Errorf("vSphere imports qcow2, raw, ova and iso images, not %s", t.Format)
	}
	if loc.Datacenter == "" {
		return "", errors.New("an import is built in a datacenter: the location names none")
	}
	head := bufio.NewReaderSize(body, 1<<20)
	if t.Format == v1alpha1.ImageFormatISO {
		b, err := head.Peek(images.ISOSniffLen)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if err := images.SniffISO(b); err != nil {
			return "", err
		}
	} else {
		b, err := head.Peek(512)
		if err != nil && !errors.Is(err, io.EOF) {
			return "", err
		}
		if err := sniff(b, t.Format); err != nil {
			return "", err
		}
	}
	if t.Format == v1alpha1.ImageFormatRaw && t.Size <= 0 {
		return "", errors.New("the image server did not say the raw image's length, which is the disk's capacity")
	}
	unlock, err := lockImport(ctx, c.gc.Client.URL().Host+"|"+loc.Datacenter+"|"+t.Name)
	if err != nil {
		return "", err
	}
	defer unlock()
	// Providers of one vCenter share its datacenters: one that built
	// this import (the same bytes: the name carries the revision) while
	// this one waited built what this one would.
	if _, found, err := c.ImportedImage(ctx, loc, t); err != nil || found {
		return t.Name, err
	}
	if err := c.DeleteImportedImage(ctx, loc, t); err != nil {
		return "", err
	}
	build := c.buildTemplate
	if t.Format == v1alpha1.ImageFormatISO {
		build = func(ctx context.Context, dc string, t providers.ImageTarget, body *bufio.Reader) error {
			return c.buildInstaller(ctx, dc, t, body)
		}
	}
	if err := build(ctx, loc.Datacenter, t, head); err != nil {
		// Nothing half built is left: the retry starts over.
		cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*callTimeout)
		defer cancel()
		_ = c.DeleteImportedImage(cleanup, loc, t)
		return "", err
	}
	return t.Name, nil
}

// sniff checks an image's first bytes (up to 512) against its format: a
// qcow2 and raw image as images.Sniff does, an OVA is a tar archive.
func sniff(head []byte, format v1alpha1.ImageFormat) error {
	if format != v1alpha1.ImageFormatOVA {
		n := min(len(head), images.SniffLen)
		_, err := images.Sniff(head[:n], format)
		return err
	}
	if len(head) < 512 || !bytes.Equal(head[257:262], []byte("ustar")) {
		return fmt.Errorf("%w: the image's bytes are not a tar archive, which an OVA is, spec.import.format says ova", images.ErrFormatMismatch)
	}
	return nil
}

// importLocks serialise the builds of one import in one datacenter of one
// vCenter (host|datacenter|name) in this process, which serves every
// Provider of the class.
var importLocks sync.Map

func lockImport(ctx context.Context, key string) (func(), error) {
	v, _ := importLocks.LoadOrStore(key, make(chan struct{}, 1))
	sem := v.(chan struct{})
	select {
	case sem <- struct{}{}:
		return func() { <-sem }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// importSource is the bytes of an import: its OVF descriptor, and the
// files its file items name.
type importSource struct {
	// descriptor is the OVF descriptor.
	descriptor string
	// upload writes every file item to put, in the order the source has
	// them, then reads the body to its end (its checksum).
	upload func(put func(href string, size int64, r io.Reader) error) error
	// done and total are the bytes of the source the upload has read, and
	// all of them (0: unknown): the lease's progress.
	done  *atomic.Int64
	total int64
	// close releases what the source holds (a scratch file).
	close func()
}

// buildTemplate imports t's bytes into datacenter as a VM named t.Name and
// marks it a template.
func (c *Client) buildTemplate(ctx context.Context, datacenter string, t providers.ImageTarget, body *bufio.Reader) error {
	l, err := c.locate(ctx, datacenter)
	if err != nil {
		return err
	}
	ds, err := l.datastore(ctx, t.Storage)
	if err != nil {
		return fmt.Errorf("datastore %s (the Provider's first storage class) in %s: %w", t.Storage, datacenter, err)
	}
	pool, err := l.importPool(ctx, ds)
	if err != nil {
		return err
	}
	folder, err := l.folder(ctx, "")
	if err != nil {
		return fmt.Errorf("the VM folder of %s: %w", datacenter, err)
	}
	read := &countingReader{r: body}
	var src importSource
	switch t.Format {
	case v1alpha1.ImageFormatOVA:
		src, err = ovaSource(read)
	case v1alpha1.ImageFormatQCOW2:
		// Staged before anything is built: the download (and its
		// checksum) is done before a VM exists or a lease is open.
		src, err = qcow2Source(ctx, t, body, read)
	default:
		src, err = rawSource(t, read)
	}
	if err != nil {
		return err
	}
	if src.close != nil {
		defer src.close()
	}
	if src.done == nil {
		src.done, src.total = &read.n, t.Size
	}

	cisp := types.OvfCreateImportSpecParams{
		EntityName:       t.Name,
		DiskProvisioning: string(types.OvfCreateImportSpecParamsDiskProvisioningTypeThin),
		OvfManagerCommonParams: types.OvfManagerCommonParams{
			Locale: "US",
		},
	}
	spec, err := ovf.NewManager(c.gc.Client).CreateImportSpec(ctx, src.descriptor, pool, ds, &cisp)
	if err != nil {
		return fmt.Errorf("creating the import spec of %s: %w", t.Name, err)
	}
	if len(spec.Error) > 0 {
		return fmt.Errorf("creating the import spec of %s: %s", t.Name, spec.Error[0].LocalizedMessage)
	}
	if _, ok := spec.ImportSpec.(*types.VirtualMachineImportSpec); !ok {
		return fmt.Errorf("the OVF descriptor of %s is a vApp (%T), not one virtual machine a template is made of", t.Name, spec.ImportSpec)
	}
	lease, err := pool.ImportVApp(ctx, spec.ImportSpec, folder, nil)
	if err != nil {
		return fmt.Errorf("importing %s into %s: %w", t.Name, datacenter, err)
	}
	completed := false
	defer func() {
		if !completed {
			abort, cancel := context.WithTimeout(context.WithoutCancel(ctx), callTimeout)
			defer cancel()
			_ = lease.Abort(abort, nil)
		}
	}()
	info, err := lease.Wait(ctx, spec.FileItem)
	if err != nil {
		return fmt.Errorf("waiting for the NFC lease of %s: %w", t.Name, err)
	}
	stop := keepAlive(ctx, lease, src.done, src.total)
	err = src.upload(func(href string, size int64, r io.Reader) error {
		for _, item := range info.Items {
			if item.Path != href {
				continue
			}
			up := soap.Upload{Method: "POST", Type: "application/x-vnd.vmware-streamVmdk", ContentLength: size}
			if item.Create {
				up.Method, up.Type, up.Headers = "PUT", "application/octet-stream", map[string]string{"Overwrite": "t"}
			}
			if err := c.gc.Client.Upload(ctx, r, item.URL, &up); err != nil {
				return fmt.Errorf("uploading %s of %s through the NFC lease: %w", href, t.Name, err)
			}
			return nil
		}
		return fmt.Errorf("the OVF descriptor of %s names no file %s to upload", t.Name, href)
	})
	stop()
	if err != nil {
		return err
	}
	if err := lease.Complete(ctx); err != nil {
		return fmt.Errorf("completing the NFC lease of %s: %w", t.Name, err)
	}
	completed = true
	vm := object.NewVirtualMachine(c.gc.Client, info.Entity)
	if err := vm.MarkAsTemplate(ctx); err != nil {
		return fmt.Errorf("marking %s a template: %w", t.Name, err)
	}
	return nil
}

// keepAlive reports the upload's progress (done bytes of the source out of
// total) to the lease until the returned stop is called: what keeps it
// from timing out. A failed report is not fatal: the upload's own error
// says more.
func keepAlive(ctx context.Context, lease *nfc.Lease, done *atomic.Int64, total int64) (stop func()) {
	stopped := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		tick := time.NewTicker(leaseKeepAlive)
		defer tick.Stop()
		for {
			select {
			case <-stopped:
				return
			case <-ctx.Done():
				return
			case <-tick.C:
			}
			percent := int32(0)
			if total > 0 {
				percent = int32(min(99, done.Load()*100/total))
			}
			call, cancel := context.WithTimeout(ctx, callTimeout)
			if err := lease.Progress(call, percent); err != nil {
				klog.V(2).InfoS("Reporting an NFC lease's progress failed", "err", err)
			}
			cancel()
		}
	}()
	return func() { close(stopped); wg.Wait() }
}

// importPool is the root resource pool of the first cluster (by name) of
// the datacenter whose hosts see ds: where the imported VM is registered.
func (l *located) importPool(ctx context.Context, ds *object.Datastore) (*object.ResourcePool, error) {
	clusters, err := l.f.ClusterComputeResourceList(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("listing the clusters of %s: %w", l.dcPath(), err)
	}
	refs := make([]types.ManagedObjectReference, 0, len(clusters))
	for _, cl := range clusters {
		refs = append(refs, cl.Reference())
	}
	var mos []mo.ClusterComputeResource
	if err := property.DefaultCollector(l.c.gc.Client).Retrieve(ctx, refs, []string{"name", "datastore", "resourcePool"}, &mos); err != nil {
		return nil, fmt.Errorf("reading the clusters of %s: %w", l.dcPath(), err)
	}
	sort.Slice(mos, func(i, j int) bool { return mos[i].Name < mos[j].Name })
	for _, m := range mos {
		if m.ResourcePool == nil {
			continue
		}
		for _, d := range m.Datastore {
			if d == ds.Reference() {
				return object.NewResourcePool(l.c.gc.Client, *m.ResourcePool), nil
			}
		}
	}
	return nil, fmt.Errorf("no cluster of %s sees datastore %s, where the image is imported", l.dcPath(), ds.Name())
}

// ovaSource reads an OVA sequentially: its descriptor first (an OVA
// starts with it), then each file the descriptor names as it comes.
func ovaSource(body io.Reader) (importSource, error) {
	tr := tar.NewReader(body)
	var desc []byte
	for desc == nil {
		h, err := tr.Next()
		if err == io.EOF {
			return importSource{}, errors.New("the OVA holds no .ovf descriptor")
		}
		if err != nil {
			return importSource{}, fmt.Errorf("reading the OVA: %w", err)
		}
		if !strings.HasSuffix(strings.ToLower(h.Name), ".ovf") {
			return importSource{}, fmt.Errorf("the OVA starts with %s, not its .ovf descriptor", h.Name)
		}
		if h.Size > 16<<20 {
			return importSource{}, fmt.Errorf("the OVA's descriptor %s is %d bytes, more than 16 MiB", h.Name, h.Size)
		}
		if desc, err = io.ReadAll(tr); err != nil {
			return importSource{}, fmt.Errorf("reading the OVA's descriptor: %w", err)
		}
	}
	env, err := ovf.Unmarshal(bytes.NewReader(desc))
	if err != nil {
		return importSource{}, fmt.Errorf("parsing the OVA's descriptor: %w", err)
	}
	if env.VirtualSystem == nil {
		return importSource{}, errors.New("the OVA's descriptor has no VirtualSystem (a vApp of several is not a template)")
	}
	wanted := map[string]bool{}
	for _, f := range env.References {
		if f.Compression != nil && *f.Compression != "" || f.ChunkSize != nil && *f.ChunkSize > 0 {
			return importSource{}, fmt.Errorf("the OVA's file %s is compressed or chunked, which banlieue does not import", f.Href)
		}
		wanted[f.Href] = true
	}
	return importSource{descriptor: string(desc), upload: func(put func(string, int64, io.Reader) error) error {
		for {
			h, err := tr.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				return fmt.Errorf("reading the OVA: %w", err)
			}
			name := path.Clean(h.Name)
			if !wanted[name] {
				continue // a manifest, a certificate
			}
			delete(wanted, name)
			if err := put(name, h.Size, tr); err != nil {
				return err
			}
		}
		if len(wanted) > 0 {
			var missing []string
			for n := range wanted {
				missing = append(missing, n)
			}
			sort.Strings(missing)
			return fmt.Errorf("the OVA lacks %s, which its descriptor names", strings.Join(missing, ", "))
		}
		// The rest (the tar's end blocks) is read: the checksum is checked
		// at the body's end.
		_, err := io.Copy(io.Discard, body)
		return err
	}}, nil
}

// diskFile is the one file of a generated descriptor.
const diskFile = "disk-0.vmdk"

// qcow2Source stages the qcow2 in a scratch file (it is read out of order
// to be converted: the body is read to its end, its checksum checked,
// here), then converts it while it is uploaded. close removes the file.
func qcow2Source(ctx context.Context, t providers.ImageTarget, head *bufio.Reader, body io.Reader) (importSource, error) {
	// The descriptor needs the virtual size, which the header has.
	virtual, err := qcow2VirtualSize(head)
	if err != nil {
		return importSource{}, err
	}
	f, size, err := stageQCOW2(ctx, t, body)
	if err != nil {
		return importSource{}, err
	}
	scratch := &countingReaderAt{r: f}
	return importSource{descriptor: oneDiskOVF(t.Name, virtual), done: &scratch.n, total: size, close: f.remove,
		upload: func(put func(string, int64, io.Reader) error) error {
			return pipe(func(w io.Writer) error { return images.QCOW2ToStreamOptimized(scratch, size, w) },
				func(r io.Reader) error { return put(diskFile, 0, r) })
		}}, nil
}

// qcow2VirtualSize reads the virtual size from the qcow2 header head
// starts with, reading nothing.
func qcow2VirtualSize(head *bufio.Reader) (int64, error) {
	b, err := head.Peek(images.SniffLen)
	if err != nil {
		return 0, fmt.Errorf("reading the qcow2 header: %w", err)
	}
	size, err := images.Sniff(b, v1alpha1.ImageFormatQCOW2)
	if err != nil {
		return 0, err
	}
	if size == 0 || size > 1<<50 {
		return 0, fmt.Errorf("the qcow2 header gives a virtual size of %d bytes", size)
	}
	return int64(size), nil
}

// scratchFile is a qcow2 staged in the temporary directory.
type scratchFile struct {
	*os.File
	log klog.Logger
}

// remove closes and removes the file.
func (f scratchFile) remove() {
	_ = f.Close()
	if err := os.Remove(f.Name()); err != nil && !os.IsNotExist(err) {
		f.log.Error(err, "Removing a scratch file failed", "file", f.Name())
	}
}

// stageQCOW2 copies body into a scratch file of the temporary directory
// (reported in the log), at most ScratchLimit bytes; on an error nothing
// is left, else the caller removes it.
func stageQCOW2(ctx context.Context, t providers.ImageTarget, body io.Reader) (scratchFile, int64, error) {
	if t.Size > ScratchLimit {
		return scratchFile{}, 0, fmt.Errorf("the qcow2 image is %d bytes, more than the %d a scratch file may hold", t.Size, ScratchLimit)
	}
	sweepLeftScratch(klog.FromContext(ctx))
	tmp, err := os.CreateTemp("", scratchCreatePattern(os.Getpid()))
	if err != nil {
		return scratchFile{}, 0, fmt.Errorf("creating a scratch file for the qcow2 image: %w", err)
	}
	f := scratchFile{File: tmp, log: klog.FromContext(ctx)}
	f.log.Info("Staging a qcow2 image in a scratch file to convert it", "image", t.Name, "file", f.Name())
	n, err := io.Copy(f, io.LimitReader(body, ScratchLimit+1))
	if err == nil && n > ScratchLimit {
		err = fmt.Errorf("the qcow2 image is more than the %d bytes a scratch file may hold", ScratchLimit)
	}
	if err != nil {
		f.remove()
		return scratchFile{}, 0, fmt.Errorf("staging the qcow2 image in %s: %w", f.Name(), err)
	}
	// The body was read to its end: its checksum held.
	return f, n, nil
}

// rawSource converts a raw image while it streams: no scratch.
func rawSource(t providers.ImageTarget, body io.Reader) (importSource, error) {
	return importSource{descriptor: oneDiskOVF(t.Name, t.Size), upload: func(put func(string, int64, io.Reader) error) error {
		return pipe(func(w io.Writer) error {
			vw, err := vmdk.NewStreamOptimized(w, t.Size)
			if err != nil {
				return err
			}
			if _, err := io.Copy(vw, body); err != nil {
				return err
			}
			return vw.Close()
		}, func(r io.Reader) error { return put(diskFile, 0, r) })
	}}, nil
}

// pipe runs produce, writing, and consume, reading what it writes; the
// producer's error (the body's: a checksum mismatch) comes first.
func pipe(produce func(io.Writer) error, consume func(io.Reader) error) error {
	pr, pw := io.Pipe()
	perr := make(chan error, 1)
	go func() {
		err := produce(pw)
		pw.CloseWithError(err)
		perr <- err
	}()
	cerr := consume(pr)
	// A consumer that stopped early unblocks the producer.
	pr.CloseWithError(errors.New("the upload ended"))
	if err := <-perr; err != nil {
		return err
	}
	return cerr
}

// oneDiskOVF is the descriptor of a VM named name with one disk of
// capacity bytes (rounded up to MiB) on an LSI Logic SCSI controller, one
// CPU, 1 GiB of memory and no network adapter (a machine adds those its
// class names).
func oneDiskOVF(name string, capacity int64) string {
	mib := (capacity + 1<<20 - 1) >> 20
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?>
<Envelope xmlns="http://schemas.dmtf.org/ovf/envelope/1" xmlns:ovf="http://schemas.dmtf.org/ovf/envelope/1" xmlns:rasd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_ResourceAllocationSettingData" xmlns:vssd="http://schemas.dmtf.org/wbem/wscim/1/cim-schema/2/CIM_VirtualSystemSettingData" xmlns:vmw="http://www.vmware.com/schema/ovf">
  <References>
    <File ovf:id="file1" ovf:href="%s"/>
  </References>
  <DiskSection>
    <Info>Virtual disk information</Info>
    <Disk ovf:capacity="%d" ovf:capacityAllocationUnits="byte * 2^20" ovf:diskId="vmdisk1" ovf:fileRef="file1" ovf:format="http://www.vmware.com/interfaces/specifications/vmdk.html#streamOptimized"/>
  </DiskSection>
  <VirtualSystem ovf:id="%s">
    <Info>An image imported by banlieue</Info>
    <Name>%s</Name>
    <OperatingSystemSection ovf:id="101" vmw:osType="otherLinux64Guest">
      <Info>The guest operating system</Info>
    </OperatingSystemSection>
    <VirtualHardwareSection>
      <Info>Virtual hardware requirements</Info>
      <System>
        <vssd:ElementName>Virtual Hardware Family</vssd:ElementName>
        <vssd:InstanceID>0</vssd:InstanceID>
        <vssd:VirtualSystemType>vmx-13</vssd:VirtualSystemType>
      </System>
      <Item>
        <rasd:AllocationUnits>hertz * 10^6</rasd:AllocationUnits>
        <rasd:ElementName>1 virtual CPU</rasd:ElementName>
        <rasd:InstanceID>1</rasd:InstanceID>
        <rasd:ResourceType>3</rasd:ResourceType>
        <rasd:VirtualQuantity>1</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:AllocationUnits>byte * 2^20</rasd:AllocationUnits>
        <rasd:ElementName>1024 MB of memory</rasd:ElementName>
        <rasd:InstanceID>2</rasd:InstanceID>
        <rasd:ResourceType>4</rasd:ResourceType>
        <rasd:VirtualQuantity>1024</rasd:VirtualQuantity>
      </Item>
      <Item>
        <rasd:Address>0</rasd:Address>
        <rasd:ElementName>SCSI controller 0</rasd:ElementName>
        <rasd:InstanceID>3</rasd:InstanceID>
        <rasd:ResourceSubType>lsilogic</rasd:ResourceSubType>
        <rasd:ResourceType>6</rasd:ResourceType>
      </Item>
      <Item>
        <rasd:AddressOnParent>0</rasd:AddressOnParent>
        <rasd:ElementName>Hard disk 1</rasd:ElementName>
        <rasd:HostResource>ovf:/disk/vmdisk1</rasd:HostResource>
        <rasd:InstanceID>4</rasd:InstanceID>
        <rasd:Parent>3</rasd:Parent>
        <rasd:ResourceType>17</rasd:ResourceType>
      </Item>
    </VirtualHardwareSection>
  </VirtualSystem>
</Envelope>
`, diskFile, mib, html.EscapeString(name), html.EscapeString(name))
}

// OneDiskOVF is the descriptor ImportImage generates for a qcow2 or raw
// image, for tests that build an OVA of their own.
func OneDiskOVF(name, file string, capacity int64) string {
	return strings.Replace(oneDiskOVF(name, capacity), `ovf:href="`+diskFile+`"`, `ovf:href="`+html.EscapeString(file)+`"`, 1)
}

// countingReaderAt counts the bytes read through it.
type countingReaderAt struct {
	r io.ReaderAt
	n atomic.Int64
}

func (c *countingReaderAt) ReadAt(p []byte, off int64) (int, error) {
	n, err := c.r.ReadAt(p, off)
	c.n.Add(int64(n))
	return n, err
}

// countingReader counts the bytes read through it.
type countingReader struct {
	r io.Reader
	n atomic.Int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// DeleteImportedImage destroys target's template in the location's
// datacenter, or the VM of its name an interrupted import left, and an
// installer's ISOs (installer and seed) on its datastore.
func (c *Client) DeleteImportedImage(ctx context.Context, loc failuredomain.Location, t providers.ImageTarget) error {
	l, err := c.locate(ctx, loc.Datacenter)
	if err != nil {
		return err
	}
	if err := c.deleteImportedVM(ctx, l, loc, t); err != nil {
		return err
	}
	if t.Format != v1alpha1.ImageFormatISO || t.Storage == "" {
		return nil
	}
	ds, err := l.datastore(ctx, t.Storage)
	if err != nil {
		return fmt.Errorf("datastore %s (the Provider's first storage class) in %s: %w", t.Storage, loc.Datacenter, err)
	}
	return c.deleteInstallerISOs(ctx, l, ds, t)
}

// deleteImportedVM destroys the VM or template named t.Name in l's
// datacenter, powered off first.
func (c *Client) deleteImportedVM(ctx context.Context, l *located, loc failuredomain.Location, t providers.ImageTarget) error {
	p, err := l.templatePath(t.Name)
	if err != nil {
		return err
	}
	defer c.refs.drop(refKey("template", l.dcPath(), t.Name))
	for range 3 { // ImportVApp registers the VM a moment after it starts
		vm, err := lookup(ctx, l.f, p)
		if err != nil {
			return fmt.Errorf("looking up %s in %s: %w", t.Name, loc.Datacenter, err)
		}
		if vm == nil {
			return nil
		}
		var m mo.VirtualMachine
		if err := vm.Properties(ctx, vm.Reference(), []string{"runtime.powerState"}, &m); err != nil {
			return c.refs.forgetIfGone(fmt.Errorf("reading %s: %w", t.Name, err))
		}
		if m.Runtime.PowerState == types.VirtualMachinePowerStatePoweredOn {
			if err := hardOff(ctx, vm); err != nil {
				return err
			}
		}
		task, err := vm.Destroy(ctx)
		if err == nil {
			_, err = awaitTask(ctx, task)
		}
		if err != nil && !fault.Is(err, &types.ManagedObjectNotFound{}) {
			return fmt.Errorf("destroying %s in %s: %w", t.Name, loc.Datacenter, err)
		}
	}
	return nil
}

var _ providers.ImageImporter = (*Client)(nil)
