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

package proxmox

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images"
)

// TestMigrationTakesCurrentImageRevision: a VM keeps the image revision
// it was built from while the image moves on (the old template stays on
// its node only), and a migration, which recreates it, builds it from
// the image's current revision, where the placement found it ready;
// after the cutover nothing names the old revision and its last
// template goes. Counted on the simulator's templates.
func TestMigrationTakesCurrentImageRevision(t *testing.T) {
	ctx := context.Background()
	base, sum := imageServer(t)
	p := proxmoxProvider(t, "revmig-proxmox", "revmig-token", map[string]string{"role": "revmig"})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = waitProvider(t, p.Name, "InventoryWalked")
	key := ns + "/" + p.Name

	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pve-revmig-guest"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: sum, Format: v1alpha1.ImageFormatQCOW2,
			ProviderClasses: []string{"proxmox"}}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	first := readyAtNewRevision(t, img, key, "")

	vm := readyVMOf(t, "pve-revmig-vm", "pve-revmig-small", 2, img.Name, "revmig", "192.0.2.63")
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if vm.Status.ImageRevision != first {
		t.Fatalf("VM status.imageRevision %q, want the image's %q", vm.Status.ImageRevision, first)
	}
	source := vm.Status.InfrastructureRef.Name
	pm := &infrav1.ProxmoxMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: source}, pm); err != nil {
		t.Fatal(err)
	}
	node := pm.Status.Node
	oldName := images.ArtifactName(img.UID, first)

	// The same bytes from another URL: a new revision, built everywhere;
	// the old one stays only on the VM's node.
	patch := client.MergeFrom(img.DeepCopy())
	img.Spec.Import.URL = base + "/guest.qcow2?mirror=2"
	if err := c.Patch(ctx, img, patch); err != nil {
		t.Fatal(err)
	}
	second := readyAtNewRevision(t, img, key, first)
	eventually(t, 2*time.Minute, func() error {
		templates, _ := imported(oldName)
		if len(templates) != 1 || templates[node] != 1 {
			return fmt.Errorf("templates of the old revision %v, want one, on the VM's node %s", templates, node)
		}
		return nil
	})
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	if vm.Status.ImageRevision != first {
		t.Errorf("VM status.imageRevision %q after the image moved on, want the pinned %q", vm.Status.ImageRevision, first)
	}

	// Asked to move: the new machine is cloned from the current revision.
	patch = client.MergeFrom(vm.DeepCopy())
	metav1.SetMetaDataAnnotation(&vm.ObjectMeta, "banlieue.io/migrate", "true")
	if err := c.Patch(ctx, vm, patch); err != nil {
		t.Fatal(err)
	}
	target := &infrav1.ProxmoxMachine{}
	name := targetMachine(t, vm, target)
	if want := images.ArtifactName(img.UID, second); target.Spec.Template != want {
		t.Errorf("migration target %s spec.template %q, want the current revision's %s", name, target.Spec.Template, want)
	}
	if vm.Status.Migration.ImageRevision != second {
		t.Errorf("status.migration.imageRevision %q, want %q", vm.Status.Migration.ImageRevision, second)
	}
	waitVM(t, vm, "migrated", 3*time.Minute, readyOn(p.Name))
	if vm.Status.ImageRevision != second {
		t.Errorf("VM status.imageRevision %q after the migration, want %q", vm.Status.ImageRevision, second)
	}
	if vm.Status.InfrastructureRef.Name != name {
		t.Errorf("VM runs on %s after the migration, want %s", vm.Status.InfrastructureRef.Name, name)
	}
	gone(t, source, &infrav1.ProxmoxMachine{})
	eventually(t, 2*time.Minute, func() error {
		if templates, _ := imported(oldName); len(templates) > 0 {
			return fmt.Errorf("templates of the old revision %v left, which nothing uses", templates)
		}
		return nil
	})
}

// readyAtNewRevision waits until img has a revision other than previous
// and is Ready at it in every failure domain of Provider key, and returns
// the revision.
func readyAtNewRevision(t *testing.T, img *v1alpha1.VMImage, key, previous string) string {
	t.Helper()
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		rev := img.Status.Revision
		if rev == "" || rev == previous {
			return fmt.Errorf("revision %q, want a new one", rev)
		}
		fds := importedOn(img, key)
		if len(fds) == 0 {
			return fmt.Errorf("no failure domain reports")
		}
		for _, fd := range fds {
			if fd.Phase != v1alpha1.ImagePhaseReady || fd.Revision != rev {
				return fmt.Errorf("failure domain %+v, want Ready at %s", fd, rev)
			}
		}
		return nil
	})
	return img.Status.Revision
}
