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

// Package finalizers writes a Provider's finalizers through its
// /finalizers subresource, the only write to a Provider besides /status
// that the identities serving it are granted: they cannot touch the spec
// that decides which Secrets they may read.
package finalizers

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/controllers/patch"
)

// Subresource is the name of the subresource.
const Subresource = "finalizers"

// Add adds finalizer to obj (and to the stored object) when missing.
func Add(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	return patch.AddFinalizer(ctx, patch.Subresource(c, Subresource), obj, finalizer)
}

// Remove removes finalizer from obj (and from the stored object) when
// present; a Provider already gone is not an error.
func Remove(ctx context.Context, c client.Client, obj client.Object, finalizer string) error {
	return patch.RemoveFinalizer(ctx, patch.Subresource(c, Subresource), obj, finalizer)
}
