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
	"io"
	"strings"
	"text/tabwriter"
)

// table writes rows aligned in columns as kubectl get does (its
// tabwriter settings), the first row being the header.
func table(w io.Writer, rows [][]string) error {
	tw := tabwriter.NewWriter(w, 6, 4, 3, ' ', 0)
	for _, r := range rows {
		cells := make([]string, len(r))
		for i, c := range r {
			// A tab or newline in a message would break the columns.
			cells[i] = strings.NewReplacer("\t", " ", "\n", " ").Replace(c)
		}
		if _, err := io.WriteString(tw, strings.Join(cells, "\t")+"\n"); err != nil {
			return err
		}
	}
	return tw.Flush()
}

// dash is s, or "-" when empty, so that no column is blank.
func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
