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
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestReasons: what a libvirt user gets wrong is named, with the same
// reasons as on vSphere: a missing or incomplete credentials Secret, an
// unreachable host, an image volume that is not there, a VM no Provider
// matches, a vTPM class on a Provider without vtpm.
func TestReasons(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name, endpoint, secret string
		data                   map[string]string
		reason, message        string
	}{
		{"no-secret", "qemu+tls://127.0.0.1/system", "absent", nil, "SecretMissing", "does not exist"},
		{"bad-secret", "qemu+tls://127.0.0.1/system", "half", map[string]string{"tls.crt": "x"}, "SecretInvalid", "tls.key"},
		{"no-socket", "qemu+unix:///system?socket=/nonexistent/libvirt-sock", "", nil, "ConnectFailed", "/nonexistent/libvirt-sock"},
	} {
		if tc.data != nil {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tc.secret, Namespace: ns}, StringData: tc.data}
			if err := c.Create(ctx, s); err != nil {
				t.Fatal(err)
			}
		}
		if tc.secret != "" {
			// Named in the credentials Role by the administrator, so that
			// a missing Secret reads as missing, not forbidden.
			if err := env.GrantCredentials(ctx, "libvirt", "secrets", tc.secret); err != nil {
				t.Fatal(err)
			}
		}
		p := libvirtProvider("reason-"+tc.name, nil)
		p.Spec.Connection = v1alpha1.ProviderConnection{Endpoint: tc.endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: tc.secret}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(p.Status.Conditions, v1alpha1.ProviderReady)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != tc.reason || !strings.Contains(cond.Message, tc.message) {
				return fmt.Errorf("%s: Ready %+v, want False/%s mentioning %q", tc.name, cond, tc.reason, tc.message)
			}
			return nil
		})
		if err := c.Delete(ctx, p); err != nil {
			t.Fatal(err)
		}
	}

	// An image whose volume is not on the host.
	if err := c.Create(ctx, libvirtProvider("reason-images", map[string]string{"reasons": "yes"})); err != nil {
		t.Fatal(err)
	}
	waitProviderReady(t, "reason-images")
	missing := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "not-on-the-host"},
		Spec: v1alpha1.VMImageSpec{Sources: []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: "Volume", Ref: "default/absent.qcow2"}}}}
	if err := c.Create(ctx, missing); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(missing), missing); err != nil {
			return err
		}
		for _, s := range missing.Status.PerProvider {
			if s.Provider == ns+"/reason-images" && !s.Ready && s.Reason == "VolumeNotFound" && strings.Contains(s.Message, "default/absent.qcow2") {
				return nil
			}
		}
		return fmt.Errorf("perProvider %+v, want VolumeNotFound on reason-images", missing.Status.PerProvider)
	})

	// Scheduling: nothing matches; a vTPM class where no Provider has vtpm
	// (with an image each clone installs itself, as a vTPM needs), and with
	// an image installed once into its template (it cannot serve the class).
	ensureImage(t)
	deferred := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "guest-deferred"}, Spec: v1alpha1.VMImageSpec{
		Sources:  []v1alpha1.ImageSource{{ProviderClass: "libvirt", Kind: "Volume", Ref: image}},
		Template: &v1alpha1.ImageTemplate{Firmware: "efi", InstallMode: v1alpha1.InstallModeDeferred}}}
	if err := c.Create(ctx, deferred); err != nil {
		t.Fatal(err)
	}
	tpm := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "lab-tpm"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 128, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Firmware: "efi", TPMEnabled: true}}
	small := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "lab-tiny"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 128, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}}}}
	for _, cl := range []*v1alpha1.VMClass{tpm, small} {
		if err := c.Create(ctx, cl); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		vm, class, image string
		selector         map[string]string
		reason           string
	}{
		{"nowhere", "lab-tiny", "guest", map[string]string{"reasons": "no-such"}, "NoProviderMatched"},
		{"needs-tpm", "lab-tpm", "guest-deferred", map[string]string{"reasons": "yes"}, "TpmUnsupported"},
		{"tpm-on-installed", "lab-tpm", "guest", map[string]string{"reasons": "yes"}, "ImageClassMismatch"},
	} {
		vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: tc.vm, Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: tc.class}, ImageRef: v1alpha1.LocalObjectReference{Name: tc.image},
			Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: tc.selector}}}}
		if err := c.Create(ctx, vm); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error {
			if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
				return err
			}
			cond := meta.FindStatusCondition(vm.Status.Conditions, v1alpha1.VirtualMachineScheduled)
			if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason != tc.reason {
				return fmt.Errorf("%s: Scheduled %+v, want False/%s", tc.vm, cond, tc.reason)
			}
			return nil
		})
		if vm.Status.InfrastructureRef != nil {
			t.Errorf("%s: an infrastructure object was made: %+v", tc.vm, vm.Status.InfrastructureRef)
		}
	}
}
