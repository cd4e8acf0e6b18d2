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

package dev

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// The local libvirt host's objects: a Provider of the private libvirtd, an
// image of the test guest and a small class, and one VM on them.
const (
	libvirtProvider = "lab-libvirt"
	libvirtImage    = "banlieue-guest"
	libvirtClass    = "lab-small"
	libvirtVM       = "lab-vm-01"
)

// startLibvirt starts a private libvirtd (in namespaces of its own, its
// state under dir), serves the guest image from loopback for the provider
// to import, and creates or updates the local libvirt Provider, image,
// class and VM. Pods reach the daemon over TLS (devenv.StartPodsLibvirtd,
// its credentials by the names the shipped Role grants), a process on its
// unix socket. It returns the daemon and what stops it, or nil and why
// this machine cannot run one.
func startLibvirt(ctx context.Context, env *devenv.Env, comps *components, dir, guestImage string) (*libvirtd.Daemon, func(), string, error) {
	if m := libvirtd.Missing(); m != "" {
		return nil, nil, "needs " + m + "; as root: make libvirt", nil
	}
	if _, err := os.Stat(guestImage); err != nil {
		return nil, nil, "no guest image at " + guestImage + " (make run builds it: hack/build-guest-image.sh)", nil
	}
	startCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	d, conn, err := startDaemon(startCtx, env, comps, dir)
	if err != nil {
		return nil, nil, "", err
	}
	source, err := serveImage(ctx, guestImage, comps)
	if err == nil {
		err = applyLibvirtObjects(ctx, env, conn, source)
	}
	if err != nil {
		d.stop()
		return nil, nil, "", err
	}
	return d.daemon, d.stop, "", nil
}

// localLibvirtd is the daemon and what stops it.
type localLibvirtd struct {
	daemon *libvirtd.Daemon
	stop   func()
}

// startDaemon starts the libvirtd comps reach and returns the connection
// its Provider names.
func startDaemon(ctx context.Context, env *devenv.Env, comps *components, dir string) (localLibvirtd, v1alpha1.ProviderConnection, error) {
	if !comps.pods {
		log, err := os.OpenFile(filepath.Join(env.Logs(), "libvirtd.log"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
		if err != nil {
			return localLibvirtd{}, v1alpha1.ProviderConnection{}, err
		}
		d, err := libvirtd.Start(ctx, filepath.Join(dir, "libvirtd"), filepath.Join(dir, "libvirt-cache"), log)
		if err != nil {
			_ = log.Close()
			return localLibvirtd{}, v1alpha1.ProviderConnection{}, err
		}
		return localLibvirtd{d, func() { d.Stop(); _ = log.Close() }}, v1alpha1.ProviderConnection{Endpoint: d.URI}, nil
	}
	d, err := env.StartPodsLibvirtd(ctx, "lab")
	if err != nil {
		return localLibvirtd{}, v1alpha1.ProviderConnection{}, err
	}
	stop := func() { _ = d.StopAndCheck() }
	// The names the shipped provider Role grants (artifacts/deploy/providers/libvirt/rbac.yaml).
	secret, ca := d.Credentials(devenv.Namespace, "libvirt-creds", "libvirt-ca")
	c, err := adminClient(env)
	if err != nil {
		stop()
		return localLibvirtd{}, v1alpha1.ProviderConnection{}, err
	}
	// This start's certificates replace the last start's.
	s, cm := &corev1.Secret{ObjectMeta: secret.ObjectMeta}, &corev1.ConfigMap{ObjectMeta: ca.ObjectMeta}
	for _, o := range []struct {
		obj    client.Object
		mutate controllerutil.MutateFn
	}{
		{s, func() error { s.Type, s.Data = secret.Type, secret.Data; return nil }},
		{cm, func() error { cm.Data = ca.Data; return nil }},
	} {
		if _, err := controllerutil.CreateOrUpdate(ctx, c, o.obj, o.mutate); err != nil {
			stop()
			return localLibvirtd{}, v1alpha1.ProviderConnection{}, fmt.Errorf("applying %s: %w", o.obj.GetName(), err)
		}
	}
	return localLibvirtd{d.Daemon, stop}, v1alpha1.ProviderConnection{Endpoint: d.Endpoint,
		CredentialsRef: v1alpha1.LocalObjectReference{Name: secret.Name},
		CABundle:       &v1alpha1.CABundleSource{ConfigMapRef: &v1alpha1.KeySelector{Name: ca.Name}}}, nil
}

func applyLibvirtObjects(ctx context.Context, env *devenv.Env, conn v1alpha1.ProviderConnection, source *v1alpha1.ImageImport) error {
	c, err := adminClient(env)
	if err != nil {
		return err
	}
	p := &v1alpha1.Provider{ObjectMeta: metav1.ObjectMeta{Name: libvirtProvider, Namespace: devenv.Namespace}}
	img := &v1alpha1.VMImage{ObjectMeta: metav1.ObjectMeta{Name: libvirtImage}}
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: libvirtClass}}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: libvirtVM, Namespace: devenv.Namespace}}
	for _, o := range []struct {
		obj    client.Object
		mutate func()
	}{
		{p, func() {
			p.Labels = map[string]string{"env": "lab", "backend": "libvirt"}
			p.Spec.ProviderClassRef.Name = "libvirt"
			p.Spec.Connection = conn
			p.Spec.Capabilities = v1alpha1.ProviderCapabilities{
				StorageClasses: []v1alpha1.StorageClassCapability{{Name: "gold", Target: v1alpha1.StorageTarget{Pool: libvirtd.Pool}}},
				NetworkClasses: []v1alpha1.NetworkClassCapability{{Name: "prod", Target: v1alpha1.NetworkTarget{Network: libvirtd.Network}}},
			}
		}},
		{img, func() {
			img.Spec.OSFamily, img.Spec.GuestAgent = "linux", "cloud-init"
			// Imported by the provider from the loopback URL, as a
			// newcomer's own images would be from a mirror.
			img.Spec.Sources, img.Spec.Import = nil, source
		}},
		{class, func() {
			class.Spec.Hardware = v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256,
				Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold", Provisioning: "thin"}}}
			class.Spec.Network = &v1alpha1.VMClassNetwork{Interfaces: []v1alpha1.NetworkInterfaceSpec{{Name: "eth0", NetworkClass: "prod"}}}
			class.Spec.Firmware = "bios"
		}},
		{vm, func() {
			vm.Spec.ClassRef.Name, vm.Spec.ImageRef.Name = libvirtClass, libvirtImage
			// On this host: lab-proxmox is labelled env: lab too, and
			// the imported image reaches it as well.
			vm.Spec.Placement = &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"backend": "libvirt"}}}
			if vm.Spec.DesiredPowerState == "" {
				vm.Spec.DesiredPowerState = v1alpha1.PowerStatePoweredOn
			}
		}},
	} {
		if _, err := controllerutil.CreateOrUpdate(ctx, c, o.obj, func() error { o.mutate(); return nil }); err != nil {
			return fmt.Errorf("applying %T %s: %w", o.obj, o.obj.GetName(), err)
		}
	}
	return nil
}

// serveImage serves file from a loopback HTTP server until ctx ends, and
// is the VMImage import of it, at the URL comps reach it at.
func serveImage(ctx context.Context, file string, comps *components) (*v1alpha1.ImageImport, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	h := sha256.New()
	_, err = io.Copy(h, f)
	_ = f.Close()
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	name := "/" + filepath.Base(file)
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != name {
			http.NotFound(w, r)
			return
		}
		http.ServeFile(w, r, file)
	})}
	go func() { _ = srv.Serve(l) }()
	context.AfterFunc(ctx, func() { _ = srv.Close() })
	url, err := comps.reach("http://" + l.Addr().String() + name)
	if err != nil {
		_ = srv.Close()
		return nil, err
	}
	return &v1alpha1.ImageImport{URL: url, Checksum: "sha256:" + hex.EncodeToString(h.Sum(nil)),
		Format: v1alpha1.ImageFormatQCOW2}, nil
}

const libvirtMessage = `
A private libvirtd (in its own network namespace; QEMU guests under software
emulation) serves the Provider %s; VM %s boots the repo's test guest there,
which the provider imports first from a loopback URL (VMImage %s):

  %s get vmimage %s -w     # the import's progress, then Ready
  %s get provider,vm,libvirtmachine -n banlieue-system
  %s wait -n banlieue-system --for=condition=Ready vm/%s --timeout=2m
  cat %s       # the guest's serial console
`
