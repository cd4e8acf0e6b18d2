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
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/metricstest"
)

// TestProviderMetrics scrapes the leading provider pod's authenticated
// metrics endpoint (the shipped Deployment's metrics port, at the pod's
// address) with a token bound to the shipped banlieue-metrics-reader,
// once it has built a VM: its backend calls are timed by operation (an
// EnsureMachine and an Inventory at least), an image imported by URL
// counted (its bytes, its attempts by result), its session to the
// simulator is open and was logged in, a Ready Provider exports status
// True with its reason, an unready one False with the reason its
// condition has, and a deleted Provider's series go.
func TestProviderMetrics(t *testing.T) {
	ctx := context.Background()
	token := scraperToken(t)
	// The leader serves the Providers, so its series are theirs; asked
	// at each scrape, as a crash elsewhere may have moved the Lease.
	scrape := func() (metricstest.Families, error) {
		url, err := leaderMetricsURL(ctx, "proxmox")
		if err != nil {
			return nil, err
		}
		return metricstest.Scrape(url, token)
	}

	if err := c.Create(ctx, proxmoxProvider(t, "metrics-pve", "proxmox-token", map[string]string{"metrics": "yes"})); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "metrics-pve"}})
	})
	waitProvider(t, "metrics-pve", "InventoryWalked")
	// Unready: its Secret does not exist (named in the credentials Role,
	// so it reads as missing).
	unready := proxmoxProvider(t, "metrics-unready", "proxmox-token", nil)
	unready.Spec.Connection.CredentialsRef.Name = "metrics-absent"
	if err := env.GrantCredentials(ctx, "proxmox", "secrets", "metrics-absent"); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, unready); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), unready) })

	ensureImage(t)
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: "pve-metrics"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 512, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 10, StorageClass: "gold"}}}}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), class) })
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "metrics-0", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "pve-metrics"}, ImageRef: v1alpha1.LocalObjectReference{Name: "debian-12"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"metrics": "yes"}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(vm.Status.Conditions, "Ready") {
			return fmt.Errorf("VM not Ready: %+v", vm.Status.Conditions)
		}
		return nil
	})
	unreadyReason := ""
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(unready), unready); err != nil {
			return err
		}
		cond := meta.FindStatusCondition(unready.Status.Conditions, v1alpha1.ProviderReady)
		if cond == nil || cond.Status != metav1.ConditionFalse {
			return fmt.Errorf("metrics-unready Ready %+v, want False", cond)
		}
		unreadyReason = cond.Reason
		return nil
	})

	// An image imported by URL on each of the Provider's nodes.
	base, sum := imageServer(t)
	guest, err := os.Stat(filepath.Join(root, "bin", "guest", "guest.qcow2"))
	if err != nil {
		t.Fatal(err)
	}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: "pve-metrics-imported"}, Spec: v1alpha1.VMImageSpec{
		OSFamily: "linux", Import: &v1alpha1.ImageImport{URL: base + "/guest.qcow2", Checksum: sum, Format: v1alpha1.ImageFormatQCOW2,
			ProviderClasses: []string{"proxmox"}}}}
	if err := c.Create(ctx, img); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), img) })
	eventually(t, 3*time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		if !meta.IsStatusConditionTrue(img.Status.Conditions, "Ready") {
			return fmt.Errorf("image not Ready: %+v", img.Status.Conditions)
		}
		return nil
	})

	ready, notReady := ns+"/metrics-pve", ns+"/metrics-unready"
	var mfs metricstest.Families
	// The series follow the status writes; read until they show them.
	eventually(t, time.Minute, func() error {
		if mfs, err = scrape(); err != nil {
			return err
		}
		for _, c := range []struct {
			name   string
			labels map[string]string
			ok     func(float64) bool
			want   string
		}{
			{"banlieue_provider_backend_call_duration_seconds", map[string]string{"backend": "proxmox", "operation": "EnsureMachine"}, atLeast(1), ">= 1 call"},
			{"banlieue_provider_backend_call_duration_seconds", map[string]string{"backend": "proxmox", "operation": "Inventory"}, atLeast(1), ">= 1 call"},
			{"banlieue_provider_backend_call_duration_seconds", map[string]string{"backend": "proxmox", "operation": "ImageExists"}, atLeast(1), ">= 1 call"},
			{"banlieue_provider_backend_call_duration_seconds", map[string]string{"backend": "proxmox", "operation": "ImportImage"}, atLeast(1), ">= 1 call"},
			{"banlieue_provider_image_import_duration_seconds", map[string]string{"backend": "proxmox", "result": "success"}, atLeast(1), ">= 1 import"},
			// Each node's import reads the whole image.
			{"banlieue_provider_image_import_bytes_total", map[string]string{"backend": "proxmox"}, atLeast(float64(guest.Size())), fmt.Sprintf(">= %d bytes", guest.Size())},
			{"banlieue_provider_sessions", map[string]string{"backend": "proxmox"}, atLeast(1), ">= 1"},
			{"banlieue_provider_session_logins_total", map[string]string{"backend": "proxmox", "result": "success"}, atLeast(1), ">= 1"},
			{"banlieue_provider_ready", map[string]string{"provider": ready, "status": "True"}, equal(1), "1"},
			{"banlieue_provider_ready", map[string]string{"provider": ready, "status": "False"}, equal(0), "0"},
			{"banlieue_provider_ready_reason", map[string]string{"provider": ready, "reason": "InventoryWalked"}, equal(1), "1"},
			{"banlieue_provider_ready", map[string]string{"provider": notReady, "status": "False"}, equal(1), "1"},
			{"banlieue_provider_ready", map[string]string{"provider": notReady, "status": "True"}, equal(0), "0"},
			{"banlieue_provider_ready_reason", map[string]string{"provider": notReady, "reason": unreadyReason}, equal(1), "1"},
		} {
			v, found := mfs.Value(c.name, c.labels)
			if !found {
				return fmt.Errorf("no %s%v", c.name, c.labels)
			}
			if !c.ok(v) {
				return fmt.Errorf("%s%v = %v, want %s", c.name, c.labels, v, c.want)
			}
		}
		return nil
	})
	ensures, _ := mfs.Value("banlieue_provider_backend_call_duration_seconds", map[string]string{"backend": "proxmox", "operation": "EnsureMachine"})
	sessions, _ := mfs.Value("banlieue_provider_sessions", map[string]string{"backend": "proxmox"})
	t.Logf("scraped: %v EnsureMachine calls timed, %v sessions open, %s Ready, %s unready (%s)", ensures, sessions, ready, notReady, unreadyReason)
	// One reason per Provider; the histogram's sum is plausible (a clone
	// awaited on the simulator takes some time, and less than its deadline).
	if n := mfs.Count("banlieue_provider_ready_reason", map[string]string{"provider": ready}); n != 1 {
		t.Errorf("%d reason series for %s, want 1", n, ready)
	}
	if h := mfs.Histogram("banlieue_provider_backend_call_duration_seconds", map[string]string{"backend": "proxmox", "operation": "EnsureMachine"}); h == nil ||
		h.GetSampleSum() <= 0 || h.GetSampleSum() > 15*60*float64(h.GetSampleCount()) {
		t.Errorf("EnsureMachine durations %v: not plausible", h)
	}

	// The unready Provider goes: its series with it.
	if err := c.Delete(ctx, unready); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if mfs, err = scrape(); err != nil {
			return err
		}
		if n := mfs.Count("banlieue_provider_ready", map[string]string{"provider": notReady}) +
			mfs.Count("banlieue_provider_ready_reason", map[string]string{"provider": notReady}); n != 0 {
			return fmt.Errorf("%d series of the deleted %s", n, notReady)
		}
		return nil
	})
	if v, _ := mfs.Value("banlieue_provider_ready", map[string]string{"provider": ready, "status": "True"}); v != 1 {
		t.Errorf("%s's series went with another Provider's", ready)
	}
}

// leaderMetricsURL is the metrics endpoint of class's leading provider
// pod: its address, the port its container names metrics.
func leaderMetricsURL(ctx context.Context, class string) (string, error) {
	pod, err := env.ProviderLeader(ctx, class)
	if err != nil {
		return "", err
	}
	if pod.Status.PodIP == "" {
		return "", fmt.Errorf("pod %s has no IP", pod.Name)
	}
	for _, p := range pod.Spec.Containers[0].Ports {
		if p.Name == "metrics" {
			return "https://" + net.JoinHostPort(pod.Status.PodIP, strconv.Itoa(int(p.ContainerPort))) + "/metrics", nil
		}
	}
	return "", fmt.Errorf("pod %s names no metrics port", pod.Name)
}

// scraperToken is a token of a ServiceAccount bound to the shipped
// banlieue-metrics-reader, as a Prometheus in the cluster has.
func scraperToken(t *testing.T) string {
	t.Helper()
	token, remove, err := env.MetricsReaderToken(ns, "metrics-scraper")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return token
}

func atLeast(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
func equal(n float64) func(float64) bool   { return func(v float64) bool { return v == n } }
