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
// Package controller is "banlieue controller": the core controllers as a
// standalone process (several replicas take turns through leader election).
package controller

import (
	"context"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/firestoned/banlieue/pkg/cmd/flagenv"
	"github.com/firestoned/banlieue/pkg/controllers"
	"github.com/firestoned/banlieue/pkg/placement"
)

// NewCommand returns "banlieue controller".
func NewCommand(ctx context.Context) *cobra.Command {
	var (
		client = controllers.DefaultClientOptions()
		o      = controllers.Options{Serving: controllers.Serving{MetricsAddr: ":8443", HealthAddr: ":8081"}, LeaderElection: true, LeaderElectionNamespace: "banlieue-system",
			SharedProviderNamespace: placement.DefaultSharedProviderNamespace}
	)
	cmd := &cobra.Command{
		Use:          "controller",
		Short:        "Run banlieue's core controllers: scheduling, each backend's infrastructure machines, status mirroring, migration, IP pools, VSphereCluster aggregation",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := flagenv.Apply(cmd.Flags(), os.LookupEnv); err != nil {
				return err
			}
			if err := controllers.ValidateSharedProviderNamespace(o.SharedProviderNamespace); err != nil {
				return err
			}
			ctrl.SetLogger(klog.NewKlogr())
			cfg, err := client.Config()
			if err != nil {
				return err
			}
			mgr, err := controllers.NewManager(cfg, o)
			if err != nil {
				return err
			}
			klog.InfoS("Starting banlieue controllers", "controllers", o.Controllers, "leaderElection", o.LeaderElection, "sharedProviderNamespace", o.SharedProviderNamespace)
			return mgr.Start(cmd.Context())
		},
	}
	cmd.SetContext(ctx)
	f := cmd.Flags()
	client.AddFlags(f)
	f.StringSliceVar(&o.Controllers, "controllers", controllers.All, "Controllers to run.")
	f.BoolVar(&o.LeaderElection, "leader-elect", o.LeaderElection, "Take turns with other replicas through a Lease.")
	f.StringVar(&o.LeaderElectionNamespace, "leader-election-namespace", o.LeaderElectionNamespace, "Namespace of the leader-election Lease.")
	controllers.AddSharedProviderNamespaceFlag(f, &o.SharedProviderNamespace)
	o.Serving.AddFlags(f)
	return cmd
}
