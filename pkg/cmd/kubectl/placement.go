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

package kubectl

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func newPlacementCommand(cfg *config, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "placement NAME",
		Short: "Explain where a VM can run, and why not elsewhere",
		Long: `Show virtualmachines/NAME/placement: the scheduler's placement run as a dry
run, with the verdict on every candidate Provider and each of its failure
domains (whether it fits, how many VMs it has, why not).`,
		Example:           `  kubectl banlieue placement db-01 -n prod`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			vms, _, err := cfg.vms()
			if err != nil {
				return err
			}
			p, err := vms.GetPlacement(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			return printPlacement(streams.Out, p)
		},
	}
}

// printPlacement is the decision, where the VM is and would go, then a
// row per Provider followed by a row per failure domain of it.
func printPlacement(w io.Writer, p *v1alpha1.VirtualMachinePlacement) error {
	r := p.Result
	verdict := "fits"
	if !r.Fits {
		verdict = "does not fit"
	}
	fmt.Fprintf(w, "VirtualMachine %s/%s %s: %s", p.Namespace, p.Name, verdict, r.Reason)
	if r.Message != "" {
		fmt.Fprintf(w, ": %s", r.Message)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "Current: %s\n", placementOf(r.Current))
	fmt.Fprintf(w, "Choice:  %s\n\n", placementOf(r.Choice))
	return table(w, placementRows(r.Providers))
}

func placementOf(s *v1alpha1.ScheduledPlacement) string {
	if s == nil {
		return "<none>"
	}
	if s.FailureDomain == "" {
		return "Provider " + s.Provider
	}
	return fmt.Sprintf("Provider %s, failure domain %s", s.Provider, s.FailureDomain)
}

// placementRows: PROVIDER FAILURE-DOMAIN FITS LOAD REASON MESSAGE; a
// Provider's own row has "-" for failure domain and load, its failure
// domains' rows follow it.
func placementRows(providers []v1alpha1.ProviderPlacement) [][]string {
	rows := [][]string{{"PROVIDER", "FAILURE-DOMAIN", "FITS", "LOAD", "REASON", "MESSAGE"}}
	for _, p := range providers {
		rows = append(rows, []string{p.Provider, "-", yesNo(p.Fits), "-", dash(p.Reason), dash(p.Message)})
		for _, fd := range p.FailureDomains {
			rows = append(rows, []string{p.Provider, fd.Name, yesNo(fd.Fits), fmt.Sprint(fd.Load), "-", dash(fd.Message)})
		}
	}
	return rows
}
