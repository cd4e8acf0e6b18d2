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

package virtualmachine

import (
	"context"
	"maps"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// TestWriteBackRemovesRequestsAfterTheirEffect: a request acted on (the
// update-class annotation) leaves the stored VM only once the status
// recording its effect (the class pinned again) is stored, and stays when
// that status write fails, so that no read shows it gone without its
// effect. The interceptor reads the stored VM at the annotation's removal.
func TestWriteBackRemovesRequestsAfterTheirEffect(t *testing.T) {
	for _, tc := range []struct {
		name        string
		statusFails bool
	}{{"status stored", false}, {"status conflict", true}} {
		t.Run(tc.name, func(t *testing.T) {
			scheme := runtime.NewScheme()
			if err := v1alpha1.AddToScheme(scheme); err != nil {
				t.Fatal(err)
			}
			stored := metricsVM("vm", "prov")
			stored.Annotations = map[string]string{resolve.UpdateClassAnnotation: "true", "keep": "x"}
			stored.Status.ClassRevision = &v1alpha1.ClassRevision{Generation: 1}
			var storedGenerationAtRemoval int64 = -1
			c := fake.NewClientBuilder().WithScheme(scheme).WithObjects(stored).WithStatusSubresource(stored).
				WithInterceptorFuncs(interceptor.Funcs{
					Patch: func(ctx context.Context, c client.WithWatch, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
						now := &v1alpha1.VirtualMachine{}
						if err := c.Get(ctx, client.ObjectKeyFromObject(obj), now); err != nil {
							return err
						}
						storedGenerationAtRemoval = now.Status.ClassRevision.Generation
						return c.Patch(ctx, obj, p, opts...)
					},
					SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
						if tc.statusFails {
							return apierrors.NewConflict(schema.GroupResource{Group: "banlieue.io", Resource: "virtualmachines"}, obj.GetName(), nil)
						}
						return c.SubResource(sub).Patch(ctx, obj, p, opts...)
					},
				}).Build()
			r := &Reconciler{Client: c}

			vm := &v1alpha1.VirtualMachine{}
			if err := c.Get(context.Background(), client.ObjectKeyFromObject(stored), vm); err != nil {
				t.Fatal(err)
			}
			asked, before := maps.Clone(vm.Annotations), vm.Status.DeepCopy()
			requestDone(vm, resolve.UpdateClassAnnotation)
			vm.Status.ClassRevision = &v1alpha1.ClassRevision{Generation: 2}
			err := r.writeBack(context.Background(), asked, before, vm)

			after := &v1alpha1.VirtualMachine{}
			if gerr := c.Get(context.Background(), client.ObjectKeyFromObject(stored), after); gerr != nil {
				t.Fatal(gerr)
			}
			_, annotated := after.Annotations[resolve.UpdateClassAnnotation]
			if after.Annotations["keep"] != "x" {
				t.Errorf("an annotation not acted on went: %v", after.Annotations)
			}
			if tc.statusFails {
				if err == nil || !annotated || storedGenerationAtRemoval != -1 {
					t.Errorf("status refused: error %v, still annotated %t, removal attempted at generation %d; want an error, the request kept, no removal",
						err, annotated, storedGenerationAtRemoval)
				}
				return
			}
			if err != nil || annotated || after.Status.ClassRevision.Generation != 2 {
				t.Fatalf("error %v, still annotated %t, stored generation %d", err, annotated, after.Status.ClassRevision.Generation)
			}
			if storedGenerationAtRemoval != 2 {
				t.Errorf("the request was removed while the stored VM pinned generation %d, want 2 (its effect first)", storedGenerationAtRemoval)
			}
		})
	}
}
