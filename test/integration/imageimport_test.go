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

package integration

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestImageImportAdmission: the API server refuses, by field, an import
// the backends of its listed classes cannot build (asked of the backend
// registry the scheduler asks too), and names the revision of one it
// stores, with a Ready condition a client can wait on.
func TestImageImportAdmission(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	api := s.Client.BanlieueV1alpha1().VMImages()
	img := func(name string, format v1alpha1.ImageFormat, classes ...string) *v1alpha1.VMImage {
		return &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.VMImageSpec{Import: &v1alpha1.ImageImport{
			URL: "https://mirror.example/image", Checksum: "sha256:" + strings.Repeat("ab", 32), Format: format, ProviderClasses: classes}}}
	}
	_, err := api.Create(ctx, img("ova-on-libvirt", v1alpha1.ImageFormatOVA, "vsphere", "libvirt"), metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.import.format") || !strings.Contains(err.Error(), "provider class libvirt") {
		t.Errorf("an ova for libvirt: %v, want Invalid on spec.import.format naming provider class libvirt", err)
	}
	got, err := api.Create(ctx, img("qcow2-everywhere", v1alpha1.ImageFormatQCOW2, "vsphere", "libvirt", "proxmox"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.Revision) != 10 || len(got.Status.Conditions) != 1 || got.Status.Conditions[0].Type != v1alpha1.ImageReady ||
		got.Status.Conditions[0].Status != metav1.ConditionFalse {
		t.Errorf("stored status %+v: want a revision and Ready False", got.Status)
	}
}
