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
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/vim25/types"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
	"github.com/firestoned/banlieue/pkg/images/imagetest"
)

// newClusterFolder creates, under datacenter dc's host folder, a folder
// holding a new compute cluster named cluster: a new failure domain of
// every Provider of this vCenter. With host, the cluster gets a host
// that mounts a datastore named datastore (the directory dir):
// what an import into a new datacenter needs. vcsim cannot destroy a
// cluster, but destroying its folder takes it out of the inventory;
// the returned folder is what the test destroys.
func newClusterFolder(t *testing.T, dc *object.Datacenter, cluster string, host bool, datastore, dir string) *object.Folder {
	t.Helper()
	ctx := context.Background()
	folders, err := dc.Folders(ctx)
	if err != nil {
		t.Fatal(err)
	}
	folder, err := folders.HostFolder.CreateFolder(ctx, cluster+"-folder")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := folder.CreateCluster(ctx, cluster, types.ClusterConfigSpecEx{})
	if err != nil {
		t.Fatal(err)
	}
	if !host {
		return folder
	}
	task, err := cl.AddHost(ctx, types.HostConnectSpec{HostName: cluster + "_H0", Force: true}, true, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	info, err := task.WaitForResult(ctx, nil)
	if err != nil {
		t.Fatalf("adding a host to %s: %v", cluster, err)
	}
	h := object.NewHostSystem(cl.Client(), info.Result.(types.ManagedObjectReference))
	dss, err := h.ConfigManager().DatastoreSystem(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dss.CreateLocalDatastore(ctx, datastore, dir); err != nil {
		t.Fatalf("datastore %s on %s: %v", datastore, cluster, err)
	}
	return folder
}

// destroy runs an object's Destroy task to its end.
func destroy(t *testing.T, what string, o interface {
	Destroy(context.Context) (*object.Task, error)
}) {
	t.Helper()
	task, err := o.Destroy(context.Background())
	if err == nil {
		err = task.Wait(context.Background())
	}
	if err != nil {
		t.Errorf("destroying %s: %v", what, err)
	}
}

// TestVSphereImageReachesNewFailureDomain (issue 33: "A new failure
// domain appearing on a Provider gets the image too"): an image imported
// and Ready in a Provider's six failure domains (one template in each of
// DC0 and DC1); then the vCenter administrator adds a cluster to DC0 and
// a new datacenter DC2 with a cluster, a host and the Provider's image
// datastore. The Provider's inventory walk publishes both as failure
// domains, and with no change to the VMImage or the Provider's spec:
//   - DC2's failure domain gets the image imported: Ready with the
//     artifact as its ref, and DC2 holds exactly one template of it;
//   - DC0's new cluster shares DC0's template (vSphere keeps imported
//     images per datacenter): Ready with the same ref, nothing imported;
//   - nothing is imported again where it was: DC0 and DC1 each still hold
//     exactly one template, the very one they held before (same managed
//     object reference), and no VM.
func TestVSphereImageReachesNewFailureDomain(t *testing.T) {
	ctx := context.Background()
	root, _ := filepath.Abs(filepath.Join("..", "..", ".."))
	guest := filepath.Join(root, "bin", "guest", "guest.qcow2")
	srv := imagetest.Serve(t, map[string]string{"/guest.qcow2": guest})
	secret(t, ns, "newfd-vsphere-creds", map[string]string{"username": user, "password": password})
	p := provider("newfd-vsphere", "newfd-vsphere-creds", func(s *v1alpha1.ProviderSpec) {
		s.Capabilities = v1alpha1.ProviderCapabilities{
			StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Datastore: "LocalDS_0"}}},
			NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{PortGroup: "VM Network"}}},
		}
	})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitReady(t, p.Name, "InventoryWalked")
	if len(p.Status.FailureDomains) != 6 {
		t.Fatalf("failure domains %+v: want vcsim's 6", p.Status.FailureDomains)
	}
	key := ns + "/" + p.Name

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "newfd-guest"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: podURL(t, srv.URL("/guest.qcow2")), Checksum: imagetest.Checksum(t, guest),
			Format: v1alpha1.ImageFormatQCOW2}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	var dc2 *object.Datacenter
	var folders []*object.Folder
	// Made before the cleanup below is registered, so that they are
	// undone after it: the session it destroys DC2 with, and DC2's
	// datastore directory, which vcsim still writes to while the image's
	// template there is removed.
	gc := vcLogin(t)
	dsDir := t.TempDir()
	// Cleanup runs last-registered first: this one, registered before
	// the inventory changes, runs after the image is gone (its templates
	// removed by the provider, DC2's too) and takes the new failure
	// domains out again, for the tests after this one count six.
	t.Cleanup(func() {
		_ = c.Delete(ctx, img)
		eventually(t, 2*time.Minute, func() error {
			err := c.Get(ctx, client.ObjectKeyFromObject(img), &v1alpha1.VMImage{})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return fmt.Errorf("VMImage %s still there (%v)", img.Name, err)
		})
		_ = c.Delete(ctx, p)
		for _, f := range folders {
			destroy(t, f.InventoryPath, f)
		}
		if dc2 != nil {
			destroy(t, "DC2", dc2)
		}
		eventually(t, time.Minute, func() error {
			list := &v1alpha1.ProviderList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			for _, other := range list.Items {
				for _, fd := range other.Status.FailureDomains {
					if fd.Datacenter == "DC2" || fd.Cluster == "DC0_C3" {
						return fmt.Errorf("Provider %s still publishes %s", other.Name, fd.Name)
					}
				}
			}
			return nil
		})
	})

	// Ready in the six failure domains, one template per datacenter.
	name := ""
	ready := func(want int) error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		name = images.ArtifactName(img.UID, img.Status.Revision)
		var fds []v1alpha1.ImageFailureDomainStatus
		for _, ps := range img.Status.PerProvider {
			if ps.Provider == key {
				fds = ps.FailureDomains
			}
		}
		if len(fds) != want {
			return fmt.Errorf("%d failure domains reported, want %d: %+v", len(fds), want, fds)
		}
		for _, fd := range fds {
			if fd.Phase != v1alpha1.ImagePhaseReady || fd.Ref != name || fd.Revision != img.Status.Revision {
				return fmt.Errorf("failure domain %+v; want Ready with ref %s at revision %s", fd, name, img.Status.Revision)
			}
		}
		return nil
	}
	eventually(t, 3*time.Minute, func() error { return ready(6) })
	before := map[string][]string{}
	for _, dc := range []string{"DC0", "DC1"} {
		refs, vms := templateRefs(t, dc, name)
		if len(refs) != 1 || vms != 0 {
			t.Fatalf("%s holds templates %v and %d VMs named %s; want exactly one template", dc, refs, vms, name)
		}
		before[dc] = refs
	}

	// The administrator's change, in vCenter only: a cluster in DC0, and
	// a datacenter DC2 whose cluster's host mounts a datastore of the
	// name the Provider's storage class targets.
	f := find.NewFinder(gc.Client, false)
	dc0, err := f.Datacenter(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	folders = append(folders, newClusterFolder(t, dc0, "DC0_C3", false, "", ""))
	dc2, err = object.NewRootFolder(gc.Client).CreateDatacenter(ctx, "DC2")
	if err != nil {
		t.Fatal(err)
	}
	folders = append(folders, newClusterFolder(t, dc2, "DC2_C0", true, "LocalDS_0", dsDir))

	// The Provider publishes both (its inventory walk every resync), and
	// the image becomes Ready in all eight failure domains.
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		var got []string
		for _, fd := range p.Status.FailureDomains {
			got = append(got, fd.Datacenter+"/"+fd.Cluster)
		}
		if !slices.Contains(got, "DC0/DC0_C3") || !slices.Contains(got, "DC2/DC2_C0") {
			return fmt.Errorf("the Provider publishes %v; want DC0/DC0_C3 and DC2/DC2_C0 among them", got)
		}
		return nil
	})
	start := time.Now()
	eventually(t, 3*time.Minute, func() error { return ready(8) })
	t.Logf("Ready in the new failure domains %s after the Provider published them", time.Since(start).Round(time.Millisecond))
	for _, fd := range p.Status.FailureDomains {
		if fd.Datacenter != "DC2" && fd.Cluster != "DC0_C3" {
			continue
		}
		found := false
		for _, ps := range img.Status.PerProvider {
			for _, s := range ps.FailureDomains {
				found = found || (ps.Provider == key && s.Name == fd.Name && s.Phase == v1alpha1.ImagePhaseReady && s.Ref == name)
			}
		}
		if !found {
			t.Errorf("new failure domain %s (%s/%s) is not Ready with ref %s: %+v", fd.Name, fd.Datacenter, fd.Cluster, name, img.Status.PerProvider)
		}
	}

	// On the backend: imported once in DC2; DC0 and DC1 untouched.
	if refs, vms := templateRefs(t, "DC2", name); len(refs) != 1 || vms != 0 {
		t.Errorf("DC2 holds templates %v and %d VMs named %s; want exactly one template", refs, vms, name)
	}
	for _, dc := range []string{"DC0", "DC1"} {
		if refs, vms := templateRefs(t, dc, name); !slices.Equal(refs, before[dc]) || vms != 0 {
			t.Errorf("%s holds templates %v and %d VMs named %s; want only the template it held before, %v", dc, refs, vms, name, before[dc])
		}
	}
}
