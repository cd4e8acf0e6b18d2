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
	"time"

	proxmox "github.com/luthermonson/go-proxmox"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/dev"
	"github.com/firestoned/banlieue/pkg/devenv"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
)

// pveTaskPoll is how often both sides read a task's status: the
// provider's --task-poll default, given to it explicitly so that the raw
// copy waits for its upload task as the import waits for its.
const pveTaskPoll = 500 * time.Millisecond

// proxmoxImages measures the raw image's import on pvesim (one node, as
// the development simulator's: 8.4, import content on local, the token
// holding the documented grants only; an import is built per node)
// against the benchmark uploading it to the same storage itself.
func (h *harness) proxmoxImages(ctx context.Context, bc *clientset.Clientset, raw servedImage) (ImageImport, error) {
	row := ImageImport{Backend: "proxmox (pvesim)", Format: string(raw.format), MiB: h.cfg.ImageMiB, Rounds: 2,
		Import: "fetch, checksum, multipart POST to the node's storage upload (content import), its task waited for; a VM created " +
			"importing its disk, made a template, the upload deleted (pvesim copies no disk on import-from)",
		RawCopy: "the benchmark's GET of the same URL streamed as the same multipart POST to the same storage's upload endpoint " +
			"(go-proxmox's UploadReader, as the provider), its task waited for"}
	node := dev.ProxmoxNodes()[0]
	sim := pvesim.New(pvesim.Options{ACL: dev.ProxmoxACL(), Version: dev.ProxmoxVersion, Nodes: []pvesim.NodeSpec{node}})
	defer sim.Close()
	if err := h.proxmoxProvider(ctx, bc, "bench-proxmox", sim); err != nil {
		return row, err
	}
	proc, err := h.env.StartProvider("proxmox", "provider-proxmox", time.Minute, "--task-poll="+pveTaskPoll.String())
	if err != nil {
		return row, err
	}
	defer proc.Stop()
	if err := waitProviderReady(ctx, bc, "bench-proxmox"); err != nil {
		return row, err
	}
	api := proxmox.NewClient(sim.URL, proxmox.WithHTTPClient(sim.Client()), proxmox.WithAPIToken(sim.TokenID, sim.Secret))
	err = measureImports(&row, raw,
		func(round int) (float64, error) { return pveUpload(ctx, api, node.Name, "local", raw, round) },
		func(round int) (float64, float64, error) {
			return importOnce(ctx, bc, proc.PID(), raw.importOf("proxmox"), round)
		})
	return row, err
}

// proxmoxProvider registers sim as the Provider name, its token in a
// Secret the provider may read.
func (h *harness) proxmoxProvider(ctx context.Context, bc clientset.Interface, name string, sim *pvesim.Simulator) error {
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: devenv.Namespace},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "proxmox"},
			Connection: v1alpha1.ProviderConnection{Endpoint: sim.URL, CredentialsRef: v1alpha1.LocalObjectReference{Name: name + "-token"},
				CABundle: &v1alpha1.CABundleSource{Inline: string(sim.CA)}},
			Capabilities: v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Storage: "local-lvm"}}},
			},
		},
	}
	return h.createProvider(ctx, bc, p, map[string]string{"tokenID": sim.TokenID, "tokenSecret": sim.Secret})
}

// pveUpload is the same bytes without banlieue: an HTTP GET of img
// streamed as a multipart upload of import content to store on node, its
// imgcopy task waited for; the volume is deleted afterwards, untimed.
func pveUpload(ctx context.Context, api *proxmox.Client, node, store string, img servedImage, round int) (float64, error) {
	file := fmt.Sprintf("bench-raw-%d.%s", round, img.format)
	start := time.Now()
	resp, err := http.Get(img.url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var upid proxmox.UPID
	if err := api.UploadReader(fmt.Sprintf("/nodes/%s/storage/%s/upload", node, store), map[string]string{"content": "import"},
		file, resp.Body, resp.ContentLength, &upid); err != nil {
		return 0, fmt.Errorf("uploading %s: %w", file, err)
	}
	if err := proxmox.NewTask(upid, api).Wait(ctx, pveTaskPoll, 10*time.Minute); err != nil {
		return 0, fmt.Errorf("uploading %s: %w", file, err)
	}
	took := time.Since(start).Seconds()
	var del proxmox.UPID
	volid := store + ":import/" + file
	if err := api.Delete(ctx, fmt.Sprintf("/nodes/%s/storage/%s/content/%s", node, store, volid), &del); err != nil {
		return 0, fmt.Errorf("deleting %s: %w", volid, err)
	}
	if del != "" {
		if err := proxmox.NewTask(del, api).Wait(ctx, pveTaskPoll, time.Minute); err != nil {
			return 0, fmt.Errorf("deleting %s: %w", volid, err)
		}
	}
	return took, nil
}
