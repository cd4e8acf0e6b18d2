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
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
)

// TestProviderOfTwoHosts: one libvirt Provider lists two hosts (two real
// libvirtds, each in a network namespace of its own): two failure domains,
// one named by an override; the image is checked on each host and reported
// missing on the one that lacks it; a machine in each failure domain
// becomes a domain on that host only.
func TestProviderOfTwoHosts(t *testing.T) {
	ctx := context.Background()
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	// Another host of the same site: the Provider's hosts share its
	// client certificate and CA.
	second, err := env.StartPodsLibvirtdBeside(startCtx, "second", daemon)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := second.StopAndCheck(); err != nil {
			t.Error(err)
		}
	}()
	p := libvirtProvider("two-hosts", nil)
	p.Spec.Connection.Endpoint = ""
	p.Spec.Connection.Hosts = []v1alpha1.ProviderHost{{Name: "host-a", Endpoint: daemon.Endpoint}, {Name: "host-b", Endpoint: second.Endpoint}}
	p.Spec.FailureDomainNameOverrides = []v1alpha1.FailureDomainNameOverride{{Host: "host-b", Name: "lab-b"}}
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	// Gone before its second host is: later tests' images are not
	// imported onto a host that no longer exists.
	defer func() { _ = c.Delete(context.Background(), p) }()
	p = waitProviderReady(t, "two-hosts")
	var names []string
	for _, fd := range p.Status.FailureDomains {
		names = append(names, fd.Name+"="+fd.Host)
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "lab-b=host-b,two-hosts-host-a=host-a" {
		t.Fatalf("failure domains %v", names)
	}

	// The image volume is on host-a only, then on both.
	ensureImage(t)
	img := &v1alpha1.VMImage{}
	imageStatus := func(want func(v1alpha1.ImageProviderStatus) bool) {
		t.Helper()
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKey{Name: "guest"}, img); err != nil {
				return err
			}
			for _, s := range img.Status.PerProvider {
				if s.Provider == ns+"/two-hosts" && want(s) {
					return nil
				}
			}
			return fmt.Errorf("perProvider %+v", img.Status.PerProvider)
		})
	}
	imageStatus(func(s v1alpha1.ImageProviderStatus) bool {
		return !s.Ready && s.Reason == "VolumeNotFound" && strings.Contains(s.Message, "host-b") && !strings.Contains(s.Message, "host-a")
	})
	if err := second.ImportVolume(guest, "guest.qcow2"); err != nil {
		t.Fatal(err)
	}
	imageStatus(func(s v1alpha1.ImageProviderStatus) bool { return s.Ready && strings.Contains(s.Message, "2 host(s)") })

	// One machine per failure domain, each on its own host.
	hosts := map[string]*devenv.PodsLibvirtd{"two-hosts-host-a": daemon, "lab-b": second}
	for fd := range hosts {
		m := &infrav1.LibvirtMachine{
			ObjectMeta: metav1.ObjectMeta{Name: "on-" + fd, Namespace: ns, Annotations: map[string]string{infrav1.ProviderAnnotation: ns + "/two-hosts"}},
			Spec: infrav1.LibvirtMachineSpec{Image: image, Disks: []infrav1.LibvirtDisk{{Name: "root", SizeGiB: 1}},
				CommonMachineSpec: infrav1.CommonMachineSpec{FailureDomain: fd, CPUs: 1, MemoryMiB: 128, PowerState: infrav1.PowerStatePoweredOn}},
		}
		if err := c.Create(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	for fd, d := range hosts {
		name := providers.BackendName(ns, "on-"+fd)
		eventually(t, 2*time.Minute, func() error {
			l, err := d.Connect()
			if err != nil {
				return err
			}
			defer func() { _ = l.Disconnect() }()
			if _, err := l.DomainLookupByName(name); err != nil {
				return fmt.Errorf("no domain %s on the host of %s: %v", name, fd, err)
			}
			return nil
		})
		for other, od := range hosts {
			if other == fd {
				continue
			}
			l, err := od.Connect()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := l.DomainLookupByName(name); err == nil {
				t.Errorf("domain %s is on the host of %s too", name, other)
			}
			_ = l.Disconnect()
		}
	}
	// Built, a machine stays where it is (issue 31: a failureDomain edited
	// before the delete sent it to the other host, which had no such
	// domain; the finalizer went and the domain kept running).
	built := &infrav1.LibvirtMachine{}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "on-two-hosts-host-a"}, built); err != nil {
			return err
		}
		if built.Spec.ProviderID == "" {
			return fmt.Errorf("on-two-hosts-host-a has no providerID yet")
		}
		return nil
	})
	// A merge patch, without the resourceVersion: the provider may write
	// the machine meanwhile, and the answer must be the CRD's rule.
	patch := client.MergeFrom(built.DeepCopy())
	built.Spec.FailureDomain = "lab-b"
	if err := c.Patch(ctx, built, patch); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("moving a built machine to lab-b: %v, want Invalid: immutable", err)
	}
	for fd := range hosts {
		if err := c.Delete(ctx, &infrav1.LibvirtMachine{ObjectMeta: metav1.ObjectMeta{Name: "on-" + fd, Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	for fd := range hosts {
		eventually(t, 2*time.Minute, func() error {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "on-" + fd}, &infrav1.LibvirtMachine{})
			if !apierrors.IsNotFound(err) {
				return fmt.Errorf("on-%s still there (%v)", fd, err)
			}
			return nil
		})
	}
	// And its delete left no domain on either host.
	for fd, d := range hosts {
		l, err := d.Connect()
		if err != nil {
			t.Fatal(err)
		}
		for other := range hosts {
			if _, err := l.DomainLookupByName(providers.BackendName(ns, "on-"+other)); err == nil {
				t.Errorf("domain of on-%s left on the host of %s", other, fd)
			}
		}
		_ = l.Disconnect()
	}
}
