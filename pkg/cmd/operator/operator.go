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
// Package operator is "banlieue operator": it runs each Provider's provider
// workload as its ProviderClass describes (pkg/controllers/operator).
package operator

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/cmd/flagenv"
	"github.com/firestoned/banlieue/pkg/controllers"
	operatorctrl "github.com/firestoned/banlieue/pkg/controllers/operator"
	"github.com/firestoned/banlieue/pkg/placement"
	"github.com/firestoned/banlieue/pkg/workload"
)

// NewCommand returns "banlieue operator".
func NewCommand(ctx context.Context) *cobra.Command {
	var (
		clientOpts  = controllers.DefaultClientOptions()
		serving     = controllers.Serving{MetricsAddr: ":8443", HealthAddr: ":8081"}
		namespaces  []string
		leaderElect bool
		leaseNS     string
		shared      = placement.DefaultSharedProviderNamespace
	)
	cmd := &cobra.Command{
		Use:          "operator",
		Short:        "Run each Provider's provider workload (Deployment, metrics Service, ServiceAccount, RBAC) as its ProviderClass describes",
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
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
				Cache:                   cacheOptions(namespaces),
				LeaderElection:          leaderElect,
				LeaderElectionID:        "banlieue-operator",
				LeaderElectionNamespace: leaseNS,
			})
			if err != nil {
				return err
			}
			if err := (&operatorctrl.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), SharedProviderNamespace: shared}).SetupWithManager(mgr); err != nil {
				return fmt.Errorf("operator controller: %w", err)
			}
			klog.InfoS("Starting the operator", "namespaces", namespaces, "fieldManager", workload.FieldManager)
			return mgr.Start(cmd.Context())
		},
	}
	cmd.SetContext(ctx)
	f := cmd.Flags()
	clientOpts.AddFlags(f)
	serving.AddFlags(f)
	f.StringSliceVar(&namespaces, "namespaces", []string{"banlieue-system"},
		"Namespaces whose provider workloads this operator manages: those its ProviderClasses name (its identity is bound to banlieue-operator-namespace there).")
	f.BoolVar(&leaderElect, "leader-elect", true, "Take turns with other replicas through a Lease.")
	f.StringVar(&leaseNS, "leader-election-namespace", "banlieue-system", "Namespace of the leader-election Lease.")
	controllers.AddSharedProviderNamespaceFlag(f, &shared)
	return cmd
}

// cacheOptions watch only what the operator made (its label), in the
// namespaces it manages; Providers and ProviderClasses everywhere.
func cacheOptions(namespaces []string) cache.Options {
	ours := labels.SelectorFromSet(labels.Set{workload.ManagedByLabel: workload.FieldManager})
	inNamespaces := map[string]cache.Config{}
	for _, ns := range namespaces {
		inNamespaces[ns] = cache.Config{}
	}
	namespaced := cache.ByObject{Namespaces: inNamespaces, Label: ours}
	return cache.Options{ByObject: map[client.Object]cache.ByObject{
		&appsv1.Deployment{}:     namespaced,
		&corev1.ServiceAccount{}: namespaced,
		&rbacv1.Role{}:           namespaced,
		&rbacv1.RoleBinding{}:    namespaced,
		&corev1.Service{}:        namespaced,
	}}
}
