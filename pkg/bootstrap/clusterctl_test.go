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

package bootstrap

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestCredentialsVariable(t *testing.T) {
	for name, want := range map[string]string{
		"vsphere-creds":     "${BANLIEUE_VSPHERE_CREDS:=vsphere-creds}",
		"lab-proxmox-token": "${BANLIEUE_LAB_PROXMOX_TOKEN:=lab-proxmox-token}",
		"ca":                "${BANLIEUE_CA:=ca}",
	} {
		if got := CredentialsVariable(name); got != want {
			t.Errorf("CredentialsVariable(%q) = %q, want %q", name, got, want)
		}
	}
}

// TestClusterctlComponents: the components hold the Namespace first
// (clusterctl's default target namespace), only our infrastructure CRDs
// (Cluster API ships the IPAM ones), every backend's provider Deployment,
// and credentials Roles whose every resource name is a variable.
func TestClusterctlComponents(t *testing.T) {
	objs, err := ClusterctlComponents()
	if err != nil {
		t.Fatal(err)
	}
	if objs[0].GetKind() != "CustomResourceDefinition" && objs[0].GetKind() != "Namespace" {
		t.Errorf("first object %s, want the CRDs and the Namespace first", objs[0].GetKind())
	}
	namespaces, deployments := 0, map[string]bool{}
	for _, o := range objs {
		switch o.GetKind() {
		case "Namespace":
			namespaces++
			if o.GetName() != DefaultNamespace {
				t.Errorf("Namespace %s in the components, want only %s", o.GetName(), DefaultNamespace)
			}
		case "CustomResourceDefinition":
			if !strings.HasSuffix(o.GetName(), ".infrastructure.banlieue.io") {
				t.Errorf("CRD %s is not banlieue's", o.GetName())
			}
		case "Deployment":
			deployments[o.GetName()] = true
		case "Role":
			if !strings.HasSuffix(o.GetName(), "-credentials") {
				continue
			}
			rules, _, _ := unstructured.NestedSlice(o.Object, "rules")
			for _, r := range rules {
				names, _, _ := unstructured.NestedStringSlice(r.(map[string]any), "resourceNames")
				for _, n := range names {
					if !strings.HasPrefix(n, "${BANLIEUE_") {
						t.Errorf("Role %s grants %q, not a variable", o.GetName(), n)
					}
				}
			}
		}
		if ns := o.GetNamespace(); ns != "" && ns != DefaultNamespace {
			t.Errorf("%s %s in namespace %s: clusterctl installs a provider into one", o.GetKind(), o.GetName(), ns)
		}
	}
	if namespaces != 1 {
		t.Errorf("%d Namespaces, want %s once", namespaces, DefaultNamespace)
	}
	backends, err := Backends()
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		if !deployments["banlieue-provider-"+b] {
			t.Errorf("no Deployment of the %s provider among %v", b, deployments)
		}
	}
}

// TestClusterctlTemplate: each backend's flavor names its own kinds, has
// a control-plane and a worker deployment with their own variables, and
// leaves nothing of the template language; an unknown flavor is refused.
func TestClusterctlTemplate(t *testing.T) {
	for flavor, kind := range kindPrefix {
		out, err := ClusterctlTemplate(flavor)
		if err != nil {
			t.Fatalf("%s: %v", flavor, err)
		}
		s := string(out)
		for _, want := range []string{
			"kind: " + kind + "Cluster", "kind: " + kind + "MachineTemplate", "name: ${CLUSTER_NAME}-control-plane",
			"name: ${CLUSTER_NAME}-worker", "${CONTROL_PLANE_MACHINE_CPUS:=2}", "${WORKER_MACHINE_CPUS:=2}",
			"cluster.x-k8s.io/control-plane: \"\"", "banlieue-provider-" + flavor,
		} {
			if !strings.Contains(s, want) {
				t.Errorf("%s flavor has no %q", flavor, want)
			}
		}
		if strings.Count(s, "cluster.x-k8s.io/control-plane:") != 1 {
			t.Errorf("%s flavor: the control-plane label on more than the control plane's machines", flavor)
		}
		for _, left := range []string{"{{", "}}", "${ROLE_", "{{.Kind}}"} {
			if strings.Contains(s, left) {
				t.Errorf("%s flavor keeps %q", flavor, left)
			}
		}
	}
	if _, err := ClusterctlTemplate("hyperv"); err == nil || !strings.Contains(err.Error(), "hyperv") {
		t.Errorf("ClusterctlTemplate(hyperv) = %v, want a refusal naming it", err)
	}
}
