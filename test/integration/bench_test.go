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
	"fmt"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BenchmarkCreateVirtualMachine creates VMs through the in-process server
// (embedded etcd): with -cpuprofile it shows where a create's CPU goes.
func BenchmarkCreateVirtualMachine(b *testing.B) {
	ctx := context.Background()
	s := startServer(b, b.TempDir())
	c := s.Client.BanlieueV1alpha1()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			i++
			vm := newVM(fmt.Sprintf("vm-%p-%d", pb, i), "c", "i")
			vm.Namespace = "default"
			if _, err := c.VirtualMachines("default").Create(ctx, vm, metav1.CreateOptions{}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}
