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

func newImagesCommand(cfg *config, streams Streams) *cobra.Command {
	return &cobra.Command{
		Use:   "images [NAME]",
		Short: "Show VMImages' progress on each Provider and failure domain",
		Long: `Show each VMImage (or the one named) on every Provider reporting it, a row
per failure domain of an imported image: its phase, bytes fetched of the
total, the revision built there and why it is not ready.`,
		Example: `  kubectl banlieue images
  kubectl banlieue images ubuntu-24.04`,
		Args:              cobra.MaximumNArgs(1),
		ValidArgsFunction: completeImages(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			b, err := cfg.banlieue()
			if err != nil {
				return err
			}
			var images []v1alpha1.VMImage
			if len(args) == 1 {
				img, err := b.VMImages().Get(cmd.Context(), args[0], metav1.GetOptions{})
				if err != nil {
					return err
				}
				images = []v1alpha1.VMImage{*img}
			} else {
				list, err := b.VMImages().List(cmd.Context(), metav1.ListOptions{})
				if err != nil {
					return err
				}
				if len(list.Items) == 0 {
					fmt.Fprintln(streams.ErrOut, "No VMImages found.")
					return nil
				}
				images = list.Items
			}
			return printImages(streams.Out, images)
		},
	}
}

func printImages(w io.Writer, images []v1alpha1.VMImage) error {
	return table(w, imageRows(images))
}

// imageRows: IMAGE PROVIDER FAILURE-DOMAIN PHASE PROGRESS REVISION REASON;
// a Provider without failure domains (an image it does not import, a
// template it looks up) has one row with its own readiness and reason; an
// image no Provider reports yet has one row saying so.
func imageRows(images []v1alpha1.VMImage) [][]string {
	rows := [][]string{{"IMAGE", "PROVIDER", "FAILURE-DOMAIN", "PHASE", "PROGRESS", "REVISION", "REASON"}}
	for _, img := range images {
		if len(img.Status.PerProvider) == 0 {
			rows = append(rows, []string{img.Name, "<none>", "-", "-", "-", dash(img.Status.Revision), "no Provider reports it yet"})
			continue
		}
		for _, p := range img.Status.PerProvider {
			if len(p.FailureDomains) == 0 {
				phase := "NotReady"
				if p.Ready {
					phase = "Ready"
				}
				rows = append(rows, []string{img.Name, p.Provider, "-", phase, "-", "-", reasonText(p.Reason, p.Message)})
				continue
			}
			for _, fd := range p.FailureDomains {
				rows = append(rows, []string{img.Name, p.Provider, fd.Name, dash(string(fd.Phase)),
					progress(fd.BytesDone, fd.BytesTotal), dash(fd.Revision), reasonText(fd.Reason, fd.Message)})
			}
		}
	}
	return rows
}

func reasonText(reason, message string) string {
	switch {
	case reason == "" && message == "":
		return "-"
	case message == "":
		return reason
	case reason == "":
		return message
	}
	return reason + ": " + message
}

// progress is bytes done of the total with a percentage, done alone when
// the server did not say the total, "-" before any byte.
func progress(done, total int64) string {
	switch {
	case total > 0:
		return fmt.Sprintf("%s/%s (%d%%)", bytesText(done), bytesText(total), done*100/total)
	case done > 0:
		return bytesText(done)
	}
	return "-"
}

// bytesText is n in binary units with one decimal.
func bytesText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%dB", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f%ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
