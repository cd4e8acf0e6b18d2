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

package machinespec

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	"github.com/firestoned/banlieue/pkg/providers"
)

// MachineFinalizer holds a VSphereMachine until its VM is destroyed.
const MachineFinalizer = "infrastructure.banlieue.io/vspheremachine"

// MachineKind is VSphereMachine for the provider's generic reconcilers.
func MachineKind() providers.MachineKind {
	return providers.MachineKind{
		Name:             "vspheremachine",
		New:              func() infrav1.Machine { return &infrav1.VSphereMachine{} },
		NewList:          func() client.ObjectList { return &infrav1.VSphereMachineList{} },
		Items:            items,
		Finalizer:        MachineFinalizer,
		CreatedReason:    "Cloned",
		ProviderIDScheme: "vsphere",
		Spec:             machineSpec,
		Admit:            admitMachine,
		Observe: func(m infrav1.Machine, st providers.MachineStatus) {
			vsm := m.(*infrav1.VSphereMachine)
			vsm.Status.BIOSUUID, vsm.Status.InstanceUUID = st.BIOSUUID, st.InstanceUUID
		},
	}
}

func items(l client.ObjectList) []infrav1.Machine {
	return providers.MachineItems[infrav1.VSphereMachine](l.(*infrav1.VSphereMachineList).Items)
}

// machineSpec is the backend's view of a VSphereMachine: its datacenter
// and cluster say where, whatever failure domain it names (admission
// checks the two agree), or, when it sets neither (a Cluster API template),
// its failure domain's; its first disk's datastore takes the clone.
func machineSpec(m infrav1.Machine, fd v1alpha1.FailureDomain) (providers.MachineSpec, providers.Fields) {
	vsm := m.(*infrav1.VSphereMachine)
	where := failuredomain.Location{Datacenter: vsm.Spec.Datacenter, Cluster: vsm.Spec.Cluster}
	if where == (failuredomain.Location{}) && vsm.Spec.FailureDomain != "" {
		where = failuredomain.Location{Datacenter: fd.Datacenter, Cluster: fd.Cluster}
	}
	spec := providers.MachineSpec{
		Location: where,
		Options: map[string]string{OptionResourcePool: vsm.Spec.ResourcePool, OptionFolder: vsm.Spec.Folder,
			OptionCPUHotAdd: strconv.FormatBool(vsm.Spec.CPUHotAdd), OptionMemoryHotAdd: strconv.FormatBool(vsm.Spec.MemoryHotAdd)},
		Image: vsm.Spec.Template,
	}
	for _, n := range vsm.Spec.Network {
		nic := providers.NIC{Name: n.Name, Network: n.PortGroup}
		if st := n.Static; st != nil {
			nic.Static = &providers.StaticIP{Address: st.Address, Prefix: st.Prefix, Gateway: st.Gateway, Nameservers: st.Nameservers}
		}
		spec.NICs = append(spec.NICs, nic)
	}
	for _, d := range vsm.Spec.Disks {
		spec.Disks = append(spec.Disks, providers.Disk{Name: d.Name, SizeGiB: d.SizeGiB, Provisioning: string(d.Provisioning), Target: d.Datastore})
	}
	fields := providers.Fields{
		Location:        "spec.datacenter, spec.cluster",
		LocationOptions: map[string]string{OptionResourcePool: "spec.resourcePool", OptionFolder: "spec.folder"},
		Disk:            func(i int) string { return fmt.Sprintf("spec.disks[%d].datastore", i) },
		NIC:             func(i int) string { return fmt.Sprintf("spec.network[%d].portGroup", i) },
		Image:           "spec.template",
		Storage:         "Datastore",
		Network:         "PortGroup",
		ImageWord:       "Template",
		Features:        map[string]string{},
	}
	if vsm.Spec.CPUHotAdd {
		fields.Features[FeatureHotAddCPU] = "spec.cpuHotAdd"
	}
	if vsm.Spec.MemoryHotAdd {
		fields.Features[FeatureHotAddMemory] = "spec.memoryHotAdd"
	}
	fields.Invalid = append(fields.Invalid, providers.ArchitectureError(vsm.Spec.Architecture, Architectures, ArchitectureWhy)...)
	for _, o := range []struct{ field, value, under string }{
		{"spec.resourcePool", vsm.Spec.ResourcePool, "the root resource pool of the failure domain's cluster"},
		{"spec.folder", vsm.Spec.Folder, "the VM folder of the failure domain's datacenter"},
		// The template is looked up at its path under that folder too.
		{"spec.template", vsm.Spec.Template, "the VM folder of the failure domain's datacenter"},
	} {
		if why := RelativePathError(o.value); why != "" {
			fields.Invalid = append(fields.Invalid, providers.FieldError{Field: o.field, Reason: ReasonOutsideFailureDomain,
				Message: fmt.Sprintf("%q %s: it must be a path under %s", o.value, why, o.under)})
		}
	}
	return spec, fields
}

// ReasonOutsideFailureDomain: a resourcePool or folder that could name an
// object outside the machine's failure domain.
const ReasonOutsideFailureDomain = "OutsideFailureDomain"

// moRef is a managed object reference as govmomi's finder reads one
// (ResourcePool:resgroup-42).
var moRef = regexp.MustCompile(`^[A-Za-z]+:`)

// RelativePathError says why p, a VSphereMachine's resourcePool or folder,
// could lead the backend outside the machine's failure domain; "" when it
// cannot. The backend looks both up under the failure domain (the
// resource pool under its cluster's root pool, the folder under its
// datacenter's VM folder), so p must be a relative inventory path that
// stays there: not absolute, no "." or ".." (which climb out once
// joined), no empty element, no wildcard (the finder globs), no managed
// object reference (which the finder takes as it is, wherever it is).
func RelativePathError(p string) string {
	switch {
	case p == "":
		return ""
	case strings.HasPrefix(p, "/"):
		return "is an absolute inventory path"
	case moRef.MatchString(p):
		return "is a managed object reference"
	case strings.ContainsAny(p, "*?[]\\"):
		return "holds a wildcard or escape"
	}
	for _, e := range strings.Split(p, "/") {
		if e == "" || e == "." || e == ".." {
			return "has an empty, \".\" or \"..\" element"
		}
	}
	return ""
}

// ImageKind: vSphere templates live in a datacenter; an import is built
// once per datacenter (its Scope), a template at the root of its VM
// folder.
func ImageKind() providers.ImageKind {
	return providers.ImageKind{
		Word:           "template",
		NotFoundReason: v1alpha1.ImageReasonTemplateNotFound,
		NoSourceReason: v1alpha1.ImageReasonNoVSphereSource,
		Scope: func(l failuredomain.Location) failuredomain.Location {
			return failuredomain.Location{Datacenter: l.Datacenter}
		},
		ScopeWord:     "datacenter",
		ImportFormats: ImportFormats,
	}
}

// Credentials are a vSphere account: the Secret's username and password.
func Credentials(s *corev1.Secret) (providers.Credentials, error) {
	user, pass := string(s.Data["username"]), string(s.Data["password"])
	if user == "" || pass == "" {
		return providers.Credentials{}, errors.New("needs non-empty keys username and password")
	}
	return providers.Credentials{Username: user, Password: pass}, nil
}

// ImportFormats are the spec.import formats this backend builds: asked by
// the API server before a VMImage is stored (a class listed in
// spec.import.providerClasses that takes none is refused by name) and by
// the provider before it fetches a byte.
var ImportFormats = []v1alpha1.ImageFormat{v1alpha1.ImageFormatQCOW2, v1alpha1.ImageFormatRaw, v1alpha1.ImageFormatOVA, v1alpha1.ImageFormatISO}
