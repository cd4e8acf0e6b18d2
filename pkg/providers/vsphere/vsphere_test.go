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
	"crypto/tls"
	"encoding/pem"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/vmware/govmomi/find"
	"github.com/vmware/govmomi/object"
	"github.com/vmware/govmomi/simulator"
	"github.com/vmware/govmomi/vim25/methods"
	"github.com/vmware/govmomi/vim25/types"
	"k8s.io/utils/ptr"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
	vsim "github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// vcsim starts govmomi's vCenter simulator with 2 datacenters x 3 clusters
// and enforced credentials.
func vcsim(t *testing.T) (*simulator.Server, providers.Connection) {
	t.Helper()
	model := simulator.VPX()
	model.Datacenter, model.Cluster = 2, 3
	return vcsimModel(t, model)
}

// connected starts vcsim and logs in to it; the session ends with the test.
func connected(t *testing.T) *Client {
	t.Helper()
	_, conn := vcsim(t)
	c, err := Connect(context.Background(), conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Logout(context.Background()) })
	return c
}

// vcsimModel serves model with TLS and enforced credentials.
func vcsimModel(t *testing.T, model *simulator.Model) (*simulator.Server, providers.Connection) {
	t.Helper()
	if err := model.Create(); err != nil {
		t.Fatal(err)
	}
	// vcsim ignores a clone's relocate disk backing; the repo's simulator
	// package makes it honour it, as vCenter does.
	vsim.HonourCloneDiskBacking(model)
	model.Service.Listen = &url.URL{User: url.UserPassword("administrator@vsphere.local", "s3cret")}
	model.Service.TLS = new(tls.Config)
	s := model.Service.NewServer()
	t.Cleanup(func() { s.Close(); model.Remove() })
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw})
	return s, providers.Connection{
		Endpoint:           "https://" + s.URL.Host + "/sdk",
		CABundle:           caPEM,
		Credentials:        providers.Credentials{Username: "administrator@vsphere.local", Password: "s3cret"},
		CredentialsVersion: "1",
	}
}

func TestConnect(t *testing.T) {
	ctx := context.Background()
	_, conn := vcsim(t)

	c, err := Connect(ctx, conn)
	if err != nil {
		t.Fatalf("with the CA bundle: %v", err)
	}
	defer c.Logout(ctx)

	bad := conn
	bad.Credentials.Password = "wrong"
	if _, err := Connect(ctx, bad); !errors.Is(err, providers.ErrConnect) {
		t.Errorf("wrong password: err = %v, want ErrConnect", err)
	}
	untrusted := conn
	untrusted.CABundle = nil
	if _, err := Connect(ctx, untrusted); !errors.Is(err, providers.ErrConnect) {
		t.Errorf("unverified certificate: err = %v, want ErrConnect", err)
	}
	untrusted.InsecureSkipTLSVerify = true
	if c, err := Connect(ctx, untrusted); err != nil {
		t.Errorf("insecureSkipTLSVerify: %v", err)
	} else {
		c.Logout(ctx)
	}
	nowhere := conn
	nowhere.Endpoint = "https://127.0.0.1:1/sdk"
	if _, err := Connect(ctx, nowhere); !errors.Is(err, providers.ErrConnect) {
		t.Errorf("closed port: err = %v, want ErrConnect", err)
	}
}

func TestInventoryAndTemplates(t *testing.T) {
	ctx := context.Background()
	c := connected(t)

	pairs, err := c.Inventory(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(pairs) != 6 || pairs[0].Datacenter != "DC0" || pairs[0].Cluster != "DC0_C0" || pairs[5].Datacenter != "DC1" {
		t.Errorf("inventory %+v", pairs)
	}

	tmpl := template(t, c, "DC0")
	// Any other VM of DC0 is not a template.
	finder := find.NewFinder(c.gc.Client, false)
	vms, err := finder.VirtualMachineList(ctx, "/DC0/vm/*")
	if err != nil || len(vms) < 2 {
		t.Fatalf("VMs: %v", err)
	}
	other := vms[0].Name()
	if other == tmpl {
		other = vms[1].Name()
	}
	for _, tc := range []struct {
		dc, name string
		want     bool
	}{{"DC0", tmpl, true}, {"DC1", tmpl, false}, {"DC0", "no-such-template", false}, {"DC0", other, false}} {
		got, err := c.TemplateExists(ctx, tc.dc, tc.name)
		if err != nil || got != tc.want {
			t.Errorf("TemplateExists(%s, %s) = %v, %v; want %v", tc.dc, tc.name, got, err, tc.want)
		}
	}
	if _, err := c.TemplateExists(ctx, "DC9", tmpl); err == nil {
		t.Error("a missing datacenter is not an error")
	}
}

func TestSessionCache(t *testing.T) {
	ctx := context.Background()
	_, conn := vcsim(t)
	s := NewSessions()
	a, err := s.Get(ctx, "ns/p", conn)
	if err != nil {
		t.Fatal(err)
	}
	b, err := s.Get(ctx, "ns/p", conn)
	if err != nil || a != b {
		t.Fatalf("second Get made a new session (%v)", err)
	}
	// A new Secret version replaces the session and logs the old one out.
	conn.CredentialsVersion = "2"
	c, err := s.Get(ctx, "ns/p", conn)
	if err != nil || c == a {
		t.Fatalf("new credentials reused the session (%v)", err)
	}
	s.Wait() // the old session is logged out in the background
	if a.alive(ctx) {
		t.Error("the replaced session is still logged in")
	}
	// A session that died is replaced.
	if err := c.Logout(ctx); err != nil {
		t.Fatal(err)
	}
	d, err := s.Get(ctx, "ns/p", conn)
	if err != nil || d == c || !d.alive(ctx) {
		t.Errorf("dead session reused (%v)", err)
	}
	// A session vCenter ended is trusted until a call is refused, then
	// replaced.
	admin, err := Connect(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Logout(ctx)
	us, err := d.gc.SessionManager.UserSession(ctx)
	if err != nil || us == nil {
		t.Fatalf("reading the session: %v", err)
	}
	if err := admin.gc.SessionManager.TerminateSession(ctx, []string{us.Key}); err != nil {
		t.Fatal(err)
	}
	if _, err := d.TemplateExists(ctx, "DC0", "anything"); err == nil {
		t.Fatal("a call on an ended session succeeded")
	}
	e, err := s.Get(ctx, "ns/p", conn)
	if err != nil || e == d || !e.alive(ctx) {
		t.Errorf("a session vCenter ended was reused (%v)", err)
	}
	s.Forget("ns/p")
	s.Wait()
	if e.alive(ctx) {
		t.Error("Forget did not log out")
	}
}

func TestBackendRequestsCounted(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	retrieve := providers.BackendRequests.WithLabelValues("vsphere", "RetrievePropertiesEx")
	before := testutil.ToFloat64(retrieve)
	if _, err := c.TemplateExists(ctx, "DC0", "anything"); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(retrieve) - before; got < 1 {
		t.Errorf("RetrievePropertiesEx counted %v times for a template lookup, want at least 1", got)
	}
	// The tests' sum of every method counts what is added, once.
	sum := totalCalls(t)
	providers.BackendRequests.WithLabelValues("vsphere", "Crafted").Add(3)
	if got := totalCalls(t) - sum; got != 3 {
		t.Errorf("totalCalls grew by %v after 3 crafted calls", got)
	}
	if m := method(&methods.RetrievePropertiesExBody{}); m != "RetrievePropertiesEx" {
		t.Errorf("method named %q", m)
	}
}

// TestTemplateByPath (issue 31): an image's template is the one at its
// path under the failure domain's datacenter VM folder, and must be a
// template. A plain VM named exactly like the template elsewhere in the
// datacenter (a tenant's VM "<namespace>.<name>" can be, "ubuntu-22" +
// "04-cloudinit") is never taken for it, a VM at the template's path is
// refused, naming spec.template, and so is a path that leaves the folder.
func TestTemplateByPath(t *testing.T) {
	ctx := context.Background()
	c := connected(t)
	tmpl := template(t, c, "DC0")
	finder := find.NewFinder(c.gc.Client, false)
	vms, err := finder.VirtualMachineList(ctx, "/DC0/vm/*")
	if err != nil || len(vms) < 3 {
		t.Fatalf("VMs of DC0: %d, %v", len(vms), err)
	}
	real, err := finder.VirtualMachine(ctx, "/DC0/vm/"+tmpl)
	if err != nil {
		t.Fatal(err)
	}
	var plain []*object.VirtualMachine
	for _, vm := range vms {
		if vm.Reference() != real.Reference() {
			plain = append(plain, vm)
		}
	}
	// The decoy: a plain VM of a tenant's folder, named like the template.
	root, err := finder.Folder(ctx, "/DC0/vm")
	if err != nil {
		t.Fatal(err)
	}
	tenant, err := root.CreateFolder(ctx, "tenant")
	if err != nil {
		t.Fatal(err)
	}
	decoy := plain[0]
	if task, err := tenant.MoveInto(ctx, []types.ManagedObjectReference{decoy.Reference()}); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("moving the decoy: %v", err)
	}
	if task, err := decoy.Rename(ctx, tmpl); err != nil || task.Wait(ctx) != nil {
		t.Fatalf("renaming the decoy: %v", err)
	}

	l, err := c.locate(ctx, "DC0")
	if err != nil {
		t.Fatal(err)
	}
	got, err := l.template(ctx, tmpl)
	if err != nil || got.Reference() != real.Reference() {
		t.Fatalf("template %s = %v (%v), want the template %v, not the decoy %v", tmpl, got, err, real.Reference(), decoy.Reference())
	}
	if ok, err := c.TemplateExists(ctx, "DC0", tmpl); !ok || err != nil {
		t.Errorf("TemplateExists(DC0, %s) = %v, %v beside a decoy", tmpl, ok, err)
	}
	spec := providers.MachineSpec{Name: "ubuntu-22.04-clone", InstanceUUID: "7a1c2d3e-4f5a-4b6c-8d7e-1f2a3b4c5d6e",
		Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 1, MemoryMiB: 512, PowerState: infrav1.PowerStatePoweredOff}
	if _, err := c.EnsureMachine(ctx, spec, (&recorder{}).record); err != nil {
		t.Fatalf("cloning %s beside a decoy: %v", tmpl, err)
	}

	// A VM, not a template, at the path; and paths out of the VM folder.
	vmAtPath := plain[1].Name()
	for _, ref := range []string{vmAtPath, "tenant/" + tmpl, "/DC1/vm/" + tmpl, "../vm/" + tmpl, "tenant/*"} {
		bad := spec
		bad.Name, bad.InstanceUUID, bad.Image = "ns.bad", "8b1c2d3e-4f5a-4b6c-8d7e-1f2a3b4c5d6e", ref
		_, err := c.EnsureMachine(ctx, bad, (&recorder{}).record)
		if err == nil || !strings.Contains(err.Error(), "spec.template") {
			t.Errorf("cloning %q: %v, want a refusal naming spec.template", ref, err)
		}
		if ok, _ := c.TemplateExists(ctx, "DC0", ref); ok {
			t.Errorf("TemplateExists(DC0, %q) is true", ref)
		}
	}
	if ref, _ := object.NewSearchIndex(c.gc.Client).FindByUuid(ctx, nil, "8b1c2d3e-4f5a-4b6c-8d7e-1f2a3b4c5d6e", true, ptr.To(true)); ref != nil {
		t.Errorf("a refused template was cloned: %v", ref)
	}
}
