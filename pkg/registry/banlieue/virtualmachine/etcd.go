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
package virtualmachine

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/infrastructure"
	"github.com/firestoned/banlieue/pkg/registry/status"
	"github.com/firestoned/banlieue/pkg/registry/table"
)

// Storage holds the REST endpoints of virtualmachines.
type Storage struct {
	VirtualMachine *REST
	Status         *status.REST
	Resolved       *ResolvedREST
	Placement      *PlacementREST
	Console        *ConsoleREST
	Restart        *RestartREST
	WebConsole     *WebConsoleREST
}

// NewStorage builds the etcd-backed storage of VirtualMachines. classes,
// images and providers read the server's own storage for the resolved and
// placement subresources; scheme converts between internal and v1alpha1;
// sharedProviderNamespace is the install's shared-Provider namespace;
// backends answers what each backend cannot build (nil: nothing asked);
// consoleTokens are the tokens /console and /webconsole present to console
// endpoints.
func NewStorage(scheme *runtime.Scheme, optsGetter generic.RESTOptionsGetter, classes, images rest.Getter, providers ProviderStore, sharedProviderNamespace string, backends *infrastructure.Registry, consoleTokens TokenSource) (*Storage, error) {
	strategy := NewStrategy(scheme)
	store := &genericregistry.Store{
		NewFunc:                   func() runtime.Object { return &banlieue.VirtualMachine{} },
		NewListFunc:               func() runtime.Object { return &banlieue.VirtualMachineList{} },
		PredicateFunc:             Match,
		DefaultQualifiedResource:  banlieue.Resource("virtualmachines"),
		SingularQualifiedResource: banlieue.Resource("virtualmachine"),
		CreateStrategy:            strategy,
		UpdateStrategy:            strategy,
		DeleteStrategy:            strategy,
		ResetFieldsStrategy:       strategy,
		TableConvertor:            tableConvertor,
	}
	if err := store.CompleteWithOptions(&generic.StoreOptions{RESTOptions: optsGetter, AttrFunc: GetAttrs}); err != nil {
		return nil, err
	}
	view := storageView{scheme: scheme, vms: store, classes: classes, images: images}
	statusREST := status.NewREST(store, NewStatusStrategy(strategy))
	return &Storage{
		VirtualMachine: &REST{store},
		Status:         statusREST,
		Resolved:       &ResolvedREST{view},
		Placement:      &PlacementREST{storageView: view, load: newSchedulingLoad(store), providers: providers, shared: sharedProviderNamespace, backends: backends},
		Console:        &ConsoleREST{vms: store, providers: providers, tokens: consoleTokens},
		Restart:        &RestartREST{status: statusREST},
		WebConsole:     &WebConsoleREST{vms: store, providers: providers, tokens: consoleTokens},
	}, nil
}

// ProviderStore reads the server's Providers.
type ProviderStore interface {
	rest.Lister
	rest.Getter
}

// REST is the main virtualmachines endpoint.
type REST struct {
	*genericregistry.Store
}

var (
	_ rest.ShortNamesProvider = &REST{}
	_ rest.CategoriesProvider = &REST{}
)

// ShortNames lets users type "kubectl get vm".
func (*REST) ShortNames() []string { return []string{"vm"} }

// Categories puts VirtualMachines in "kubectl get banlieue".
func (*REST) Categories() []string { return []string{"banlieue"} }

var tableConvertor = table.New(func(obj runtime.Object) ([]interface{}, error) {
	vm, ok := obj.(*banlieue.VirtualMachine)
	if !ok {
		return nil, table.Unexpected(obj)
	}
	provider, fd := "", ""
	if s := vm.Status.Scheduled; s != nil {
		provider, fd = s.Provider, s.FailureDomain
	}
	power := string(vm.Status.PowerState)
	if power == "" {
		power = "<none>"
	}
	ip := "<none>"
	for _, a := range vm.Status.Addresses {
		if a.Type == "InternalIP" || a.Type == "ExternalIP" {
			ip = a.Address
			break
		}
	}
	return []interface{}{
		vm.Spec.ClassRef.Name, vm.Spec.ImageRef.Name, provider, power,
		table.ConditionStatus(vm.Status.Conditions, banlieue.VirtualMachineReady), ip,
		fd, string(vm.Spec.DesiredPowerState),
	}, nil
},
	table.Column{Name: "Class", Type: "string", Description: "The VMClass the VM is shaped by."},
	table.Column{Name: "Image", Type: "string", Description: "The VMImage the VM boots."},
	table.Column{Name: "Provider", Type: "string", Description: "The Provider the VM is scheduled on."},
	table.Column{Name: "Power", Type: "string", Description: "The power state the backend reports."},
	table.Column{Name: "Ready", Type: "string", Description: "The status of the Ready condition."},
	table.Column{Name: "IP", Type: "string", Description: "The VM's first IP address, as the guest reports it."},
	table.Column{Name: "Failure-Domain", Type: "string", Priority: 1, Description: "The failure domain the VM is scheduled in."},
	table.Column{Name: "Desired", Type: "string", Priority: 1, Description: "The desired power state."},
)
