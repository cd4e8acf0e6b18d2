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
// Package apiserver assembles banlieue's aggregated API server: the scheme,
// the storage of every banlieue.io resource and its subresources.
package apiserver

import (
	"fmt"
	"net/http"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/apiserver/pkg/server/healthz"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/install"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/backends"
	"github.com/firestoned/banlieue/pkg/registry/banlieue/provider"
	"github.com/firestoned/banlieue/pkg/registry/banlieue/providerclass"
	"github.com/firestoned/banlieue/pkg/registry/banlieue/snapshot"
	"github.com/firestoned/banlieue/pkg/registry/banlieue/virtualmachine"
	"github.com/firestoned/banlieue/pkg/registry/banlieue/vmclass"
	"github.com/firestoned/banlieue/pkg/registry/banlieue/vmimage"
)

var (
	// Scheme knows every type the server serves, internal and versioned.
	Scheme = runtime.NewScheme()
	// Codecs encodes and decodes objects of Scheme.
	Codecs = serializer.NewCodecFactory(Scheme)
)

func init() {
	install.Install(Scheme)

	// Options and status types every API group's endpoints use.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	unversioned := schema.GroupVersion{Group: "", Version: "v1"}
	Scheme.AddUnversionedTypes(unversioned,
		&metav1.Status{},
		&metav1.APIVersions{},
		&metav1.APIGroupList{},
		&metav1.APIGroup{},
		&metav1.APIResourceList{},
	)
}

// Config is the configuration of a banlieue API server.
type Config struct {
	GenericConfig *genericapiserver.RecommendedConfig
	// SharedProviderNamespace holds the Providers every namespace's VMs
	// may use (/placement considers them).
	SharedProviderNamespace string
	// ConsoleTokens are this server's tokens for the Providers' console
	// endpoints; nil when it has none.
	ConsoleTokens virtualmachine.TokenSource
}

// Server is a banlieue API server.
type Server struct {
	GenericAPIServer *genericapiserver.GenericAPIServer
}

type completedConfig struct {
	GenericConfig           genericapiserver.CompletedConfig
	SharedProviderNamespace string
	ConsoleTokens           virtualmachine.TokenSource
}

// CompletedConfig is a Config with defaults filled in.
type CompletedConfig struct {
	*completedConfig
}

// Complete fills in defaults.
func (cfg *Config) Complete() CompletedConfig {
	return CompletedConfig{&completedConfig{GenericConfig: cfg.GenericConfig.Complete(), SharedProviderNamespace: cfg.SharedProviderNamespace, ConsoleTokens: cfg.ConsoleTokens}}
}

// New returns a server serving banlieue.io/v1alpha1 from etcd.
func (c CompletedConfig) New() (*Server, error) {
	generic, err := c.GenericConfig.New("banlieue-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	s := &Server{GenericAPIServer: generic}

	optsGetter := c.GenericConfig.RESTOptionsGetter
	classes, err := vmclass.NewREST(Scheme, optsGetter)
	if err != nil {
		return nil, err
	}
	infra, err := backends.Infrastructure()
	if err != nil {
		return nil, err
	}
	images, imageStatus, imageFinalizers, err := vmimage.NewREST(Scheme, optsGetter, infra.ImportFormats)
	if err != nil {
		return nil, err
	}
	providers, err := provider.NewREST(Scheme, optsGetter)
	if err != nil {
		return nil, err
	}
	providerClasses, err := providerclass.NewREST(Scheme, optsGetter)
	if err != nil {
		return nil, err
	}
	vms, err := virtualmachine.NewStorage(Scheme, optsGetter, classes, images, providers.Provider, c.SharedProviderNamespace, infra, c.ConsoleTokens)
	if err != nil {
		return nil, err
	}

	snapshots, snapshotStatus, restores, restoreStatus, err := snapshot.NewStorage(Scheme, optsGetter,
		&snapshot.Checks{VMs: vms.VirtualMachine, Providers: providers.Provider, Limits: infra.SnapshotLimits})
	if err != nil {
		return nil, err
	}

	// The default serializers: JSON, YAML and protobuf, with the streaming
	// list encoders, and CBOR when CBORServingAndStorage is enabled.
	group := genericapiserver.NewDefaultAPIGroupInfo(banlieue.GroupName, Scheme, runtime.NewParameterCodec(Scheme), Codecs)
	group.VersionedResourcesStorageMap[v1alpha1.SchemeGroupVersion.Version] = map[string]rest.Storage{
		"virtualmachines":                vms.VirtualMachine,
		"virtualmachines/status":         vms.Status,
		"virtualmachines/resolved":       vms.Resolved,
		"virtualmachines/placement":      vms.Placement,
		"virtualmachines/console":        vms.Console,
		"virtualmachines/restart":        vms.Restart,
		"virtualmachines/webconsole":     vms.WebConsole,
		"virtualmachinesnapshots":        snapshots,
		"virtualmachinesnapshots/status": snapshotStatus,
		"virtualmachinerestores":         restores,
		"virtualmachinerestores/status":  restoreStatus,
		"vmclasses":                      classes,
		"vmimages":                       images,
		"vmimages/status":                imageStatus,
		"vmimages/finalizers":            imageFinalizers,
		"providers":                      providers.Provider,
		"providers/status":               providers.Status,
		"providers/finalizers":           providers.Finalizers,
		"providerclasses":                providerClasses,
	}
	if err := s.GenericAPIServer.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	// /placement's scheduling load is watched from the start and the
	// server is ready only once it holds every VM: warm before serving.
	s.GenericAPIServer.AddPostStartHookOrDie("banlieue-placement-load", func(genericapiserver.PostStartHookContext) error {
		vms.Placement.Warm()
		return nil
	})
	if err := s.GenericAPIServer.AddReadyzChecks(healthz.NamedCheck("banlieue-placement-load", func(*http.Request) error {
		if !vms.Placement.Warmed() {
			return fmt.Errorf("the scheduling load of /placement is not listed yet")
		}
		return nil
	})); err != nil {
		return nil, err
	}
	return s, nil
}
