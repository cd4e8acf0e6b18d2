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
// Package provider is "banlieue provider <class>": a backend's controllers
// for the Providers of one namespace (credentials are read there only).
package provider

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"strings"
	"time"

	registry "github.com/firestoned/banlieue/pkg/backends"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/cmd/flagenv"
	"github.com/firestoned/banlieue/pkg/controllers"
	providerctrl "github.com/firestoned/banlieue/pkg/controllers/provider"
	"github.com/firestoned/banlieue/pkg/images/fetch"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt"
	libvirtmachines "github.com/firestoned/banlieue/pkg/providers/libvirt/machinespec"
	"github.com/firestoned/banlieue/pkg/providers/proxmox"
	proxmoxmachines "github.com/firestoned/banlieue/pkg/providers/proxmox/machinespec"
	"github.com/firestoned/banlieue/pkg/providers/vsphere"
	vspheremachines "github.com/firestoned/banlieue/pkg/providers/vsphere/machinespec"
)

// NewCommand returns "banlieue provider".
func NewCommand(ctx context.Context) *cobra.Command {
	cmd := &cobra.Command{Use: "provider", Short: "Run a backend provider (vsphere, libvirt, proxmox)"}
	for _, b := range backends() {
		cmd.AddCommand(newBackendCommand(ctx, b))
	}
	return cmd
}

// backend is one backend's provider process: what the generic Provider,
// VMImage and machine reconcilers need of it.
type backend struct {
	class, title string
	// sessions returns the backend's session cache for the life of the
	// process; flags are the backend's own.
	sessions    func() sessionCache
	flags       func(*pflag.FlagSet)
	machine     providers.MachineKind
	image       providers.ImageKind
	credentials func(*corev1.Secret) (providers.Credentials, error)
}

// backends are the provider processes this binary can run.
func backends() []backend {
	return []backend{
		{
			class: "vsphere", title: "vSphere",
			sessions: func() sessionCache { return vsphereSessions{vsphere.NewSessions()} },
			machine:  vspheremachines.MachineKind(), image: vspheremachines.ImageKind(), credentials: vspheremachines.Credentials,
		},
		libvirtBackend(),
		proxmoxBackend(),
	}
}

func proxmoxBackend() backend {
	opts := proxmox.Options{}
	return backend{
		class: "proxmox", title: "Proxmox VE",
		sessions: func() sessionCache { return proxmoxSessions{proxmox.NewSessions(opts)} },
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&opts.ISOStorage, "iso-storage", "", "Storage of each node cloud-init seed ISOs are uploaded to (the node's first storage with iso content when empty).")
			f.DurationVar(&opts.TaskPoll, "task-poll", 500*time.Millisecond, "How often a Proxmox VE task's status is read while it is waited for.")
		},
		machine: proxmoxmachines.MachineKind(), image: proxmoxmachines.ImageKind(), credentials: proxmoxmachines.Credentials,
	}
}

func libvirtBackend() backend {
	opts := libvirt.Options{}
	return backend{
		class: "libvirt", title: "libvirt",
		sessions: func() sessionCache { return libvirt.NewSessions(opts) },
		flags: func(f *pflag.FlagSet) {
			f.StringVar(&opts.DomainType, "domain-type", "kvm", "The libvirt domain type of new domains: kvm, or qemu (software emulation) where KVM does not work.")
			f.DurationVar(&opts.ShutdownGrace, "shutdown-grace", 2*time.Minute, "How long a TrySoft power-off waits for a guest after the ACPI request before its domain is destroyed, for machines that set no powerOffGraceSeconds.")
		},
		machine: libvirtmachines.MachineKind(), image: libvirtmachines.ImageKind(), credentials: libvirtmachines.Credentials,
	}
}

// sessionCache is a backend's session cache (providers.Sessions).
type sessionCache interface {
	Get(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error)
	Forget(owner string)
}

type vsphereSessions struct{ *vsphere.Sessions }

func (s vsphereSessions) Get(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error) {
	c, err := s.Sessions.Get(ctx, owner, conn)
	if err != nil {
		return nil, err
	}
	return c, nil
}

type proxmoxSessions struct{ *proxmox.Sessions }

func (s proxmoxSessions) Get(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error) {
	c, err := s.Sessions.Get(ctx, owner, conn)
	if err != nil {
		return nil, err
	}
	return c, nil
}

// connector logs in through sessions and bounds every call of the
// backend it returns, timing it under class.
func connector(sessions sessionCache, class string, d providers.Deadlines) providerctrl.Connector {
	return func(ctx context.Context, owner string, conn providers.Connection) (providers.Backend, error) {
		b, err := sessions.Get(ctx, owner, conn)
		if err != nil {
			return nil, err
		}
		return providers.Bounded(b, class, d), nil
	}
}

func newBackendCommand(ctx context.Context, b backend) *cobra.Command {
	var (
		clientOpts         = controllers.DefaultClientOptions()
		serving            = controllers.Serving{MetricsAddr: ":8443", HealthAddr: ":8081"}
		namespace          string
		leaderElect        bool
		only               string
		imageDeny          []string
		importsPerProvider int
		resync             time.Duration
		workers            int
		serviceAccount     string
		shared             = placement.DefaultSharedProviderNamespace
		deadlines          providers.Deadlines
		reconcileLimit     time.Duration
		consoles           consoleFlags
	)
	cmd := &cobra.Command{
		Use:          b.class,
		Short:        fmt.Sprintf("Reconcile the %s Providers of one namespace (inventory, failure domains, image checks) and drive their machines", b.title),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The Deployment's ConfigMap banlieue-provider-CLASS-config
			// (envFrom) gives the flags' defaults.
			if err := flagenv.Apply(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			if err := controllers.ValidateSharedProviderNamespace(shared); err != nil {
				return err
			}
			ctrl.SetLogger(klog.NewKlogr())
			cfg, err := clientOpts.Config()
			if err != nil {
				return err
			}
			mgr, err := serving.NewManager(cfg, ctrl.Options{
				// No reconcile runs unbounded: a backend that stops
				// answering fails it instead of holding a worker.
				Controller: config.Controller{ReconciliationTimeout: reconcileLimit},
				// Watches stay in the install namespace; machines live
				// in the VMs' namespaces. Secrets and ConfigMaps are never
				// cached (that would list and watch them): each is read by
				// name when needed, which is all this identity may do.
				Client:                  client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}, &corev1.ConfigMap{}}}},
				Cache:                   cacheOptions(namespace, only, b.machine.New()),
				LeaderElection:          leaderElect,
				LeaderElectionID:        leaseName(b.class, only),
				LeaderElectionNamespace: namespace,
			})
			if err != nil {
				return err
			}
			sessions := b.sessions()
			r := &providerctrl.Reconciler{Client: mgr.GetClient(), Class: b.class, Only: only, Resync: resync,
				Connect: connector(sessions, b.class, deadlines), Forget: sessions.Forget, Kind: b.machine, Credentials: b.credentials,
				Snapshots: snapshotLimits(b.class)}
			if err := r.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("provider controller: %w", err)
			}
			guard, err := imageGuard(imageDeny)
			if err != nil {
				return err
			}
			images := &providerctrl.ImageReconciler{
				Client: mgr.GetClient(), Class: b.class, Kind: b.image, Namespace: namespace, Resync: resync, Providers: r,
				Reader: mgr.GetAPIReader(), Guard: guard, ImportsPerProvider: importsPerProvider,
				Events: mgr.GetEventRecorder("banlieue-provider-" + b.class),
			}
			if err := images.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("image controller: %w", err)
			}
			machines := &providerctrl.MachineReconciler{
				Client: mgr.GetClient(), Reader: mgr.GetAPIReader(), Kind: b.machine, Class: b.class, Namespace: namespace,
				Providers: r, Poll: 5 * time.Second, Workers: workers, Events: mgr.GetEventRecorder("banlieue-provider-" + b.class),
				Identity: serviceAccount, SharedProviderNamespace: shared,
			}
			if err := machines.SetupWithManager(mgr); err != nil {
				return fmt.Errorf("machine controller: %w", err)
			}
			if r.Console, err = consoles.serve(mgr, cfg, machines.OpenConsole, machines.WebConsoleURL); err != nil {
				return fmt.Errorf("console endpoint: %w", err)
			}
			klog.InfoS("Starting the provider", "class", b.class, "namespace", namespace, "provider", only)
			return mgr.Start(cmd.Context())
		},
	}
	cmd.SetContext(ctx)
	f := cmd.Flags()
	clientOpts.AddFlags(f)
	f.StringVar(&namespace, "namespace", "banlieue-system", "The namespace whose Providers (and credentials) this process serves.")
	controllers.AddSharedProviderNamespaceFlag(f, &shared)
	f.StringVar(&only, "provider", "", "Serve this Provider of the namespace only (the operator's per-Provider workloads, whose identity may read no other): its Provider, machines and image checks.")
	f.BoolVar(&leaderElect, "leader-elect", true, "Take turns with other replicas through a Lease.")
	f.StringVar(&serviceAccount, "service-account", "banlieue-system:banlieue-provider-"+b.class,
		"NAMESPACE:NAME of the ServiceAccount this process runs as: the subject a namespace binds to banlieue-provider-userdata to let it read user data there (named in UserDataForbidden messages).")
	f.IntVar(&workers, "machine-workers", 8, "How many machines are reconciled at once (the backend runs their tasks in parallel).")
	f.DurationVar(&resync, "resync", 5*time.Minute, "How often a Provider's inventory is walked again.")
	f.DurationVar(&deadlines.Call, "call-timeout", providers.DefaultCallTimeout, "The longest a backend call that awaits no task (inventory, image check, guest address) may take.")
	f.DurationVar(&deadlines.Machine, "machine-timeout", providers.DefaultMachineTimeout, "The longest creating, converging or deleting one VM may take, its tasks included.")
	f.DurationVar(&reconcileLimit, "reconcile-timeout", providers.DefaultMachineTimeout+time.Minute, "The longest one reconcile may take (a machine's backend call and its Kubernetes writes).")
	f.StringSliceVar(&imageDeny, "image-deny-cidrs", nil, "Address ranges a VMImage's spec.import.url (or a redirect) may not reach, e.g. the cluster's service and pod networks; link-local ranges (the cloud metadata service) are always refused.")
	f.IntVar(&importsPerProvider, "imports-per-provider", providerctrl.DefaultImportsPerProvider, "How many image imports a Provider runs at once.")
	serving.AddFlags(f)
	consoles.addFlags(f)
	if b.flags != nil {
		b.flags(f)
	}
	return cmd
}

// cacheOptions watch the install namespace (machines live in the VMs'
// namespaces). A process serving one Provider watches that Provider alone,
// by a metadata.name field selector, which RBAC authorizes as a request
// for that name: its Role names the Provider in resourceNames.
func cacheOptions(namespace, only string, machine client.Object) cache.Options {
	o := cache.Options{
		DefaultNamespaces: map[string]cache.Config{namespace: {}},
		ByObject:          map[client.Object]cache.ByObject{machine: {Namespaces: map[string]cache.Config{cache.AllNamespaces: {}}}},
	}
	if only != "" {
		o.ByObject[&v1alpha1.Provider{}] = cache.ByObject{Namespaces: map[string]cache.Config{namespace: {}}, Field: fields.OneTermEqualSelector("metadata.name", only)}
	}
	return o
}

// LeaseName is the leader-election Lease of the providers of class
// (serving one Provider, if only is set).
func leaseName(class, only string) string {
	if only == "" {
		return "banlieue-provider-" + class
	}
	return "banlieue-provider-" + class + "-" + only
}

// imageGuard is where image imports may fetch from: nowhere in deny.
func imageGuard(deny []string) (fetch.Guard, error) {
	var g fetch.Guard
	for _, c := range deny {
		p, err := netip.ParsePrefix(strings.TrimSpace(c))
		if err != nil {
			return g, fmt.Errorf("--image-deny-cidrs: %w", err)
		}
		g.Deny = append(g.Deny, p)
	}
	return g, nil
}

// snapshotLimits are what class's backend snapshots can do, as its
// registration answers them; nil when it takes none.
func snapshotLimits(class string) *providers.SnapshotLimits {
	kinds, err := registry.Infrastructure()
	if err != nil {
		return nil
	}
	if l, ok := kinds.SnapshotLimits(class); ok {
		return &l
	}
	return nil
}
