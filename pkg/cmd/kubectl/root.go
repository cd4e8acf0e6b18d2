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

// Package kubectl is the kubectl banlieue plugin (kubectl-banlieue): the
// commands kubectl alone cannot give, on the banlieue.io API: a VM's
// serial console, power and migration requests followed to their end,
// snapshots and restores, and the resolved, placement and image-progress
// views as tables.
package kubectl

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	banlieuev1alpha1 "github.com/firestoned/banlieue/pkg/generated/clientset/versioned/typed/banlieue/v1alpha1"
)

// Streams are where a command reads and writes (the process's, or a
// test's).
type Streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// OSStreams are the process's standard streams.
func OSStreams() Streams { return Streams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr} }

// config is how every command reaches the cluster: the kubeconfig as
// kubectl loads it ($KUBECONFIG, ~/.kube/config, --kubeconfig) with
// kubectl's overriding flags (--context, -n/--namespace, --as, ...).
type config struct {
	loading   *clientcmd.ClientConfigLoadingRules
	overrides *clientcmd.ConfigOverrides
	client    clientcmd.ClientConfig
}

func (c *config) clientConfig() clientcmd.ClientConfig {
	if c.client == nil {
		c.client = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(c.loading, c.overrides)
	}
	return c.client
}

// REST is the client configuration.
func (c *config) REST() (*rest.Config, error) { return c.clientConfig().ClientConfig() }

// Namespace is -n, else the context's namespace, else default.
func (c *config) Namespace() (string, error) {
	ns, _, err := c.clientConfig().Namespace()
	return ns, err
}

// banlieue is the typed client of banlieue.io/v1alpha1.
func (c *config) banlieue() (banlieuev1alpha1.BanlieueV1alpha1Interface, error) {
	cfg, err := c.REST()
	if err != nil {
		return nil, err
	}
	cs, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return cs.BanlieueV1alpha1(), nil
}

// vms is the typed VirtualMachine client of the namespace in effect.
func (c *config) vms() (banlieuev1alpha1.VirtualMachineInterface, string, error) {
	ns, err := c.Namespace()
	if err != nil {
		return nil, "", err
	}
	b, err := c.banlieue()
	if err != nil {
		return nil, "", err
	}
	return b.VirtualMachines(ns), ns, nil
}

// NewCommand is kubectl banlieue with its subcommands.
func NewCommand(streams Streams) *cobra.Command {
	cfg := &config{loading: clientcmd.NewDefaultClientConfigLoadingRules(), overrides: &clientcmd.ConfigOverrides{}}
	root := &cobra.Command{
		Use:   "kubectl-banlieue",
		Short: "Consoles, power, migration, snapshots and placement of banlieue virtual machines",
		Long: `kubectl banlieue works on banlieue.io VirtualMachines and VMImages where
kubectl alone does not: a VM's serial console (a vSphere VM's web console
URL), power and migration requests followed until they are done, snapshots
taken and restored, and the resolved, placement and image-progress
subresources as tables. It reads the kubeconfig as kubectl does.`,
		Annotations: map[string]string{
			// Help and usage say what a user types.
			cobra.CommandDisplayNameAnnotation: "kubectl banlieue",
		},
		// main prints the error once, as kubectl does; usage is for
		// --help, not for every failed request.
		SilenceErrors: true,
		SilenceUsage:  true,
	}
	root.SetIn(streams.In)
	root.SetOut(streams.Out)
	root.SetErr(streams.ErrOut)
	flags := root.PersistentFlags()
	flags.StringVar(&cfg.loading.ExplicitPath, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use.")
	clientcmd.BindOverrideFlags(cfg.overrides, flags, clientcmd.RecommendedConfigOverrideFlags(""))

	root.AddCommand(
		newConsoleCommand(cfg, streams),
		newWebConsoleCommand(cfg, streams),
		newPowerCommand(cfg, streams, "start", "PoweredOn", "Power a VM on"),
		newPowerCommand(cfg, streams, "stop", "PoweredOff", "Power a VM off"),
		newPowerCommand(cfg, streams, "suspend", "Suspended", "Suspend a VM (its memory saved)"),
		newRestartCommand(cfg, streams),
		newMigrateCommand(cfg, streams),
		newResolvedCommand(cfg, streams),
		newPlacementCommand(cfg, streams),
		newImagesCommand(cfg, streams),
		newSnapshotCommand(cfg, streams),
		newSnapshotsCommand(cfg, streams),
		newRestoreCommand(cfg, streams),
	)
	return root
}

// completeVMs completes the first argument with the names of the
// VirtualMachines in the namespace in effect, listed through the API.
func completeVMs(cfg *config) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		vms, _, err := cfg.vms()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := vms.List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(list.Items))
		for _, vm := range list.Items {
			if strings.HasPrefix(vm.Name, prefix) {
				names = append(names, vm.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// completeImages completes the first argument with VMImage names.
func completeImages(cfg *config) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, prefix string) ([]string, cobra.ShellCompDirective) {
		if len(args) > 0 {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		b, err := cfg.banlieue()
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		list, err := b.VMImages().List(cmd.Context(), metav1.ListOptions{})
		if err != nil {
			return nil, cobra.ShellCompDirectiveError
		}
		names := make([]string, 0, len(list.Items))
		for _, img := range list.Items {
			if strings.HasPrefix(img.Name, prefix) {
				names = append(names, img.Name)
			}
		}
		return names, cobra.ShellCompDirectiveNoFileComp
	}
}

// Execute runs the command line and returns the process's exit code,
// having printed any error as kubectl does.
func Execute(ctx context.Context, args []string, streams Streams) int {
	cmd := NewCommand(streams)
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintf(streams.ErrOut, "error: %v\n", err)
		return 1
	}
	return 0
}
