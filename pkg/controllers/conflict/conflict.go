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
// Package controllers assembles banlieue's core controllers (VirtualMachine
// Package conflict makes a reconcile that lost an optimistic-concurrency
// race (409 Conflict: somebody wrote the object since the cache read it) a
// quiet requeue instead of a "Reconciler error": it is how the API works,
// not a fault, and it needs no error backoff.
package conflict

import (
	"context"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// Retry is when a reconcile that met a conflict runs again. The write that
// won usually requeues the object sooner, through its watch event; Retry
// covers writes that no watch predicate lets through.
const Retry = time.Second

// Requeue wraps r: a Conflict error (wrapped or joined with others) becomes
// a requeue after Retry, logged at V(1); every other result passes as is.
func Requeue(r reconcile.Reconciler) reconcile.Reconciler {
	return reconciler{r}
}

type reconciler struct{ next reconcile.Reconciler }

func (c reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	res, err := c.next.Reconcile(ctx, req)
	if err != nil && apierrors.IsConflict(err) {
		log.FromContext(ctx).V(1).Info("Conflict, requeued", "after", Retry, "error", err.Error())
		return reconcile.Result{RequeueAfter: Retry}, nil
	}
	return res, err
}
