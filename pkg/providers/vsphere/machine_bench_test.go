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
	"fmt"
	"testing"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// BenchmarkEnsureMachine is the backend's share of provisioning one VM
// shaped like make bench's (EFI, two disks, a NIC, cloud-init user data) on
// vcsim: what the provider costs before any Kubernetes API write.
func BenchmarkEnsureMachine(b *testing.B) {
	ctx := context.Background()
	_, conn := vcsim(&testing.T{})
	c, err := Connect(ctx, conn)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Logout(ctx)
	tmpl := template(&testing.T{}, c, "DC0")
	noop := func(context.Context, string) error { return nil }
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		spec := providers.MachineSpec{
			Name: fmt.Sprintf("bench-%d", i), InstanceUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i),
			Location: failuredomain.Location{Datacenter: "DC0", Cluster: "DC0_C0"}, Image: tmpl, CPUs: 8, MemoryMiB: 65536, Firmware: "efi",
			NICs: []providers.NIC{{Name: "eth0", Network: "VM Network"}}, Disks: []providers.Disk{{SizeGiB: 80}, {SizeGiB: 2000}},
			UserData: []byte("#cloud-config\n"), PowerState: infrav1.PowerStatePoweredOn,
		}
		if _, err := c.EnsureMachine(ctx, spec, noop); err != nil {
			b.Fatal(err)
		}
	}
}
