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
	"os/exec"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/providers"
)

// bootedGuest makes a Provider NAME-libvirt of the test's libvirtd
// (labelled role=NAME), a class NAME-small and a VM NAME-vm of the test
// guest on it, waits until kubectl sees the VM Ready and the guest's
// shell is up on its serial port (BANLIEUE-READY), and deletes them at
// the test's end.
func bootedGuest(t *testing.T, name string) (*v1alpha1.VirtualMachine, *v1alpha1.Provider) {
	t.Helper()
	ctx := context.Background()
	p := libvirtProvider(name+"-libvirt", map[string]string{"role": name})
	if err := c.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), p) })
	p = waitProviderReady(t, p.Name)
	img := ensureImage(t)
	eventually(t, time.Minute, func() error {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			return err
		}
		for _, s := range img.Status.PerProvider {
			if s.Provider == ns+"/"+p.Name && s.Ready {
				return nil
			}
		}
		return fmt.Errorf("image not ready on %s: %+v", p.Name, img.Status.PerProvider)
	})
	class := &v1alpha1.VMClass{ObjectMeta: metav1.ObjectMeta{Name: name + "-small"}, Spec: v1alpha1.VMClassSpec{
		Hardware: v1alpha1.VMClassHardware{CPUs: 1, MemoryMiB: 256, Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 1, StorageClass: "gold"}}},
		Firmware: "bios"}}
	if err := c.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: name + "-vm", Namespace: ns}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: class.Name}, ImageRef: v1alpha1.LocalObjectReference{Name: img.Name},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": name}}}}}
	if err := c.Create(ctx, vm); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), vm) })
	if out, err := exec.Command(kubectlBin, "--kubeconfig", env.AdminKubeconfig, "-n", ns, "wait", "--for=condition=Ready",
		"virtualmachine/"+vm.Name, "--timeout=3m").CombinedOutput(); err != nil {
		t.Fatalf("kubectl wait: %v\n%s", err, out)
	}
	// The shell starts after this line (hack/guest/init).
	waitSerial(t, providers.BackendName(ns, vm.Name), "BANLIEUE-READY")
	if err := c.Get(ctx, client.ObjectKeyFromObject(vm), vm); err != nil {
		t.Fatal(err)
	}
	return vm, p
}
