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

package provider

import (
	"context"
	"fmt"
	"time"

	"github.com/firestoned/banlieue/pkg/console"
	"github.com/firestoned/banlieue/pkg/providers"
)

// WebConsoleURL asks the backend for a web console URL of the machine t
// names, when this process serves it (console.WebConsoleFunc): the
// machine found as OpenConsole finds it.
func (r *MachineReconciler) WebConsoleURL(ctx context.Context, t console.Target) (string, time.Time, error) {
	spec, backend, err := r.consoleMachine(ctx, t)
	if err != nil {
		return "", time.Time{}, err
	}
	web, ok := providers.WebConsoleOf(backend)
	if !ok {
		return "", time.Time{}, fmt.Errorf("%w (%s); virtualmachines/NAME/console attaches to its serial console",
			providers.ErrNoWebConsole, r.Class)
	}
	return web.WebConsoleURL(ctx, spec)
}
