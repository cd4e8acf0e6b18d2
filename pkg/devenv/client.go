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

package devenv

import (
	"context"
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/controllers"
)

// ServedClient is a client of the administrator with banlieue's scheme,
// returned once kube-apiserver serves banlieue.io: the aggregator may list
// it in discovery a moment after the APIService is Available, and a
// suite's first test must not be the one to see that.
func (e *Env) ServedClient(ctx context.Context) (client.Client, error) {
	scheme, err := controllers.Scheme()
	if err != nil {
		return nil, err
	}
	c, err := client.New(rest.CopyConfig(e.Admin), client.Options{Scheme: scheme})
	if err != nil {
		return nil, err
	}
	if err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return c.List(ctx, &v1alpha1.ProviderList{}) == nil, nil
	}); err != nil {
		return nil, fmt.Errorf("banlieue.io never served through kube-apiserver: %w", err)
	}
	return c, nil
}
