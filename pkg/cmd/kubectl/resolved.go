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
	"strings"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

func newResolvedCommand(cfg *config, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "resolved NAME",
		Short: "Show a VM's effective configuration and where each value comes from",
		Long: `Show virtualmachines/NAME/resolved: the VM's VMClass merged with its
overrides, each value with where it came from (class, override, image or
default). When the class changed since the VM pinned it, also what
annotating the VM banlieue.io/update-class=true would apply.`,
		Example:           `  kubectl banlieue resolved db-01 -n prod`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			vms, _, err := cfg.vms()
			if err != nil {
				return err
			}
			r, err := vms.GetResolved(cmd.Context(), args[0], metav1.GetOptions{})
			if err != nil {
				return err
			}
			return printResolved(streams.Out, r)
		},
	}
}

// printResolved is the pinned configuration as FIELD VALUE FROM rows,
// then the configuration with the class as it is now, when it differs.
func printResolved(w io.Writer, r *v1alpha1.ResolvedVirtualMachine) error {
	fmt.Fprintf(w, "VirtualMachine %s/%s: class %s (generation %d)\n\n", r.Namespace, r.Name, r.Spec.Class, r.Spec.ClassGeneration)
	if err := table(w, resolvedRows(&r.Spec)); err != nil {
		return err
	}
	if r.Current != nil {
		fmt.Fprintf(w, "\nThe VMClass changed since the VM pinned it; with class %s as it is now (generation %d),\nwhich annotating the VM banlieue.io/update-class=true applies:\n\n", r.Current.Class, r.Current.ClassGeneration)
		return table(w, resolvedRows(r.Current))
	}
	return nil
}

// resolvedRows are the fields of s with their provenance; "-" where the
// API records none (the image's and placement's fields come from the
// image and the VM themselves).
func resolvedRows(s *v1alpha1.ResolvedVirtualMachineSpec) [][]string {
	rows := [][]string{{"FIELD", "VALUE", "FROM"},
		{"cpus", fmt.Sprint(s.CPUs.Value), string(s.CPUs.From)},
		{"memoryMiB", fmt.Sprint(s.MemoryMiB.Value), string(s.MemoryMiB.From)},
	}
	for _, d := range s.Disks {
		v := fmt.Sprintf("%dGiB", d.SizeGiB.Value)
		var extra []string
		if d.StorageClass != "" {
			extra = append(extra, "storageClass "+d.StorageClass)
		}
		if d.Provisioning != "" {
			extra = append(extra, string(d.Provisioning))
		}
		if len(extra) > 0 {
			v += " (" + strings.Join(extra, ", ") + ")"
		}
		rows = append(rows, []string{"disks[" + d.Name + "]", v, string(d.SizeGiB.From)})
	}
	for _, i := range s.Interfaces {
		v := string(i.Mode)
		switch {
		case i.Static != nil:
			v += " " + i.Static.Address
			if i.Static.Prefix != nil {
				v += fmt.Sprintf("/%d", *i.Static.Prefix)
			}
		case i.Pool != nil:
			v += " pool " + i.Pool.Name
		}
		if i.NetworkClass != "" {
			v += " (networkClass " + i.NetworkClass + ")"
		}
		rows = append(rows, []string{"interfaces[" + i.Name + "]", v, string(i.From)})
	}
	rows = append(rows,
		[]string{"firmware", dash(string(s.Firmware)), dash(string(s.FirmwareFrom))},
		[]string{"tpmEnabled", fmt.Sprint(s.TPMEnabled), "-"},
		[]string{"features", dash(strings.Join(s.Features, ",")), "-"},
		[]string{"image", imageSummary(&s.Image), "-"},
		[]string{"powerState", dash(string(s.PowerState)), "-"},
	)
	if u := s.UserData; u != nil {
		switch {
		case u.SecretRef != nil:
			rows = append(rows, []string{"userData", "Secret " + u.SecretRef.Name, "-"})
		case u.ConfigMapRef != nil:
			rows = append(rows, []string{"userData", "ConfigMap " + u.ConfigMapRef.Name, "-"})
		}
	}
	return rows
}

// imageSummary is the image's name and what it is, with the imported
// revision a VM is built from.
func imageSummary(i *v1alpha1.ResolvedImage) string {
	v := i.Name
	var what []string
	for _, s := range []string{i.OSDistribution, i.OSVersion, i.Architecture} {
		if s != "" {
			what = append(what, s)
		}
	}
	if len(what) > 0 {
		v += " (" + strings.Join(what, " ") + ")"
	}
	if i.Imported != nil {
		v += " revision " + i.Imported.Revision
	}
	return dash(v)
}
