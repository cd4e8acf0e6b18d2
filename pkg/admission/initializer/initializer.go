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
// Package initializer hands banlieue's shared informers to admission plugins
// that ask for them.
package initializer

import (
	"k8s.io/apiserver/pkg/admission"

	informers "github.com/firestoned/banlieue/pkg/generated/informers/externalversions"
)

// WantsInformerFactory is implemented by plugins that read banlieue.io objects.
type WantsInformerFactory interface {
	SetBanlieueInformerFactory(informers.SharedInformerFactory)
	admission.InitializationValidator
}

type pluginInitializer struct {
	informers informers.SharedInformerFactory
}

var _ admission.PluginInitializer = pluginInitializer{}

// New returns an initializer that passes f to plugins wanting it.
func New(f informers.SharedInformerFactory) admission.PluginInitializer {
	return pluginInitializer{informers: f}
}

// Initialize sets the informer factory on plugins that want it.
func (i pluginInitializer) Initialize(plugin admission.Interface) {
	if wants, ok := plugin.(WantsInformerFactory); ok {
		wants.SetBanlieueInformerFactory(i.informers)
	}
}
