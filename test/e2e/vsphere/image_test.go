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
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/vmware/govmomi"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// markTemplate turns the first VM of datacenter dc into a template named name.
// vcLogin is a session of the test's own on vcsim, logged out when the
// test ends.
func vcLogin(t *testing.T) *govmomi.Client {
	t.Helper()
	gc, err := vcsim.Login(context.Background(), vcURL, user, password)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = gc.Logout(context.Background()) })
	return gc
}

// servingProvider makes a Ready Provider of the shared namespace named
// name, with its own credentials Secret, serving the seed template (marked
// a template in DC0 and published by a VMImage).
func servingProvider(t *testing.T, name string, mutate func(*v1alpha1.ProviderSpec)) {
	t.Helper()
	markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
	ensureImage(t, "ubuntu-22.04-cloudinit")
	secret(t, ns, name+"-creds", map[string]string{"username": user, "password": password})
	if err := c.Create(context.Background(), provider(name, name+"-creds", mutate)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, name, "InventoryWalked")
}

func markTemplate(t *testing.T, dc, name string) {
	t.Helper()
	ctx := context.Background()
	gc := vcLogin(t)
	if _, err := vcsim.MarkTemplate(ctx, gc.Client, dc, name); err != nil {
		t.Fatal(err)
	}
}

func waitImage(t *testing.T, image, provider string, want func(v1alpha1.ImageProviderStatus) bool) v1alpha1.ImageProviderStatus {
	t.Helper()
	var last v1alpha1.ImageProviderStatus
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		img := &v1alpha1.VMImage{}
		if err := c.Get(ctx, client.ObjectKey{Name: image}, img); err != nil {
			return false, nil
		}
		for _, s := range img.Status.PerProvider {
			if s.Provider == ns+"/"+provider {
				last = s
				return want(s), nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("VMImage %s on %s: %+v", image, provider, last)
	}
	return last
}

// TestImageChecks runs first (go test runs files in name order, and
// image_test.go sorts first): it watches the template appear, so no other
// test may have marked it yet.
func TestImageChecks(t *testing.T) {
	ctx := context.Background()
	secret(t, ns, "image-creds", map[string]string{"username": user, "password": password})
	if err := c.Create(ctx, provider("image-vsphere", "image-creds", nil)); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "image-vsphere", "InventoryWalked")
	img := &v1alpha1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "ubuntu-22.04-cloudinit"},
		Spec: v1alpha1.VMImageSpec{OSFamily: "linux", Sources: []v1alpha1.ImageSource{
			{ProviderClass: "vsphere", Kind: "Template", Ref: "ubuntu-22.04-cloudinit"},
		}},
	}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	noSource := &v1alpha1.VMImage{
		ObjectMeta: metav1.ObjectMeta{Name: "proxmox-only"},
		Spec:       v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "proxmox", Kind: "Template", Ref: "9000"}}},
	}
	if err := c.Create(ctx, noSource); err != nil {
		t.Fatal(err)
	}

	s := waitImage(t, "ubuntu-22.04-cloudinit", "image-vsphere", func(s v1alpha1.ImageProviderStatus) bool { return s.Reason == "TemplateNotFound" })
	if !strings.Contains(s.Message, "DC0, DC1") {
		t.Errorf("message %q does not name both datacenters", s.Message)
	}
	waitImage(t, "proxmox-only", "image-vsphere", func(s v1alpha1.ImageProviderStatus) bool { return s.Reason == "NoVSphereSource" && !s.Ready })

	// In one datacenter only: still not found, naming the other.
	markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
	s = waitImage(t, "ubuntu-22.04-cloudinit", "image-vsphere", func(s v1alpha1.ImageProviderStatus) bool {
		return s.Reason == "TemplateNotFound" && strings.Contains(s.Message, "DC1") && !strings.Contains(s.Message, "DC0")
	})
	markTemplate(t, "DC1", "ubuntu-22.04-cloudinit")
	waitImage(t, "ubuntu-22.04-cloudinit", "image-vsphere", func(s v1alpha1.ImageProviderStatus) bool { return s.Ready && s.Reason == "" })

	// A Provider that cannot log in reports ConnectFailed for its images.
	secret(t, ns, "image-bad-creds", map[string]string{"username": user, "password": "nope"})
	if err := c.Create(ctx, provider("image-broken", "image-bad-creds", nil)); err != nil {
		t.Fatal(err)
	}
	// Neither Provider outlives the test: an image imported by a later
	// test is Ready only once every Provider that reports has it.
	t.Cleanup(func() {
		for _, name := range []string{"image-vsphere", "image-broken"} {
			_ = c.Delete(context.Background(), &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}})
		}
	})
	waitImage(t, "ubuntu-22.04-cloudinit", "image-broken", func(s v1alpha1.ImageProviderStatus) bool { return s.Reason == "ConnectFailed" })

	// Logged in, but vCenter fails the template lookup: LookupFailed, with
	// vCenter's message; it heals when vCenter does.
	lookupFault.Store(true)
	defer lookupFault.Store(false)
	s = waitImage(t, "ubuntu-22.04-cloudinit", "image-vsphere", func(s v1alpha1.ImageProviderStatus) bool { return s.Reason == "LookupFailed" })
	if s.Ready || !strings.Contains(s.Message, "injected lookup failure") {
		t.Errorf("LookupFailed entry %+v", s)
	}
	lookupFault.Store(false)
	waitImage(t, "ubuntu-22.04-cloudinit", "image-vsphere", func(s v1alpha1.ImageProviderStatus) bool { return s.Ready })
}
