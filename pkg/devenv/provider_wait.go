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
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// WaitProviderReady waits up to two minutes for a provider (a pod of the
// real node) to report p Ready, and says otherwise with p's conditions and
// where each pod is.
func (e *Env) WaitProviderReady(ctx context.Context, c client.Client, p *v1alpha1.Provider) error {
	var last []metav1.Condition
	if err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		got := &v1alpha1.Provider{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(p), got); err != nil {
			return false, nil
		}
		last = got.Status.Conditions
		return meta.IsStatusConditionTrue(got.Status.Conditions, v1alpha1.ProviderReady), nil
	}); err != nil {
		return fmt.Errorf("no provider reported Provider %s Ready: %s\n%s", p.Name, conditionsText(last), e.PodsSummary(ctx))
	}
	return nil
}

func conditionsText(cs []metav1.Condition) string {
	var out []string
	for _, c := range cs {
		out = append(out, fmt.Sprintf("%s=%s(%s: %s)", c.Type, c.Status, c.Reason, c.Message))
	}
	return strings.Join(out, ", ")
}

// DeleteProvider deletes p and waits up to a minute until it is gone (a
// provider still running releases its finalizer).
func DeleteProvider(ctx context.Context, c client.Client, p *v1alpha1.Provider) {
	_ = c.Delete(ctx, p)
	_ = wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(p), &v1alpha1.Provider{})), nil
	})
}
