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

package controllers

import (
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/util/validation"
)

// SharedProviderNamespaceFlag names the install's shared-Provider
// namespace in every component that places or admits VMs (the API
// server's /placement, the controller, the providers): they must agree,
// so the flag has one name and one default everywhere.
const SharedProviderNamespaceFlag = "shared-provider-namespace"

// AddSharedProviderNamespaceFlag registers --shared-provider-namespace
// into ns, whose value is the default (placement.DefaultSharedProviderNamespace
// in every component).
func AddSharedProviderNamespaceFlag(f *pflag.FlagSet, ns *string) {
	f.StringVar(ns, SharedProviderNamespaceFlag, *ns,
		"Namespace whose Providers serve the VMs of every namespace, besides each VM's own namespace's: the install namespace (banlieue bootstrap -n sets it).")
}

// ValidateSharedProviderNamespace refuses a value that cannot name a
// namespace, naming the flag: a typo would otherwise leave every VM
// without its shared Providers, silently.
func ValidateSharedProviderNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("--%s=%q: not a namespace name: %s", SharedProviderNamespaceFlag, ns, strings.Join(errs, "; "))
	}
	return nil
}
