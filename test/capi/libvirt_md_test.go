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

package capi

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// TestMachineDeploymentOnTwoLibvirtHosts: a MachineDeployment of two
// replicas, its LibvirtMachineTemplate naming no failure domain, against a
// LibvirtCluster selecting one libvirt Provider of two hosts (two real
// libvirtds, each in a network namespace of its own, reached over
// qemu+tls:// with one client certificate, as the hosts of one site):
// banlieue's controller gives each LibvirtMachine a failure domain of its
// own, the provider (the shipped Deployment's pods) builds each guest on
// that host alone, each guest boots under TCG and runs Cluster API's bootstrap data
// (its serial console shows it), and each Machine reaches Provisioned with
// libvirt://<its domain's UUID> as providerID. Scaled to zero, the
// deployment leaves no domain on either host. The test writes no status:
// the Provider's, the LibvirtCluster's and the machines' are the
// provider's and the controller's, the Machines' Cluster API's.
func TestMachineDeploymentOnTwoLibvirtHosts(t *testing.T) {
	ctx := context.Background()
	site := startLibvirtds(t, "capi-md-host-a", "capi-md-host-b")
	hosts := map[string]*libvirtd.Daemon{"host-a": site[0].Daemon, "host-b": site[1].Daemon}
	p := &v1alpha1.Provider{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-libvirt-md", Namespace: devenv.Namespace, Labels: map[string]string{"capi": "libvirt-md"}},
		Spec: v1alpha1.ProviderSpec{Connection: v1alpha1.ProviderConnection{Hosts: []v1alpha1.ProviderHost{
			{Name: "host-a", Endpoint: site[0].Endpoint}, {Name: "host-b", Endpoint: site[1].Endpoint}}}},
	}
	startLibvirtProvider(t, ctx, p, site[0])
	// The libvirtd of each failure domain.
	daemons := map[string]*libvirtd.Daemon{}
	for _, fd := range p.Status.FailureDomains {
		if d, ok := hosts[fd.Host]; ok {
			daemons[fd.Name] = d
		}
	}
	if len(daemons) != 2 || len(p.Status.FailureDomains) != 2 {
		t.Fatalf("want a failure domain per host, the Provider publishes %+v", p.Status.FailureDomains)
	}

	ns := newNamespace(t, "capi-libvirt-md")
	bindUserData(t, ctx, ns, "libvirt")
	// banlieue's controller aggregates the Provider's failure domains into
	// the LibvirtCluster's status and spreads the deployment's machines.
	createInfraCluster(t, ctx, &infrav1.LibvirtCluster{ObjectMeta: metav1.ObjectMeta{Name: "md", Namespace: ns},
		Spec: infrav1.LibvirtClusterSpec{CommonClusterSpec: infrav1.CommonClusterSpec{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"capi": "libvirt-md"}}}}},
		"LibvirtCluster", failureDomainNames(p))
	// Each guest prints the marker and its own host name, so each serial
	// console proves that guest ran this run's bootstrap data.
	marker := fmt.Sprintf("capi-md-bootstrap-%d", time.Now().UnixNano())
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "workers-bootstrap", Namespace: ns},
		Data: map[string][]byte{"value": []byte("#!/bin/sh\necho " + marker + " $(hostname)\n")}}); err != nil {
		t.Fatal(err)
	}
	tmpl := &infrav1.LibvirtMachineTemplate{ObjectMeta: metav1.ObjectMeta{Name: "workers", Namespace: ns},
		Spec: infrav1.LibvirtMachineTemplateSpec{Template: infrav1.LibvirtMachineTemplateResource{Spec: guestMachineSpec()}}}
	if err := c.Create(ctx, tmpl); err != nil {
		t.Fatal(err)
	}
	md := newMachineDeployment(ns, "workers", "md", "LibvirtMachineTemplate", "workers-bootstrap", 2)
	if err := c.Create(ctx, md); err != nil {
		t.Fatal(err)
	}

	// Both Machines Provisioned, each LibvirtMachine in a failure domain
	// of its own (two TCG guests share the machine's cores: minutes).
	built := map[string]infrav1.LibvirtMachine{} // by failure domain
	machineOf := map[string]clusterv1.Machine{}  // by LibvirtMachine name
	eventually(t, 10*time.Minute, func() error {
		var machines clusterv1.MachineList
		if err := c.List(ctx, &machines, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(machines.Items) != 2 {
			return fmt.Errorf("%d Machines; %s", len(machines.Items), describeMD(ctx, ns, md.Name))
		}
		clear(built)
		clear(machineOf)
		for _, m := range machines.Items {
			if m.Status.Phase != string(clusterv1.MachinePhaseProvisioned) || m.Spec.ProviderID == "" {
				return fmt.Errorf("Machine %s: phase %q, providerID %q; %s", m.Name, m.Status.Phase, m.Spec.ProviderID, describeMD(ctx, ns, md.Name))
			}
			lm := infrav1.LibvirtMachine{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: m.Spec.InfrastructureRef.Name}, &lm); err != nil {
				return err
			}
			if _, ok := daemons[lm.Spec.FailureDomain]; !ok {
				return fmt.Errorf("%s: failure domain %q", lm.Name, lm.Spec.FailureDomain)
			}
			if other, taken := built[lm.Spec.FailureDomain]; taken {
				t.Fatalf("%s and %s share failure domain %s", other.Name, lm.Name, lm.Spec.FailureDomain)
			}
			built[lm.Spec.FailureDomain] = lm
			machineOf[lm.Name] = m
		}
		return nil
	})

	for fd, lm := range built {
		m := machineOf[lm.Name]
		if lm.Spec.CPUs != 1 || lm.Spec.Image != guestImage || !ownedByMachine(lm.OwnerReferences, m.Name) {
			t.Errorf("%s: not cloned from the template for Machine %s: spec %+v, owners %+v", lm.Name, m.Name, lm.Spec, lm.OwnerReferences)
		}
		if m.Spec.ProviderID != "libvirt://"+string(lm.UID) {
			t.Errorf("Machine %s providerID %q, LibvirtMachine UID %s", m.Name, m.Spec.ProviderID, lm.UID)
		}
		// The domain is on its failure domain's host, with the
		// providerID's UUID, and on no other host.
		name := providers.BackendName(ns, lm.Name)
		for other, d := range daemons {
			id, found := domainUUID(t, d, name)
			switch {
			case other == fd && !found:
				t.Errorf("no domain %s on the host of %s", name, fd)
			case other == fd && "libvirt://"+id != m.Spec.ProviderID:
				t.Errorf("domain %s has UUID %s, Machine %s providerID %q", name, id, m.Name, m.Spec.ProviderID)
			case other != fd && found:
				t.Errorf("domain %s of failure domain %s is on the host of %s too", name, fd, other)
			}
		}
		line := "BANLIEUE-USERDATA " + marker + " " + providers.HostName(lm.Name)
		waitSerial(t, daemons[fd], name, line)
		t.Logf("Machine %s: LibvirtMachine %s in %s (host %s), providerID %s; serial console: %q", m.Name, lm.Name, fd, hostOf(p, fd), m.Spec.ProviderID, line)
	}

	// Scaled to zero, Cluster API deletes the Machines, which delete their
	// LibvirtMachines, whose provider destroys the domains first.
	patch := client.MergeFrom(md.DeepCopy())
	md.Spec.Replicas = ptr.To[int32](0)
	if err := c.Patch(ctx, md, patch); err != nil {
		t.Fatal(err)
	}
	eventually(t, 5*time.Minute, func() error {
		var machines clusterv1.MachineList
		if err := c.List(ctx, &machines, client.InNamespace(ns)); err != nil {
			return err
		}
		var lms infrav1.LibvirtMachineList
		if err := c.List(ctx, &lms, client.InNamespace(ns)); err != nil {
			return err
		}
		if len(machines.Items)+len(lms.Items) != 0 {
			return fmt.Errorf("%d Machines and %d LibvirtMachines left; %s", len(machines.Items), len(lms.Items), describeMD(ctx, ns, md.Name))
		}
		for _, lm := range built {
			for fd, d := range daemons {
				if _, found := domainUUID(t, d, providers.BackendName(ns, lm.Name)); found {
					return fmt.Errorf("the host of %s still has the domain of %s", fd, lm.Name)
				}
			}
		}
		return nil
	})

	// The Provider, no longer used, goes (the provider lifts its
	// protection), and the provider's pods, which serve the next tests,
	// serve it no more.
	if err := c.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), p); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Provider still there (%v)", err)
		}
		return nil
	})
}

// domainUUID is the UUID of the domain named name on d (running or not),
// and whether d has it.
func domainUUID(t *testing.T, d *libvirtd.Daemon, name string) (string, bool) {
	t.Helper()
	l, err := d.Connect()
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Disconnect() }()
	doms, _, err := l.ConnectListAllDomains(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, dom := range doms {
		if dom.Name == name {
			u := dom.UUID
			return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), true
		}
	}
	return "", false
}

// hostOf is the host of p's failure domain fd.
func hostOf(p *v1alpha1.Provider, fd string) string {
	for _, d := range p.Status.FailureDomains {
		if d.Name == fd {
			return d.Host
		}
	}
	return ""
}
