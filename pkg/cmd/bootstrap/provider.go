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
package bootstrap

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/kubernetes"
	restclient "k8s.io/client-go/rest"

	"github.com/firestoned/banlieue/pkg/bootstrap"
)

func providerCommand(ctx context.Context, version string) *cobra.Command {
	var (
		c        common
		fromGovc bool
		name     string
		caFile   string
	)
	cmd := &cobra.Command{
		Use:   "provider BACKEND",
		Short: "Install a backend's ProviderClass (the operator then runs its Providers' providers); with --from-govc, a vSphere Provider from govc's environment",
		Long: `Install the shipped ProviderClass of BACKEND (vsphere, libvirt), once the
APIService of banlieue.io is Available (it waits for it, printing progress).

With --from-govc (vsphere), also the credentials Secret and a Provider derived
from GOVC_URL, GOVC_USERNAME, GOVC_PASSWORD and GOVC_INSECURE, the endpoint
normalised to https://HOST[:PORT]/sdk; --wait then waits for it to be Ready.`,
		Args:         cobra.ExactArgs(1),
		SilenceUsage: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			o, err := c.options()
			if err != nil {
				return err
			}
			objs, err := providerObjects(o, args[0], fromGovc, name, caFile)
			if err != nil {
				return err
			}
			return runProvider(cmd.Context(), &c, objs, fromGovc, cmd.OutOrStdout())
		},
	}
	cmd.SetContext(ctx)
	c.addFlags(cmd.Flags(), version)
	f := cmd.Flags()
	f.BoolVar(&fromGovc, "from-govc", false, "Also create a vSphere Provider and its credentials Secret from govc's environment (GOVC_URL, GOVC_USERNAME, GOVC_PASSWORD, GOVC_INSECURE).")
	f.StringVar(&name, "name", "vsphere", "Name of the Provider --from-govc creates (its Secret is NAME-credentials).")
	f.StringVar(&caFile, "ca-file", "", "PEM file of the CA that signed the vCenter's certificate (--from-govc without GOVC_INSECURE).")
	return cmd
}

func providerObjects(o bootstrap.Options, backend string, fromGovc bool, name, caFile string) ([]*unstructured.Unstructured, error) {
	pc, err := bootstrap.ProviderClass(o, backend)
	if err != nil {
		return nil, err
	}
	objs := []*unstructured.Unstructured{pc}
	if !fromGovc {
		return objs, nil
	}
	if backend != "vsphere" {
		return nil, fmt.Errorf("--from-govc describes a vCenter: it goes with vsphere, not %s", backend)
	}
	g, err := bootstrap.GovcFromEnv(os.Getenv)
	if err != nil {
		return nil, fmt.Errorf("--from-govc: %w", err)
	}
	var ca []byte
	if caFile != "" {
		if ca, err = os.ReadFile(caFile); err != nil {
			return nil, err
		}
	}
	more, err := bootstrap.GovcProvider(g, o.Namespace, name, ca)
	if err != nil {
		return nil, fmt.Errorf("--from-govc: %w", err)
	}
	return append(objs, more...), nil
}

func runProvider(ctx context.Context, c *common, objs []*unstructured.Unstructured, fromGovc bool, out io.Writer) error {
	if c.dryRun == "client" {
		return printYAML(out, objs)
	}
	cfg, err := c.config()
	if err != nil {
		return err
	}
	a, err := c.applier(cfg, out)
	if err != nil {
		return err
	}
	w := waiter{a: a, out: out, timeout: c.timeout}
	// A ProviderClass is served by banlieue's API server.
	if err := w.apiService(ctx); err != nil {
		return err
	}
	if err := a.Apply(ctx, objs...); err != nil {
		return err
	}
	if fromGovc && !a.DryRun {
		if err := nameInStaticInstall(ctx, cfg, objs[len(objs)-1], out); err != nil {
			return err
		}
	}
	if c.wait && fromGovc && !a.DryRun {
		return w.providerReady(ctx, objs[len(objs)-1])
	}
	return nil
}

// nameInStaticInstall names the Provider's credentials Secret in the static
// install's credentials Role of its backend, where there is one (the static
// provider reads Secrets by the names listed there); an operator install
// renders that grant itself.
func nameInStaticInstall(ctx context.Context, cfg *restclient.Config, provider *unstructured.Unstructured, out io.Writer) error {
	secret, _, _ := unstructured.NestedString(provider.Object, "spec", "connection", "credentialsRef", "name")
	backend, _, _ := unstructured.NestedString(provider.Object, "spec", "providerClassRef", "name")
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	found, err := bootstrap.NameCredentials(ctx, cs, provider.GetNamespace(), backend, "secrets", secret)
	if err != nil || !found {
		return err
	}
	_, err = fmt.Fprintf(out, "role/%s/%s: names secret %s\n", provider.GetNamespace(), bootstrap.CredentialsRole(backend), secret)
	return err
}
