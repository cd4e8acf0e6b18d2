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
// Command banlieue is banlieue's single binary; the subcommand selects the
// role: apiserver, controller, operator, provider BACKEND, bootstrap to install
// on a cluster, or dev for a local environment (not in release builds).
package main

import (
	"os"

	"github.com/spf13/cobra"
	// The release image has an empty base, without a CA bundle: Mozilla's
	// roots, embedded, verify a backend's certificate signed by a public CA
	// (Go uses them only where the system has none).
	_ "golang.org/x/crypto/x509roots/fallback"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/component-base/cli"

	"github.com/firestoned/banlieue/pkg/cmd/apiserver"
	"github.com/firestoned/banlieue/pkg/cmd/bootstrap"
	"github.com/firestoned/banlieue/pkg/cmd/controller"
	"github.com/firestoned/banlieue/pkg/cmd/operator"
	"github.com/firestoned/banlieue/pkg/cmd/provider"
)

// version is the release's, set at link time (-X main.version=...).
var version = "dev"

func main() {
	ctx := genericapiserver.SetupSignalContext()
	root := &cobra.Command{
		Use:     "banlieue",
		Short:   "One Kubernetes API for virtual machines on any backend",
		Version: version,
		// Subcommands only.
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	root.AddCommand(apiserver.NewCommand(ctx), bootstrap.NewCommand(ctx, version), controller.NewCommand(ctx), operator.NewCommand(ctx), provider.NewCommand(ctx))
	// The local environment, absent from release builds (-tags release):
	// the shipped image holds the product, not the harness and simulators.
	root.AddCommand(devCommands(ctx)...)
	os.Exit(cli.Run(root))
}
