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
package validation

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
)

func validProviderClass() *banlieue.ProviderClass {
	return &banlieue.ProviderClass{
		ObjectMeta: metav1.ObjectMeta{Name: "vsphere"},
		Spec: banlieue.ProviderClassSpec{
			Backend: "vsphere", Image: "ghcr.io/firestoned/banlieue:v0.1.0", Namespace: "banlieue-system",
			DeploymentStrategy: banlieue.ProviderDeploymentPerProvider, Replicas: ptr.To[int32](1), LogLevel: ptr.To[int32](2),
			Resources: &banlieue.ProviderResources{
				Requests: map[string]resource.Quantity{"cpu": resource.MustParse("50m"), "memory": resource.MustParse("64Mi")},
				Limits:   map[string]resource.Quantity{"memory": resource.MustParse("512Mi")},
			},
		},
	}
}

func TestValidateProviderClass(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*banlieue.ProviderClass)
		want   []want
	}{
		{"valid", func(*banlieue.ProviderClass) {}, nil},
		{"libvirt, shared", func(c *banlieue.ProviderClass) {
			c.Name, c.Spec.Backend, c.Spec.DeploymentStrategy = "libvirt", "libvirt", banlieue.ProviderDeploymentShared
		}, nil},
		{"no backend", func(c *banlieue.ProviderClass) { c.Spec.Backend = "" }, []want{{field.ErrorTypeRequired, "spec.backend"}}},
		{"unknown backend", func(c *banlieue.ProviderClass) { c.Name, c.Spec.Backend = "hyperv", "hyperv" }, []want{{field.ErrorTypeNotSupported, "spec.backend"}}},
		{"backend named otherwise than the class", func(c *banlieue.ProviderClass) { c.Name = "vsphere-prod" }, []want{{field.ErrorTypeInvalid, "spec.backend"}}},
		{"no image", func(c *banlieue.ProviderClass) { c.Spec.Image = "" }, []want{{field.ErrorTypeRequired, "spec.image"}}},
		{"bad namespace", func(c *banlieue.ProviderClass) { c.Spec.Namespace = "Banlieue_System" }, []want{{field.ErrorTypeInvalid, "spec.namespace"}}},
		{"unknown strategy", func(c *banlieue.ProviderClass) { c.Spec.DeploymentStrategy = "DaemonSet" }, []want{{field.ErrorTypeNotSupported, "spec.deploymentStrategy"}}},
		{"too many replicas", func(c *banlieue.ProviderClass) { c.Spec.Replicas = ptr.To[int32](MaxProviderReplicas + 1) }, []want{{field.ErrorTypeInvalid, "spec.replicas"}}},
		{"negative replicas", func(c *banlieue.ProviderClass) { c.Spec.Replicas = ptr.To[int32](-1) }, []want{{field.ErrorTypeInvalid, "spec.replicas"}}},
		{"log level 11", func(c *banlieue.ProviderClass) { c.Spec.LogLevel = ptr.To[int32](11) }, []want{{field.ErrorTypeInvalid, "spec.logLevel"}}},
		{"a resource other than cpu and memory", func(c *banlieue.ProviderClass) {
			c.Spec.Resources.Limits["nvidia.com/gpu"] = resource.MustParse("1")
		}, []want{{field.ErrorTypeNotSupported, "spec.resources.limits[nvidia.com/gpu]"}}},
		{"request above limit", func(c *banlieue.ProviderClass) {
			c.Spec.Resources.Requests["memory"] = resource.MustParse("1Gi")
		}, []want{{field.ErrorTypeInvalid, "spec.resources.requests[memory]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := validProviderClass()
			tc.mutate(c)
			check(t, ValidateProviderClass(c), tc.want...)
		})
	}
}

func TestValidateProviderClassUpdate(t *testing.T) {
	old := validProviderClass()
	old.ResourceVersion = "1"
	c := old.DeepCopy()
	c.Spec.Image, c.Spec.Paused = "ghcr.io/firestoned/banlieue:v0.2.0", true
	check(t, ValidateProviderClassUpdate(c, old))
	c.Spec.Backend = "libvirt"
	check(t, ValidateProviderClassUpdate(c, old), want{field.ErrorTypeInvalid, "spec.backend"}, want{field.ErrorTypeInvalid, "spec.backend"})
}

func TestValidateProviderWorkload(t *testing.T) {
	p := validProvider()
	p.ResourceVersion = "1"
	next := p.DeepCopy()
	next.Status.Workload = &banlieue.ProviderWorkload{Namespace: "banlieue-system", DeploymentName: "banlieue-provider-vsphere-prod-vsphere", ReadyReplicas: 1, Reason: "Available"}
	check(t, ValidateProviderStatusUpdate(next, p))
	next.Status.Workload.Reason, next.Status.Workload.ReadyReplicas = "not a reason", -1
	check(t, ValidateProviderStatusUpdate(next, p), want{field.ErrorTypeInvalid, "status.workload.reason"}, want{field.ErrorTypeInvalid, "status.workload.readyReplicas"})
}

// toProxmox turns validProvider into a valid Proxmox VE Provider.
func toProxmox(p *banlieue.Provider) {
	p.Spec.ProviderClassRef.Name = "proxmox"
	p.Spec.Connection.Endpoint = "https://pve.example.com:8006/api2/json"
	for i := range p.Spec.Capabilities.StorageClasses {
		p.Spec.Capabilities.StorageClasses[i].Target = banlieue.StorageTarget{Storage: "local-lvm"}
	}
	for i := range p.Spec.Capabilities.NetworkClasses {
		p.Spec.Capabilities.NetworkClasses[i].Target = banlieue.NetworkTarget{Bridge: "vmbr0", VLAN: 20}
	}
	p.Spec.FailureDomainNameOverrides = []banlieue.FailureDomainNameOverride{{Host: "pve1", Name: "rack-a"}}
	p.Spec.Capabilities.Features = []string{"vtpm"}
}

func TestValidateProxmoxProvider(t *testing.T) {
	for _, tc := range []struct {
		name   string
		mutate func(*banlieue.Provider)
		want   []want
	}{
		{"valid", func(*banlieue.Provider) {}, nil},
		{"not the API's URL", func(p *banlieue.Provider) { p.Spec.Connection.Endpoint = "https://pve.example.com:8006/" },
			[]want{{field.ErrorTypeInvalid, "spec.connection.endpoint"}}},
		{"a datastore target", func(p *banlieue.Provider) {
			p.Spec.Capabilities.StorageClasses[0].Target = banlieue.StorageTarget{Datastore: "ds1"}
		}, []want{{field.ErrorTypeForbidden, "spec.capabilities.storageClasses[0].target.datastore"}}},
		{"a libvirt network", func(p *banlieue.Provider) {
			p.Spec.Capabilities.NetworkClasses[0].Target = banlieue.NetworkTarget{Network: "default"}
		}, []want{{field.ErrorTypeForbidden, "spec.capabilities.networkClasses[0].target.network"}}},
		{"VLAN out of range", func(p *banlieue.Provider) { p.Spec.Capabilities.NetworkClasses[0].Target.VLAN = 5000 },
			[]want{{field.ErrorTypeInvalid, "spec.capabilities.networkClasses[0].target.vlan"}}},
		{"hot-add", func(p *banlieue.Provider) { p.Spec.Capabilities.Features = []string{"hotAddCPU"} },
			[]want{{field.ErrorTypeInvalid, "spec.capabilities.features[0]"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := validProvider()
			toProxmox(p)
			tc.mutate(p)
			check(t, ValidateProvider(p), tc.want...)
		})
	}
	t.Run("VLANs on another class", func(t *testing.T) {
		p := validProvider()
		p.Spec.Capabilities.NetworkClasses[0].Target.VLAN = 20
		check(t, ValidateProvider(p), want{field.ErrorTypeForbidden, "spec.capabilities.networkClasses[0].target.vlan"})
	})
}
