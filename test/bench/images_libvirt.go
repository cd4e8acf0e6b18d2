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
	"net/http"
	"os"
	"path/filepath"
	"time"

	"libvirt.org/go/libvirtxml"

	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// libvirtImages measures the raw image's import on a private libvirtd
// against the benchmark uploading it into a volume itself.
func (h *harness) libvirtImages(ctx context.Context, bc *clientset.Clientset, raw servedImage) (ImageImport, error) {
	row := ImageImport{Backend: "libvirt", Format: string(raw.format), MiB: h.cfg.ImageMiB, Rounds: 2,
		Import:  "fetch, checksum, upload into a volume through libvirt's stream API",
		RawCopy: "the benchmark's GET of the same URL streamed into a new volume through libvirt's stream API (virsh vol-upload's path)"}
	if m := libvirtd.Missing(); m != "" {
		row.Skipped = "libvirtd cannot run here: needs " + m
		return row, nil
	}
	root, err := filepath.Abs(filepath.Join(h.cfg.Bin, ".."))
	if err != nil {
		return row, err
	}
	log, err := os.Create(filepath.Join(h.env.Logs(), "libvirtd.log"))
	if err != nil {
		return row, err
	}
	defer log.Close()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, err := libvirtd.Start(startCtx, filepath.Join(h.env.Dir(), "libvirtd"), filepath.Join(root, "bin", ".libvirt-cache"), log)
	if err != nil {
		return row, err
	}
	defer d.Stop()
	if err := h.libvirtObjects(ctx, bc, d); err != nil {
		return row, err
	}
	proc, err := h.env.StartProvider("libvirt", "provider-libvirt", time.Minute, "--domain-type=qemu")
	if err != nil {
		return row, err
	}
	// Stopped before the next backend: it would only wait for a
	// libvirtd that is gone.
	defer proc.Stop()
	// Timed from a Ready Provider: its first connection is not the import's.
	if err := waitProviderReady(ctx, bc, "bench-libvirt"); err != nil {
		return row, err
	}
	err = measureImports(&row, raw,
		func(round int) (float64, error) { return rawUpload(d, raw, round) },
		func(round int) (float64, float64, error) {
			return importOnce(ctx, bc, proc.PID(), raw.importOf("libvirt"), round)
		})
	return row, err
}

// rawUpload is the same bytes without banlieue: an HTTP GET of img
// streamed into a new raw volume through libvirt's stream API (what virsh
// vol-upload does with a file), the volume removed afterwards.
func rawUpload(d *libvirtd.Daemon, img servedImage, round int) (float64, error) {
	l, pool, disconnect, err := imagePool(d)
	if err != nil {
		return 0, err
	}
	defer disconnect()
	doc, err := (&libvirtxml.StorageVolume{Name: fmt.Sprintf("bench-raw-%d.raw", round),
		Capacity: &libvirtxml.StorageVolumeSize{Unit: "bytes", Value: uint64(img.size)},
		Target:   &libvirtxml.StorageVolumeTarget{Format: &libvirtxml.StorageVolumeTargetFormat{Type: "raw"}}}).Marshal()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	resp, err := http.Get(img.url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	vol, err := l.StorageVolCreateXML(pool, doc, 0)
	if err != nil {
		return 0, err
	}
	defer func() { _ = l.StorageVolDelete(vol, 0) }()
	if err := l.StorageVolUpload(vol, resp.Body, 0, 0, 0); err != nil {
		return 0, err
	}
	return time.Since(start).Seconds(), nil
}
