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

package patch

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

// counted is a client over an in-memory store that counts the patches
// sent: the helpers' job is as much the writes they save as the ones they
// make.
func counted(t *testing.T, objs ...client.Object) (client.Client, *int) {
	t.Helper()
	n := 0
	c := fake.NewClientBuilder().WithObjects(objs...).WithStatusSubresource(&corev1.Pod{}).WithInterceptorFuncs(interceptor.Funcs{
		Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
			n++
			return c.Patch(ctx, obj, p, opts...)
		},
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
			n++
			return c.SubResource(sub).Patch(ctx, obj, p, opts...)
		},
	}).Build()
	return c, &n
}

func TestFinalizers(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	c, writes := counted(t, pod)
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	stale := pod.DeepCopy()
	if err := AddFinalizer(ctx, Object(c), pod, "a/b"); err != nil || *writes != 1 {
		t.Fatalf("adding: %v, %d writes", err, *writes)
	}
	if err := AddFinalizer(ctx, Object(c), pod, "a/b"); err != nil || *writes != 1 {
		t.Errorf("adding again: %v, %d writes, want none more", err, *writes)
	}
	// A finalizer list computed from a stale read conflicts rather than
	// dropping the one written meanwhile.
	if err := AddFinalizer(ctx, Object(c), stale, "c/d"); !apierrors.IsConflict(err) {
		t.Errorf("adding from a stale read: %v, want a conflict", err)
	}
	if err := RemoveFinalizer(ctx, Object(c), pod, "a/b"); err != nil {
		t.Errorf("removing: %v", err)
	}
	stored := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), stored); err != nil || len(stored.Finalizers) != 0 {
		t.Errorf("stored finalizers %v (%v), want none", stored.Finalizers, err)
	}
	gone := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "gone", Namespace: "ns", ResourceVersion: "1", Finalizers: []string{"a/b"}}}
	if err := RemoveFinalizer(ctx, Object(c), gone, "a/b"); err != nil {
		t.Errorf("removing from an object already gone: %v", err)
	}
}

func TestStatus(t *testing.T) {
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	c, writes := counted(t, pod)
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
		t.Fatal(err)
	}
	base := pod.DeepCopy()
	if err := Status(ctx, c, base, pod, true); err != nil || *writes != 0 {
		t.Errorf("unchanged: %v, %d writes, want none", err, *writes)
	}
	stale := pod.DeepCopy()
	pod.Status.Message = "one"
	if err := Status(ctx, c, base, pod, true); err != nil || *writes != 1 {
		t.Fatalf("changed: %v, %d writes", err, *writes)
	}
	staleBase := stale.DeepCopy()
	stale.Status.Message = "two"
	if err := Status(ctx, c, staleBase, stale, true); !apierrors.IsConflict(err) {
		t.Errorf("locked, from a stale read: %v, want a conflict", err)
	}
	if err := Status(ctx, c, staleBase, stale, false); err != nil {
		t.Errorf("unlocked, from a stale read: %v", err)
	}
	stored := &corev1.Pod{}
	if err := c.Get(ctx, client.ObjectKeyFromObject(pod), stored); err != nil || stored.Status.Message != "two" {
		t.Errorf("stored message %q (%v), want two", stored.Status.Message, err)
	}
}
