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
// Package flagenv gives a command's flags defaults from the environment, so
// that a Deployment's ConfigMap (envFrom) configures a process without
// touching its arguments: --machine-workers reads BANLIEUE_MACHINE_WORKERS,
// -v reads BANLIEUE_V. A flag given on the command line wins.
package flagenv

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
)

// Prefix starts every variable banlieue reads.
const Prefix = "BANLIEUE_"

// Name is the variable that sets flag: BANLIEUE_ and the flag's name in
// upper case with dashes as underscores.
func Name(flag string) string {
	return Prefix + strings.ToUpper(strings.ReplaceAll(flag, "-", "_"))
}

// Apply sets every flag of fs not given on the command line from its
// variable, when lookup finds one. A value the flag refuses is an error
// naming the variable, so a wrong ConfigMap key stops the process at start.
func Apply(fs *pflag.FlagSet, lookup func(string) (string, bool)) error {
	var errs []string
	fs.VisitAll(func(f *pflag.Flag) {
		if f.Changed {
			return
		}
		v, ok := lookup(Name(f.Name))
		if !ok {
			return
		}
		if err := fs.Set(f.Name, v); err != nil {
			errs = append(errs, fmt.Sprintf("%s=%q: %v", Name(f.Name), v, err))
		}
	})
	if len(errs) > 0 {
		return fmt.Errorf("environment: %s", strings.Join(errs, "; "))
	}
	return nil
}
