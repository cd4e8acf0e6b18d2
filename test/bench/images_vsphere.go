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
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"

	"github.com/vmware/govmomi"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/ovf/importer"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/images/vmdk"
	"github.com/firestoned/banlieue/pkg/providers/vsphere"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// vsphereImages measures an OVA's import on vcsim (one datacenter, one
// cluster: an import is built per datacenter) against govc import.ova's
// code (govmomi's ovf/importer) reading the same URL. An OVA is what
// vSphere takes as it is: its streamOptimized disk goes through the NFC
// lease unchanged, where a raw or qcow2 image is converted on the way.
func (h *harness) vsphereImages(ctx context.Context, bc *clientset.Clientset, _ servedImage) (ImageImport, error) {
	row := ImageImport{Backend: "vsphere (vcsim)", Format: string(v1alpha1.ImageFormatOVA), MiB: h.cfg.ImageMiB, Rounds: 2,
		Import: "fetch, checksum, the OVA's descriptor to CreateImportSpec and ImportVApp, its disk POSTed from the tar as it comes " +
			"through the NFC lease, the lease completed, the VM marked a template",
		RawCopy: "govc import.ova's code (govmomi's ovf/importer) on the same URL: the descriptor read from the tar (a GET cut " +
			"short), CreateImportSpec and ImportVApp, the disk POSTed through the NFC lease from a second GET, the lease completed"}
	file, sum, err := randomOVA(h.env.Dir(), h.cfg.ImageMiB)
	if err != nil {
		return row, err
	}
	defer os.Remove(file)
	ova, stop, err := serveImage(file, sum, v1alpha1.ImageFormatOVA)
	if err != nil {
		return row, err
	}
	defer stop()
	sim, err := vcsim.Start(ctx, vcsim.Config{Datacenters: 1, Clusters: 1, Username: simUser, Password: simPassword})
	if err != nil {
		return row, err
	}
	defer sim.Close()
	if err := h.vsphereProvider(ctx, bc, "bench-vsphere-images", sim); err != nil {
		return row, err
	}
	proc, err := h.startVSphereProvider()
	if err != nil {
		return row, err
	}
	defer proc.Stop()
	if err := waitProviderReady(ctx, bc, "bench-vsphere-images"); err != nil {
		return row, err
	}
	gc, err := vcsim.Login(ctx, sim.Endpoint, simUser, simPassword)
	if err != nil {
		return row, err
	}
	defer func() { _ = gc.Logout(context.WithoutCancel(ctx)) }()
	imp, err := ovaImporter(ctx, gc, ova.url)
	if err != nil {
		return row, err
	}
	err = measureImports(&row, ova,
		func(round int) (float64, error) { return govcImport(ctx, gc, imp, round) },
		func(round int) (float64, float64, error) {
			return importOnce(ctx, bc, proc.PID(), ova.importOf("vsphere"), round)
		})
	return row, err
}

// randomOVA writes, in dir, an OVA of a one-disk descriptor (the one the
// provider generates for a raw image) and a streamOptimized VMDK of mib
// MiB of pseudo-random bytes (a fixed seed), and returns it with its
// checksum. Random bytes do not compress: the OVA is about as large as
// the disk, so both sides move that many bytes, where the marked raw
// image's zero grains would leave an OVA of a few MiB.
func randomOVA(dir string, mib int) (string, string, error) {
	disk, err := os.CreateTemp(dir, "bench-disk-*.vmdk")
	if err != nil {
		return "", "", err
	}
	defer os.Remove(disk.Name())
	defer disk.Close()
	capacity := int64(mib) << 20
	vw, err := vmdk.NewStreamOptimized(disk, capacity)
	if err != nil {
		return "", "", err
	}
	rng := rand.NewChaCha8([32]byte{})
	block := make([]byte, 1<<20)
	for range mib {
		_, _ = rng.Read(block)
		if _, err := vw.Write(block); err != nil {
			return "", "", fmt.Errorf("writing the OVA's disk: %w", err)
		}
	}
	if err := vw.Close(); err != nil {
		return "", "", fmt.Errorf("writing the OVA's disk: %w", err)
	}
	size, err := disk.Seek(0, io.SeekCurrent)
	if err != nil {
		return "", "", err
	}
	if _, err := disk.Seek(0, io.SeekStart); err != nil {
		return "", "", err
	}
	file := filepath.Join(dir, "bench-image.ova")
	f, err := os.Create(file)
	if err != nil {
		return "", "", err
	}
	defer f.Close()
	h := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(f, h))
	descriptor := []byte(vsphere.OneDiskOVF("bench-image", "bench-image-disk1.vmdk", capacity))
	if err := tw.WriteHeader(&tar.Header{Name: "bench-image.ovf", Mode: 0o644, Size: int64(len(descriptor)), Format: tar.FormatUSTAR}); err != nil {
		return "", "", err
	}
	if _, err := tw.Write(descriptor); err != nil {
		return "", "", err
	}
	if err := tw.WriteHeader(&tar.Header{Name: "bench-image-disk1.vmdk", Mode: 0o644, Size: size, Format: tar.FormatUSTAR}); err != nil {
		return "", "", err
	}
	if _, err := io.Copy(tw, disk); err != nil {
		return "", "", fmt.Errorf("writing the OVA: %w", err)
	}
	if err := tw.Close(); err != nil {
		return "", "", err
	}
	return file, "sha256:" + hex.EncodeToString(h.Sum(nil)), f.Close()
}

// ovaImporter is govc import.ova's importer of the OVA at url into the
// simulator's only datacenter: the root pool of its only cluster (where
// the provider imports too), the
// datastore the benchmark's Provider imports to, the VM folder.
func ovaImporter(ctx context.Context, gc *govmomi.Client, url string) (*importer.Importer, error) {
	f := find.NewFinder(gc.Client, false)
	dc, err := f.DefaultDatacenter(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding the datacenter: %w", err)
	}
	f.SetDatacenter(dc)
	ds, err := f.Datastore(ctx, "LocalDS_0")
	if err != nil {
		return nil, fmt.Errorf("finding the datastore: %w", err)
	}
	clusters, err := f.ClusterComputeResourceList(ctx, "*")
	if err != nil {
		return nil, fmt.Errorf("finding the cluster: %w", err)
	}
	pool, err := clusters[0].ResourcePool(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding the cluster's resource pool: %w", err)
	}
	folders, err := dc.Folders(ctx)
	if err != nil {
		return nil, fmt.Errorf("finding the VM folder: %w", err)
	}
	return &importer.Importer{Client: gc.Client, Finder: f, Datacenter: dc, Datastore: ds, ResourcePool: pool, Folder: folders.VmFolder,
		Archive: &importer.TapeArchive{Path: url, Opener: importer.Opener{Client: gc.Client}},
		Log:     func(string) (int, error) { return 0, nil }}, nil
}

// govcImport is the same bytes without banlieue: imp imports the OVA as a
// VM (thin, as the provider's), destroyed afterwards, untimed.
func govcImport(ctx context.Context, gc *govmomi.Client, imp *importer.Importer, round int) (float64, error) {
	name := fmt.Sprintf("bench-raw-%d", round)
	start := time.Now()
	// "*.ovf": the descriptor in the tar, as govc import.ova names it.
	ref, err := imp.Import(ctx, "*.ovf", importer.Options{Name: &name, DiskProvisioning: "thin"})
	if err != nil {
		return 0, fmt.Errorf("importing %s: %w", name, err)
	}
	took := time.Since(start).Seconds()
	task, err := object.NewVirtualMachine(gc.Client, *ref).Destroy(ctx)
	if err == nil {
		err = task.Wait(ctx)
	}
	if err != nil {
		return 0, fmt.Errorf("destroying %s: %w", name, err)
	}
	return took, nil
}
