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
// Package dev is "banlieue dev": a long-lived local environment (etcd,
// kube-apiserver, kube-controller-manager and banlieue aggregated into it)
// on embedded defaults, with the seed examples applied.
package dev

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/firestoned/banlieue/artifacts"
	seedexamples "github.com/firestoned/banlieue/artifacts/examples"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
	"github.com/firestoned/banlieue/pkg/providers/proxmox/pvesim"
	"github.com/firestoned/banlieue/pkg/providers/vsphere/vcsim"
)

// NewCommand returns "banlieue dev".
func NewCommand(ctx context.Context) *cobra.Command {
	var (
		dir, binDir string
		noExamples  bool
		noVCSim     bool
		noLibvirt   bool
		noProxmox   bool
		noNode      bool
		guestImage  string
	)
	cmd := &cobra.Command{
		Use:   "dev",
		Short: "Run a local Kubernetes control plane with banlieue aggregated into it (Ctrl-C stops it)",
		Long: "Starts etcd, kube-apiserver, kube-controller-manager and banlieue as processes on loopback, " +
			"registers banlieue's APIService, applies the install RBAC and the seed examples, starts a simulated vCenter (vcsim) with the " +
			"vSphere provider and a simulated Proxmox VE cluster (pvesim) with the Proxmox provider, and prints a KUBECONFIG. " +
			"Data stays in --dir, so a restart keeps your objects. Binaries come from --bin-dir ('make tools').",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if binDir == "" {
				exe, err := os.Executable()
				if err != nil {
					return err
				}
				binDir = filepath.Dir(exe)
			}
			if guestImage == "" {
				guestImage = filepath.Join(binDir, "guest", "guest.qcow2")
			}
			return run(cmd.Context(), cmd.OutOrStdout(), dir, binDir, !noExamples, !noVCSim, !noLibvirt, !noProxmox, !noNode, guestImage)
		},
	}
	cmd.SetContext(ctx)
	cmd.Flags().StringVar(&dir, "dir", ".banlieue", "Where data, certificates, kubeconfigs and logs are kept.")
	cmd.Flags().StringVar(&binDir, "bin-dir", "", "Folder with etcd, kube-apiserver, kube-controller-manager, kubectl and banlieue (default: this binary's folder).")
	cmd.Flags().BoolVar(&noExamples, "no-examples", false, "Do not apply the seed examples.")
	cmd.Flags().BoolVar(&noVCSim, "no-vcsim", false, "Do not start the simulated vCenter and the vSphere provider.")
	cmd.Flags().BoolVar(&noProxmox, "no-proxmox", false, "Do not start the simulated Proxmox VE cluster and the Proxmox provider.")
	cmd.Flags().BoolVar(&noLibvirt, "no-libvirt", false, "Do not start a private libvirtd and the libvirt provider (started when libvirtd and QEMU are installed and this runs as root).")
	cmd.Flags().BoolVar(&noNode, "no-node", false, "Do not start a real node (the kubelet, containerd and a CNI bridge; started when this runs as root and make tools built and installed its parts) on which Deployments run as pods.")
	cmd.Flags().StringVar(&guestImage, "guest-image", "", "The qcow2 image the local libvirt VM boots (default: guest/guest.qcow2 beside the binaries, built by make run).")
	return cmd
}

func run(ctx context.Context, out io.Writer, dir, binDir string, examples, simulate, withLibvirt, withProxmox, withNode bool, guestImage string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	start := time.Now()
	fmt.Fprintf(out, "banlieue dev: starting etcd, kube-apiserver, kube-controller-manager and banlieue (data in %s)...\n", abs)
	var images []string
	noNode := "--no-node"
	if withNode {
		images, noNode = nodeImages(binDir, filepath.Join(abs, "images"))
	}
	pods := images != nil
	controllers := 1 // as a process, without a node
	if pods {
		controllers = 0 // the shipped Deployment
	}
	env, err := devenv.Start(ctx, devenv.Config{
		Dir:         abs,
		BinDir:      binDir,
		Durable:     true,
		Setup:       InstallRBAC,
		Controllers: controllers,
		Node:        pods,
		NodeImages:  images,
	})
	if err != nil {
		return fmt.Errorf("%w (logs in %s)", err, filepath.Join(abs, "logs"))
	}
	defer func() {
		env.Stop()
		for _, l := range env.NodeLeftovers() {
			fmt.Fprintf(out, "banlieue dev: the node left the machine changed: %s\n", l)
		}
	}()
	comps := &components{env: env, pods: pods}
	if pods {
		// Beside the processes' logs: the pods' (kubectl logs reads them too).
		if err := env.FollowLogs(devenv.Namespace, "app.kubernetes.io/name=banlieue", "pod"); err != nil {
			return err
		}
	}
	if err := comps.controller(ctx); err != nil {
		return err
	}
	var sim *vcsim.Simulator
	if simulate {
		if sim, err = startSimulator(ctx, env, comps); err != nil {
			return err
		}
		defer sim.Close()
	}
	if examples {
		names, err := devenv.YAMLFiles(seedexamples.FS, ".")
		if err != nil {
			return err
		}
		if sim != nil {
			// startSimulator created the seed Provider pointing at the simulator.
			names = slices.DeleteFunc(names, func(n string) bool { return n == seedProviderFile })
		}
		if err := devenv.ApplyFiles(ctx, env.Admin, seedexamples.FS, names...); err != nil {
			return fmt.Errorf("applying the examples: %w", err)
		}
		// The seed guide's db-prod-02 carries user data: its namespace
		// consents, as the guide's administrator does, to the providers
		// reading it (docs/security.md).
		if err := consentToUserData(ctx, env, "vsphere", "libvirt", "proxmox"); err != nil {
			return err
		}
	}
	if sim != nil {
		if err := comps.provider(ctx, "vsphere", nil); err != nil {
			return fmt.Errorf("starting the vSphere provider: %w", err)
		}
	}
	var pve *pvesim.Simulator
	if withProxmox {
		if pve, err = startProxmox(ctx, env, comps); err != nil {
			return fmt.Errorf("starting the Proxmox VE simulator: %w", err)
		}
		defer pve.Close()
		if err := comps.provider(ctx, "proxmox", nil); err != nil {
			return fmt.Errorf("starting the Proxmox provider: %w", err)
		}
	}
	var daemon *libvirtd.Daemon
	var noLibvirt string
	if withLibvirt {
		fmt.Fprintln(out, "banlieue dev: starting a private libvirtd...")
		var stop func()
		if daemon, stop, noLibvirt, err = startLibvirt(ctx, env, comps, abs, guestImage); err != nil {
			return fmt.Errorf("starting libvirtd: %w", err)
		}
		if daemon != nil {
			defer stop()
			if err := comps.provider(ctx, "libvirt", map[string]string{"BANLIEUE_DOMAIN_TYPE": "qemu", "BANLIEUE_SHUTDOWN_GRACE": "30s"}); err != nil {
				return fmt.Errorf("starting the libvirt provider: %w", err)
			}
		}
	}
	if err := comps.rolledOut(ctx); err != nil {
		return err
	}
	kubectl := filepath.Join(binDir, "kubectl")
	fmt.Fprintf(out, readyMessage, time.Since(start).Round(100*time.Millisecond), env.KubeAPIServerURL, devenv.APIServiceName, env.Logs(),
		env.AdminKubeconfig, kubectl, kubectl, kubectl)
	if pods {
		fmt.Fprintf(out, nodeMessage, env.NodeName(), devenv.ReleaseImage, kubectl, kubectl)
	} else {
		fmt.Fprintf(out, noNodeMessage, noNode)
	}
	if sim != nil {
		fmt.Fprintf(out, simulatorMessage, sim.Endpoint, kubectl, kubectl)
	}
	if pve != nil {
		fmt.Fprintf(out, proxmoxMessage, pve.URL, proxmoxProvider, proxmoxImage, kubectl, proxmoxProvider)
	}
	switch {
	case daemon != nil:
		fmt.Fprintf(out, libvirtMessage, libvirtProvider, libvirtVM, libvirtImage, kubectl, libvirtImage, kubectl, kubectl, libvirtVM,
			daemon.SerialLogPath(providers.BackendName(devenv.Namespace, libvirtVM)))
	case withLibvirt:
		fmt.Fprintf(out, "\nNo local libvirt host: %s.\n", noLibvirt)
	}
	fmt.Fprint(out, stopMessage)
	<-ctx.Done()
	klog.InfoS("Stopping banlieue dev")
	return nil
}

const readyMessage = `
banlieue is up in %s: kube-apiserver %s, banlieue behind it (APIService %s).
Logs: %s

  export KUBECONFIG=%s
  %s get vm,provider,vmclass,vmimage -A
  %s explain virtualmachine.spec.hardwareOverride
  %s get --raw /apis/banlieue.io/v1alpha1/namespaces/banlieue-system/virtualmachines/db-prod-02/resolved
`

const simulatorMessage = `
A simulated vCenter (govmomi's vcsim: 2 datacenters x 3 clusters, template
ubuntu-22.04-cloudinit in each) runs at %s; the
seed Provider prod-vsphere points at it and the vSphere provider drives it:

  %s get provider,vm,vspheremachine -n banlieue-system
  %s wait -n banlieue-system --for=condition=Ready vm/db-prod-01 --timeout=2m
`

const stopMessage = `
Ctrl-C stops everything.
`

// InstallRBAC applies the namespace, ServiceAccounts and RBAC of
// artifacts/deploy/base (banlieue runs with exactly the permissions an
// installed server and controller have) and the infrastructure CRDs.
func InstallRBAC(ctx context.Context, adminKubeconfig string) error {
	cfg, err := clientConfig(adminKubeconfig)
	if err != nil {
		return err
	}
	if err := devenv.ApplyFiles(ctx, cfg, artifacts.Deploy,
		"deploy/base/namespace.yaml", "deploy/base/serviceaccount.yaml",
		"deploy/base/rbac-apiserver.yaml", "deploy/base/rbac-users.yaml", "deploy/base/rbac-controller.yaml", "deploy/base/rbac-userdata.yaml",
		"deploy/base/rbac-metrics.yaml", "deploy/providers/vsphere/rbac.yaml", "deploy/providers/libvirt/rbac.yaml", "deploy/providers/proxmox/rbac.yaml",
		"deploy/operator/rbac.yaml", "deploy/operator/rbac-vsphere.yaml", "deploy/operator/rbac-libvirt.yaml",
		"deploy/operator/rbac-proxmox.yaml", "deploy/operator/policy.yaml"); err != nil {
		return err
	}
	crds, err := devenv.YAMLFiles(artifacts.CRDs, "crds")
	if err != nil {
		return err
	}
	return devenv.ApplyFiles(ctx, cfg, artifacts.CRDs, crds...)
}

func clientConfig(kubeconfig string) (*restclient.Config, error) {
	return clientcmd.BuildConfigFromFlags("", kubeconfig)
}

// consentToUserData binds banlieue-provider-userdata in the environment's
// namespace to each class's provider identity: the namespace consents to
// its VMs' user data being read (artifacts/deploy/base/rbac-userdata.yaml).
func consentToUserData(ctx context.Context, env *devenv.Env, classes ...string) error {
	c, err := adminClient(env)
	if err != nil {
		return err
	}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "banlieue-provider-userdata", Namespace: devenv.Namespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, c, binding, func() error {
		binding.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "banlieue-provider-userdata"}
		binding.Subjects = nil
		for _, class := range classes {
			binding.Subjects = append(binding.Subjects, rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: "banlieue-provider-" + class, Namespace: devenv.Namespace})
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("consenting to user data in %s: %w", devenv.Namespace, err)
	}
	return nil
}
