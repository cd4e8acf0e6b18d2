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
// Package bootstrap is "banlieue bootstrap": it installs banlieue on a
// cluster by server-side apply (field manager banlieue.io/bootstrap) from
// the manifests of artifacts/deploy, rendered by pkg/bootstrap.
package bootstrap

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/firestoned/banlieue/pkg/apply"
	"github.com/firestoned/banlieue/pkg/bootstrap"
)

// common are the flags of every bootstrap command.
type common struct {
	kubeconfig, context string
	namespace           string
	version, image      string
	dryRun              string
	wait                bool
	timeout             time.Duration
}

func (c *common) addFlags(f *pflag.FlagSet, version string) {
	f.StringVar(&c.kubeconfig, "kubeconfig", "", "kubeconfig of the cluster ($KUBECONFIG or ~/.kube/config when empty).")
	f.StringVar(&c.context, "context", "", "kubeconfig context (its current one when empty).")
	f.StringVarP(&c.namespace, "namespace", "n", bootstrap.DefaultNamespace,
		"Namespace of the controller, the operator, the provider workloads and the Providers shared with every namespace (not kube-system, kube-public, kube-node-lease or "+bootstrap.APIServerNamespace+").")
	f.StringVar(&c.version, "version", version, "Release to install: the image "+bootstrap.Repository+":VERSION.")
	f.StringVar(&c.image, "image", "", "Image to install instead of "+bootstrap.Repository+":VERSION (a mirror).")
	f.StringVar(&c.dryRun, "dry-run", "none", `"client" prints the YAML it would apply; "server" has the cluster validate and admit it without persisting.`)
	f.Lookup("dry-run").NoOptDefVal = "client"
	f.BoolVar(&c.wait, "wait", false, "Wait until what was installed runs (Deployments rolled out, APIService Available), printing progress.")
	f.DurationVar(&c.timeout, "timeout", 5*time.Minute, "How long --wait waits.")
}

// options checks the flags, before anything is read from or applied to the
// cluster, and turns them into what bootstrap renders.
func (c *common) options() (bootstrap.Options, error) {
	if err := bootstrap.CheckNamespace(c.namespace); err != nil {
		return bootstrap.Options{}, fmt.Errorf("-n/--namespace: %w", err)
	}
	switch c.dryRun {
	case "none", "client", "server":
	default:
		return bootstrap.Options{}, fmt.Errorf(`--dry-run=%q: must be "none", "client" or "server"`, c.dryRun)
	}
	img := c.image
	if img == "" {
		img = bootstrap.Repository + ":" + c.version
	}
	return bootstrap.Options{Namespace: c.namespace, Image: img}, nil
}

func (c *common) config() (*restclient.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = c.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: c.context}).ClientConfig()
	if err != nil {
		return nil, err
	}
	// An install is some fifty objects: client-go's default 5 requests per
	// second would make it take ten seconds.
	cfg.QPS, cfg.Burst = 50, 100
	return cfg, nil
}

// applier applies with bootstrap's field manager, printing a line per
// object as kubectl apply --server-side does.
func (c *common) applier(cfg *restclient.Config, out io.Writer) (*apply.Applier, error) {
	a, err := apply.New(cfg, bootstrap.FieldManager)
	if err != nil {
		return nil, err
	}
	a.DryRun = c.dryRun == "server"
	suffix := ""
	if a.DryRun {
		suffix = " (server dry run)"
	}
	a.Applied = func(obj *unstructured.Unstructured) {
		fmt.Fprintf(out, "%s/%s serverside-applied%s\n", strings.ToLower(obj.GetKind()), apply.Name(obj), suffix)
	}
	return a, nil
}

// NewCommand returns "banlieue bootstrap".
func NewCommand(ctx context.Context, version string) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "bootstrap",
		Short: "Install banlieue on a cluster: the API server, controller and operator, then each backend's ProviderClass",
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(operatorCommand(ctx, version), providerCommand(ctx, version))
	return cmd
}

func operatorCommand(ctx context.Context, version string) *cobra.Command {
	var (
		c           common
		certManager bool
	)
	cmd := &cobra.Command{
		Use:   "operator",
		Short: "Install the infrastructure CRDs, the API server (its etcd, certificates and APIService), the controller and the operator",
		Long: `Install the infrastructure CRDs, the API server with its example etcd, its
certificates (self-signed, kept across runs; or issued by cert-manager) and its
APIService, the controller and the operator. With --wait, wait for them to run
and then install every shipped ProviderClass; the operator then runs a provider
for each Provider you create.`,
		Args:         cobra.NoArgs,
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o, err := c.options()
			if err != nil {
				return err
			}
			o.CertManager = certManager
			return runOperator(cmd.Context(), &c, o, cmd.OutOrStdout())
		},
	}
	cmd.SetContext(ctx)
	c.addFlags(cmd.Flags(), version)
	cmd.Flags().BoolVar(&certManager, "cert-manager", false, "Have cert-manager (installed beforehand) issue the certificates and inject the APIService's caBundle.")
	return cmd
}

func runOperator(ctx context.Context, c *common, o bootstrap.Options, out io.Writer) error {
	var cfg *restclient.Config
	if c.dryRun != "client" {
		var err error
		if cfg, err = c.config(); err != nil {
			return err
		}
	}
	if !o.CertManager {
		certs, err := certificates(ctx, cfg, out)
		if err != nil {
			return err
		}
		o.Certificates = certs
	}
	objs, err := bootstrap.Operator(o)
	if err != nil {
		return err
	}
	if c.dryRun == "client" {
		return printYAML(out, objs)
	}
	a, err := c.applier(cfg, out)
	if err != nil {
		return err
	}
	if err := a.Apply(ctx, objs...); err != nil {
		return err
	}
	if !c.wait || a.DryRun {
		fmt.Fprintf(out, "Installed. Once the APIService %s is Available, install a backend: banlieue bootstrap provider vsphere\n", apiService)
		return nil
	}
	w := waiter{a: a, out: out, timeout: c.timeout}
	if err := w.rollouts(ctx, deploymentsOf(objs)); err != nil {
		return err
	}
	if err := w.apiService(ctx); err != nil {
		return err
	}
	backends, err := bootstrap.Backends()
	if err != nil {
		return err
	}
	for _, b := range backends {
		pc, err := bootstrap.ProviderClass(o, b)
		if err != nil {
			return err
		}
		if err := a.Apply(ctx, pc); err != nil {
			return err
		}
	}
	fmt.Fprintln(out, "banlieue is running; create a Provider and the operator runs its provider.")
	return nil
}

// certificates are those an earlier install stored, or a new set.
func certificates(ctx context.Context, cfg *restclient.Config, out io.Writer) (*bootstrap.Certificates, error) {
	if cfg == nil {
		return bootstrap.NewCertificates()
	}
	stored, err := storedCertificates(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if stored != nil {
		fmt.Fprintf(out, "Keeping the certificates of the existing install (%s/%s).\n", bootstrap.APIServerNamespace, bootstrap.CASecret)
		return stored, nil
	}
	return bootstrap.NewCertificates()
}

func printYAML(out io.Writer, objs []*unstructured.Unstructured) error {
	data, err := bootstrap.YAML(objs)
	if err != nil {
		return err
	}
	_, err = out.Write(data)
	return err
}

func deploymentsOf(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "Deployment" {
			out = append(out, o)
		}
	}
	return out
}
