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

// Package patch is how banlieue's controllers write finalizers and status:
// one way everywhere, after Cluster API's util/patch. Finalizers are a
// merge patch of the whole list guarded by the resourceVersion read (a
// list in a merge patch replaces the stored one, so another writer's
// finalizer added meanwhile must conflict rather than be dropped; the
// conflict is requeued quietly, pkg/controllers/conflict). Status is a
// merge patch from the object as read, sent only when something changed:
// fields a reconcile did not touch (a task recorded concurrently) are
// left as they are.
package patch

import (
	"context"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Writer sends a patch of obj: the object itself (Object) or one of its
// subresources (Subresource).
type Writer func(ctx context.Context, obj client.Object, p client.Patch) error

// Object writes through c to the object itself.
func Object(c client.Client) Writer {
	return func(ctx context.Context, obj client.Object, p client.Patch) error { return c.Patch(ctx, obj, p) }
}

// Subresource writes through c to obj's subresource name (a Provider's
// finalizers, the only write its serving identities may make besides
// status).
func Subresource(c client.Client, name string) Writer {
	return func(ctx context.Context, obj client.Object, p client.Patch) error {
		return c.SubResource(name).Patch(ctx, obj, p)
	}
}

// AddFinalizer adds finalizer to obj, and to the stored object, when
// missing.
func AddFinalizer(ctx context.Context, w Writer, obj client.Object, finalizer string) error {
	if controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	return Change(ctx, w, obj, func() { controllerutil.AddFinalizer(obj, finalizer) })
}

// RemoveFinalizer removes finalizer from obj, and from the stored object,
// when present; an object already gone is not an error.
func RemoveFinalizer(ctx context.Context, w Writer, obj client.Object, finalizer string) error {
	if !controllerutil.ContainsFinalizer(obj, finalizer) {
		return nil
	}
	return client.IgnoreNotFound(Change(ctx, w, obj, func() { controllerutil.RemoveFinalizer(obj, finalizer) }))
}

// Change applies change to obj and writes it as a merge patch locked to
// the resourceVersion obj was read at: a change decided on a stale read
// conflicts instead of overwriting a newer object.
func Change(ctx context.Context, w Writer, obj client.Object, change func()) error {
	p := client.MergeFromWithOptions(obj.DeepCopyObject().(client.Object), client.MergeFromWithOptimisticLock{})
	change()
	return w(ctx, obj, p)
}

// Status writes obj's status as a merge patch from base (obj as read,
// before this reconcile changed its status), when they differ. With
// locked, the patch carries base's resourceVersion: a status computed
// from a stale read conflicts instead of replacing a newer one.
func Status(ctx context.Context, c client.Client, base, obj client.Object, locked bool) error {
	if apiequality.Semantic.DeepEqual(base, obj) {
		return nil
	}
	var opts []client.MergeFromOption
	if locked {
		opts = append(opts, client.MergeFromWithOptimisticLock{})
	}
	return c.Status().Patch(ctx, obj, client.MergeFromWithOptions(base, opts...))
}
