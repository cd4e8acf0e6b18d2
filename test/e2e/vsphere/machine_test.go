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
	"encoding/base64"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/vmware/govmomi/vim25/mo"
	"github.com/vmware/govmomi/vim25/types"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

const tenant = "tenant-vsm"

func guestInfo(m *mo.VirtualMachine, key string) string {
	for _, o := range m.Config.ExtraConfig {
		if v := o.GetOptionValue(); v != nil && v.Key == key {
			s, _ := v.Value.(string)
			return s
		}
	}
	return ""
}

func decoded(t *testing.T, s string) string {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("guestinfo %q: %v", s, err)
	}
	return string(b)
}

// waitMachine waits for the tenant VSphereMachine's condition cond to have reason.
func waitMachine(t *testing.T, name, cond, reason string) *infrav1.VSphereMachine {
	t.Helper()
	return waitCondition(t, tenant, name, cond, reason)
}

// waitCondition waits for a VSphereMachine's condition cond to have reason.
func waitCondition(t *testing.T, namespace, name, cond, reason string) *infrav1.VSphereMachine {
	t.Helper()
	vsm := &infrav1.VSphereMachine{}
	eventually(t, 2*time.Minute, func() error {
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: name}, vsm); err != nil {
			return err
		}
		if got := meta.FindStatusCondition(vsm.Status.Conditions, cond); got == nil || got.Reason != reason {
			return fmt.Errorf("%s/%s %s: %+v, want reason %s", namespace, name, cond, got, reason)
		}
		return nil
	})
	return vsm
}

// TestMachineInTenantNamespace: VSphereMachines in a namespace other than
// the provider's wait with UserDataForbidden (and no VM) until the
// namespace consents with the one-line RoleBinding their condition names,
// then get their user data from a Secret or a ConfigMap there
// (guestinfo.userdata for cloud-init), their NICs on the named port groups,
// EFI secure boot and a vTPM, and the object's UID as instance UUID; a
// missing user-data Secret holds the VM back with UserDataMissing; the
// Cluster API paused annotation holds it back with Paused=True.
func TestMachineInTenantNamespace(t *testing.T) {
	ctx := context.Background()
	markTemplate(t, "DC0", "ubuntu-22.04-cloudinit")
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}); err != nil {
		t.Fatal(err)
	}
	secret(t, ns, "tenant-creds", map[string]string{"username": user, "password": password})
	ensureImage(t, "ubuntu-22.04-cloudinit")
	// web-0's vTPM and secure boot need the Provider's features vtpm and
	// efiSecureBoot (FeatureNotPublished otherwise, TestRogueMachinesRefused).
	if err := c.Create(ctx, provider("tenant-vsphere", "tenant-creds", func(s *v1alpha1.ProviderSpec) {
		publishing([]string{"VM Network", "DC0_DVPG0"}, nil)(s)
		s.Capabilities.Features = []string{"vtpm", "efiSecureBoot"}
	})); err != nil {
		t.Fatal(err)
	}
	waitReady(t, "tenant-vsphere", "InventoryWalked")
	secret(t, tenant, "web-bootstrap", map[string]string{"value": "#cloud-config\nhostname: web-0\n"})
	if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-cm", Namespace: tenant},
		Data: map[string]string{"user-data": "#cloud-config\nhostname: web-1\n"}}); err != nil {
		t.Fatal(err)
	}
	machine := func(name string, mutate func(*infrav1.VSphereMachine)) *infrav1.VSphereMachine {
		vsm := &infrav1.VSphereMachine{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tenant,
				Annotations: map[string]string{infrav1.ProviderAnnotation: ns + "/tenant-vsphere"}},
			Spec: infrav1.VSphereMachineSpec{
				Template: "ubuntu-22.04-cloudinit", Datacenter: "DC0", Cluster: "DC0_C2",
				CommonMachineSpec: infrav1.CommonMachineSpec{CPUs: 2, MemoryMiB: 1024},
				Disks:             []infrav1.VSphereDisk{{Name: "root", SizeGiB: 12}},
			},
		}
		mutate(vsm)
		if err := c.Create(ctx, vsm); err != nil {
			t.Fatal(err)
		}
		return vsm
	}
	machine("web-0", func(m *infrav1.VSphereMachine) {
		m.Spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: "web-bootstrap"}
		m.Spec.Firmware, m.Spec.TPMEnabled = infrav1.FirmwareEFISecure, true
		m.Spec.Network = []infrav1.VSphereNetworkDevice{
			{Name: "eth0", PortGroup: "VM Network", DHCP4: true},
			{Name: "eth1", PortGroup: "DC0_DVPG0", Static: &infrav1.StaticIP{Address: "198.51.100.7", Prefix: 24}},
		}
	})
	machine("web-1", func(m *infrav1.VSphereMachine) {
		m.Spec.UserDataConfigMapRef = &infrav1.ConfigMapKeyReference{Name: "web-cm"}
		m.Annotations["cluster.x-k8s.io/paused"] = ""
	})
	machine("web-2", func(m *infrav1.VSphereMachine) {
		m.Spec.UserDataSecretRef = &infrav1.SecretKeyReference{Name: "not-yet", Key: "user-data"}
	})

	// No consent yet: nothing is read, nothing is built, and the condition
	// says how to consent. The command it names is run as it is.
	denied := waitMachine(t, "web-0", infrav1.ReadyCondition, "UserDataForbidden")
	waitMachine(t, "web-2", infrav1.ReadyCondition, "UserDataForbidden")
	if vcVM(t, "DC0", providers.BackendName(tenant, "web-0")) != nil {
		t.Error("web-0 got a VM before its namespace let the provider read its user data")
	}
	msg := meta.FindStatusCondition(denied.Status.Conditions, infrav1.ReadyCondition).Message
	_, grant, ok := strings.Cut(msg, "to grant it: ")
	if !ok || !strings.HasPrefix(grant, "kubectl create rolebinding banlieue-provider-userdata -n "+tenant+" --clusterrole=banlieue-provider-userdata --serviceaccount=banlieue-system:banlieue-provider-vsphere") {
		t.Fatalf("UserDataForbidden message %q does not name the grant", msg)
	}
	out, err := exec.Command(kubectlBin, append([]string{"--kubeconfig=" + env.AdminKubeconfig}, strings.Fields(grant)[1:]...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v: %s", grant, err, out)
	}

	vsm := waitMachine(t, "web-0", infrav1.ReadyCondition, "PoweredOn")
	m := vcVM(t, "DC0", providers.BackendName(tenant, "web-0"))
	if m == nil {
		t.Fatal("web-0 is not in vcsim")
	}
	if m.Config.InstanceUuid != string(vsm.UID) || vsm.Status.InstanceUUID != string(vsm.UID) {
		t.Errorf("instance UUID %s (status %s), want the object's UID %s", m.Config.InstanceUuid, vsm.Status.InstanceUUID, vsm.UID)
	}
	if got := decoded(t, guestInfo(m, "guestinfo.userdata")); got != "#cloud-config\nhostname: web-0\n" {
		t.Errorf("guestinfo.userdata %q", got)
	}
	if got := decoded(t, guestInfo(m, "guestinfo.metadata")); !containsAll(got, `"instance-id":"`+string(vsm.UID)+`"`, `"198.51.100.7/24"`, `"set-name":"eth1"`) {
		t.Errorf("guestinfo.metadata %s", got)
	}
	if m.Config.Firmware != "efi" || m.Config.BootOptions == nil || !ptr.Deref(m.Config.BootOptions.EfiSecureBootEnabled, false) {
		t.Errorf("firmware %s, boot options %+v: want EFI with secure boot", m.Config.Firmware, m.Config.BootOptions)
	}
	var tpm, nics int
	for _, d := range m.Config.Hardware.Device {
		switch x := d.(type) {
		case *types.VirtualTPM:
			tpm++
		case types.BaseVirtualEthernetCard:
			nics++
			b := x.GetVirtualEthernetCard().Backing
			if nb, ok := b.(*types.VirtualEthernetCardNetworkBackingInfo); nics == 1 && (!ok || nb.DeviceName != "VM Network") {
				t.Errorf("NIC 1 backing %#v, want VM Network", b)
			}
			if _, ok := b.(*types.VirtualEthernetCardDistributedVirtualPortBackingInfo); nics == 2 && !ok {
				t.Errorf("NIC 2 backing %#v, want the distributed port group DC0_DVPG0", b)
			}
		}
	}
	if tpm != 1 || nics != 2 {
		t.Errorf("%d vTPM and %d NICs, want 1 and 2", tpm, nics)
	}
	if vsm.Status.TaskRef != "" {
		t.Errorf("status.taskRef %q left behind", vsm.Status.TaskRef)
	}
	// What happened is told as Events beside the object: one for the
	// creation, with the power state it reached.
	eventually(t, time.Minute, func() error {
		var list eventsv1.EventList
		if err := c.List(ctx, &list, client.InNamespace(tenant)); err != nil {
			return err
		}
		var reasons, notes []string
		for _, e := range list.Items {
			if e.Regarding.Name == "web-0" && e.Regarding.Kind == "VSphereMachine" {
				reasons, notes = append(reasons, e.Reason), append(notes, e.Note)
			}
		}
		if strings.Join(reasons, ",") != "Cloned" || !strings.HasSuffix(notes[0], ", PoweredOn") {
			return fmt.Errorf("events of VSphereMachine web-0: %v %q, want one Cloned ending with its power state", reasons, notes)
		}
		return nil
	})

	// Once provisioned, the user data is not read again; a VM destroyed
	// behind the provider's back is built again on the next reconcile,
	// and then with its user data.
	destroyVM(t, "DC0", providers.BackendName(tenant, "web-0"))
	web0 := &infrav1.VSphereMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "web-0"}, web0); err != nil {
		t.Fatal(err)
	}
	poke := client.MergeFrom(web0.DeepCopy())
	metav1.SetMetaDataAnnotation(&web0.ObjectMeta, "e2e.banlieue.io/poke", "rebuild")
	if err := c.Patch(ctx, web0, poke); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		m := vcVM(t, "DC0", providers.BackendName(tenant, "web-0"))
		if m == nil {
			return fmt.Errorf("web-0 is not built again")
		}
		if got := decoded(t, guestInfo(m, "guestinfo.userdata")); got != "#cloud-config\nhostname: web-0\n" {
			return fmt.Errorf("web-0 built again with guestinfo.userdata %q", got)
		}
		return nil
	})

	// Paused: nothing is created until the annotation goes.
	waitMachine(t, "web-1", "Paused", "Paused")
	if vcVM(t, "DC0", providers.BackendName(tenant, "web-1")) != nil {
		t.Error("a paused VSphereMachine got a VM")
	}
	web1 := &infrav1.VSphereMachine{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: tenant, Name: "web-1"}, web1); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(web1.DeepCopy())
	delete(web1.Annotations, "cluster.x-k8s.io/paused")
	if err := c.Patch(ctx, web1, patch); err != nil {
		t.Fatal(err)
	}
	waitMachine(t, "web-1", infrav1.ReadyCondition, "PoweredOn")
	waitMachine(t, "web-1", "Paused", "NotPaused")
	if got := decoded(t, guestInfo(vcVM(t, "DC0", providers.BackendName(tenant, "web-1")), "guestinfo.userdata")); got != "#cloud-config\nhostname: web-1\n" {
		t.Errorf("web-1 guestinfo.userdata from the ConfigMap: %q", got)
	}

	// A missing user-data Secret: no VM, a reason naming it; then it comes.
	v := waitMachine(t, "web-2", infrav1.ReadyCondition, "UserDataMissing")
	if cond := meta.FindStatusCondition(v.Status.Conditions, infrav1.ReadyCondition); !containsAll(cond.Message, "not-yet") {
		t.Errorf("message %q does not name the Secret", cond.Message)
	}
	if vcVM(t, "DC0", providers.BackendName(tenant, "web-2")) != nil {
		t.Error("a VM was created without its user data")
	}
	secret(t, tenant, "not-yet", map[string]string{"user-data": "#cloud-config\n"})
	waitMachine(t, "web-2", infrav1.ReadyCondition, "PoweredOn")

	if err := c.DeleteAllOf(ctx, &infrav1.VSphereMachine{}, client.InNamespace(tenant)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 2*time.Minute, func() error {
		if got := vcVMNames(t, "DC0", providers.BackendName(tenant, "")); len(got) > 0 {
			return fmt.Errorf("vcsim still has %v", got)
		}
		return nil
	})
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
