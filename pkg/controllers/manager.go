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
// Package controllers assembles banlieue's core controllers (VirtualMachine
// scheduling and lifecycle, every backend's InfraCluster aggregation) into one
// controller-runtime manager with leader election. They reach banlieue.io
// through kube-apiserver's aggregation layer like any other client.
package controllers

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	restclient "k8s.io/client-go/rest"
	ipamv1 "sigs.k8s.io/cluster-api/api/ipam/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/backends"
	"github.com/firestoned/banlieue/pkg/controllers/capispread"
	"github.com/firestoned/banlieue/pkg/controllers/infracluster"
	"github.com/firestoned/banlieue/pkg/controllers/ippool"
	"github.com/firestoned/banlieue/pkg/controllers/snapshot"
	"github.com/firestoned/banlieue/pkg/controllers/virtualmachine"
	"github.com/firestoned/banlieue/pkg/infrastructure"
)

// Names of the controllers, for --controllers.
const (
	VirtualMachine = "virtualmachine"
	// InfraCluster serves every registered backend's InfraCluster kind.
	InfraCluster = "infracluster"
	// legacyInfraCluster is InfraCluster's name from when only vSphere had
	// an InfraCluster, still accepted so existing --controllers lists keep
	// working.
	legacyInfraCluster = "vspherecluster"
	// CAPISpread gives Cluster API machines their failure domains.
	CAPISpread = "capispread"
	// IPPool serves IPAddressClaims of banlieue's IPPools.
	IPPool = "ippool"
	// Snapshot serves VirtualMachineSnapshots and VirtualMachineRestores
	// through the VMs' machines.
	Snapshot = "snapshot"
)

// All is every core controller.
var All = []string{VirtualMachine, InfraCluster, CAPISpread, IPPool, Snapshot}

// Options configure the manager.
type Options struct {
	// Controllers to run (names from All).
	Controllers []string
	// LeaderElection makes replicas take turns; only the leader acts.
	LeaderElection          bool
	LeaderElectionNamespace string
	// SharedProviderNamespace holds the Providers every namespace's VMs and
	// InfraClusters may use (--shared-provider-namespace).
	SharedProviderNamespace string
	// Serving: metrics, probes, pprof.
	Serving
}

// protobufOnce registers banlieue.io with controller-runtime's protobuf
// types once per process.
var protobufOnce = sync.OnceValue(func() error { return apiutil.AddToProtobufScheme(v1alpha1.AddToScheme) })

// Scheme knows every type the controllers read and write. banlieue serves
// its group in protobuf (generated.proto), so the processes' clients and
// caches read and write banlieue.io in protobuf, as Kubernetes' own types,
// instead of JSON: decoding JSON was a third of the controller's CPU while
// provisioning. The infrastructure CRDs stay JSON (CRDs serve no protobuf).
func Scheme() (*runtime.Scheme, error) {
	if err := protobufOnce(); err != nil {
		return nil, err
	}
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, v1alpha1.AddToScheme, infrav1.AddToScheme, ipamv1.AddToScheme} {
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// NewManager builds a manager running the selected controllers.
func NewManager(cfg *restclient.Config, o Options) (ctrl.Manager, error) {
	mgr, err := o.Serving.NewManager(cfg, ctrl.Options{
		LeaderElection:          o.LeaderElection,
		LeaderElectionID:        "banlieue-controllers",
		LeaderElectionNamespace: o.LeaderElectionNamespace,
	})
	if err != nil {
		return nil, err
	}
	clustersServed := false
	for _, name := range o.Controllers {
		switch name {
		case VirtualMachine:
			var kinds *infrastructure.Registry
			if kinds, err = backends.Infrastructure(); err == nil {
				err = (&virtualmachine.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("banlieue-scheduler"), Infrastructure: kinds, SharedProviderNamespace: o.SharedProviderNamespace}).SetupWithManager(mgr)
			}
		case InfraCluster, legacyInfraCluster:
			if clustersServed {
				continue // named under both names
			}
			clustersServed = true
			var kinds *infrastructure.Registry
			if kinds, err = backends.Infrastructure(); err == nil {
				for _, kind := range kinds.Kinds() {
					if kind.Cluster.Kind == "" {
						continue // the backend has no InfraCluster
					}
					r := &infracluster.Reconciler{Client: mgr.GetClient(), Kind: kind, SharedProviderNamespace: o.SharedProviderNamespace}
					if err = r.SetupWithManager(mgr); err != nil {
						break
					}
				}
			}
		case Snapshot:
			var kinds *infrastructure.Registry
			if kinds, err = backends.Infrastructure(); err == nil {
				err = (&snapshot.Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("banlieue-snapshot"), Infrastructure: kinds}).SetupWithManager(mgr)
			}
		case IPPool:
			err = (&ippool.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("banlieue-ippool")}).SetupWithManager(mgr)
		case CAPISpread:
			var kinds *infrastructure.Registry
			if kinds, err = backends.Infrastructure(); err == nil {
				for _, kind := range kinds.Kinds() {
					r := &capispread.Reconciler{Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Kind: kind, Recorder: mgr.GetEventRecorder("banlieue-capispread")}
					if err = r.SetupWithManager(mgr); err != nil {
						break
					}
				}
			}
		default:
			err = fmt.Errorf("unknown controller %q (known: %v)", name, All)
		}
		if err != nil {
			return nil, fmt.Errorf("controller %s: %w", name, err)
		}
	}
	return mgr, nil
}
