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
// Package references is banlieue's own admission plugin. On VirtualMachine
// create and update it looks up the referenced VMClass and VMImage in the
// server's informers:
//   - a reference to an object that does not exist (yet) gets a warning, not
//     a rejection, so manifests can be applied in any order;
//   - overrides naming a disk or interface the existing class lacks are
//     rejected with the override's field path.
package references

import (
	"context"
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/warning"

	"github.com/firestoned/banlieue/pkg/admission/initializer"
	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	informers "github.com/firestoned/banlieue/pkg/generated/informers/externalversions"
	listers "github.com/firestoned/banlieue/pkg/generated/listers/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// PluginName is the name under which the plugin registers.
const PluginName = "BanlieueReferences"

// Register adds the plugin to a set of plugins.
func Register(plugins *admission.Plugins) {
	plugins.Register(PluginName, func(io.Reader) (admission.Interface, error) { return New(), nil })
}

// Plugin checks a VirtualMachine's references.
type Plugin struct {
	*admission.Handler
	classes listers.VMClassLister
	images  listers.VMImageLister
}

var (
	_ admission.ValidationInterface    = &Plugin{}
	_ initializer.WantsInformerFactory = &Plugin{}
)

// New returns the plugin; it needs SetBanlieueInformerFactory before use.
func New() *Plugin {
	return &Plugin{Handler: admission.NewHandler(admission.Create, admission.Update)}
}

// SetBanlieueInformerFactory wires the listers and the readiness of the plugin.
func (p *Plugin) SetBanlieueInformerFactory(f informers.SharedInformerFactory) {
	classes := f.Banlieue().V1alpha1().VMClasses()
	images := f.Banlieue().V1alpha1().VMImages()
	p.classes, p.images = classes.Lister(), images.Lister()
	p.SetReadyFunc(func() bool { return classes.Informer().HasSynced() && images.Informer().HasSynced() })
}

// ValidateInitialization fails when no informer factory was set.
func (p *Plugin) ValidateInitialization() error {
	if p.classes == nil || p.images == nil {
		return fmt.Errorf("%s needs a banlieue informer factory", PluginName)
	}
	return nil
}

// Validate applies to VirtualMachine create and update (not subresources).
func (p *Plugin) Validate(ctx context.Context, a admission.Attributes, _ admission.ObjectInterfaces) error {
	if a.GetResource().GroupResource() != banlieue.Resource("virtualmachines") || a.GetSubresource() != "" {
		return nil
	}
	vm, ok := a.GetObject().(*banlieue.VirtualMachine)
	if !ok {
		return apierrors.NewBadRequest(fmt.Sprintf("expected a VirtualMachine, got %T", a.GetObject()))
	}
	if !p.WaitForReady() {
		return admission.NewForbidden(a, fmt.Errorf("%s is not ready to handle requests yet", PluginName))
	}
	if _, err := p.images.Get(vm.Spec.ImageRef.Name); apierrors.IsNotFound(err) {
		warning.AddWarning(ctx, "", fmt.Sprintf("spec.imageRef.name: VMImage %q does not exist yet; the VM cannot be placed until it does", vm.Spec.ImageRef.Name))
	} else if err != nil {
		return apierrors.NewInternalError(err)
	}
	class, err := p.classes.Get(vm.Spec.ClassRef.Name)
	if apierrors.IsNotFound(err) {
		warning.AddWarning(ctx, "", fmt.Sprintf("spec.classRef.name: VMClass %q does not exist yet; the VM cannot be placed until it does", vm.Spec.ClassRef.Name))
		return nil
	}
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	spec := &v1alpha1.VirtualMachineSpec{}
	if err := v1alpha1.Convert_banlieue_VirtualMachineSpec_To_v1alpha1_VirtualMachineSpec(&vm.Spec, spec, nil); err != nil {
		return apierrors.NewInternalError(err)
	}
	if errs := resolve.CheckOverrides(spec, class); len(errs) > 0 {
		return apierrors.NewInvalid(banlieue.Kind("VirtualMachine"), vm.Name, errs)
	}
	return nil
}
