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

package integration

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
)

// kindClient is the part of a generated typed client the CRUD test needs,
// with the kind's concrete types hidden behind runtime.Object.
type kindClient struct {
	kind   string
	newObj func(name string, labels map[string]string) runtime.Object
	create func(context.Context, runtime.Object) (runtime.Object, error)
	get    func(context.Context, string) (runtime.Object, error)
	update func(context.Context, runtime.Object) (runtime.Object, error)
	delete func(context.Context, string) error
	list   func(context.Context, metav1.ListOptions) (runtime.Object, error)
	watch  func(context.Context, metav1.ListOptions) (watch.Interface, error)
}

func kindClients(c clientset.Interface) []kindClient {
	vms := c.BanlieueV1alpha1().VirtualMachines(ns)
	providers := c.BanlieueV1alpha1().Providers(ns)
	classes := c.BanlieueV1alpha1().VMClasses()
	images := c.BanlieueV1alpha1().VMImages()
	opts := metav1.CreateOptions{}
	return []kindClient{
		{
			kind: "VirtualMachine",
			newObj: func(name string, l map[string]string) runtime.Object {
				vm := newVM(name, "db-prod-large", "ubuntu-22.04-cloudinit")
				vm.Labels = l
				return vm
			},
			create: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return vms.Create(ctx, o.(*v1alpha1.VirtualMachine), opts)
			},
			get: func(ctx context.Context, n string) (runtime.Object, error) {
				return vms.Get(ctx, n, metav1.GetOptions{})
			},
			update: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return vms.Update(ctx, o.(*v1alpha1.VirtualMachine), metav1.UpdateOptions{})
			},
			delete: func(ctx context.Context, n string) error { return vms.Delete(ctx, n, metav1.DeleteOptions{}) },
			list:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return vms.List(ctx, o) },
			watch:  vms.Watch,
		},
		{
			kind: "Provider",
			newObj: func(name string, l map[string]string) runtime.Object {
				var p v1alpha1.Provider
				readExampleNoT("provider.yaml", &p)
				p.Name, p.Labels = name, l
				return &p
			},
			create: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return providers.Create(ctx, o.(*v1alpha1.Provider), opts)
			},
			get: func(ctx context.Context, n string) (runtime.Object, error) {
				return providers.Get(ctx, n, metav1.GetOptions{})
			},
			update: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return providers.Update(ctx, o.(*v1alpha1.Provider), metav1.UpdateOptions{})
			},
			delete: func(ctx context.Context, n string) error { return providers.Delete(ctx, n, metav1.DeleteOptions{}) },
			list:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return providers.List(ctx, o) },
			watch:  providers.Watch,
		},
		{
			kind: "VMClass",
			newObj: func(name string, l map[string]string) runtime.Object {
				var cl v1alpha1.VMClass
				readExampleNoT("vmclass.yaml", &cl)
				cl.Name, cl.Labels = name, l
				return &cl
			},
			create: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return classes.Create(ctx, o.(*v1alpha1.VMClass), opts)
			},
			get: func(ctx context.Context, n string) (runtime.Object, error) {
				return classes.Get(ctx, n, metav1.GetOptions{})
			},
			update: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return classes.Update(ctx, o.(*v1alpha1.VMClass), metav1.UpdateOptions{})
			},
			delete: func(ctx context.Context, n string) error { return classes.Delete(ctx, n, metav1.DeleteOptions{}) },
			list:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return classes.List(ctx, o) },
			watch:  classes.Watch,
		},
		{
			kind: "VMImage",
			newObj: func(name string, l map[string]string) runtime.Object {
				var img v1alpha1.VMImage
				readExampleNoT("vmimage.yaml", &img)
				img.Name, img.Labels = name, l
				return &img
			},
			create: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return images.Create(ctx, o.(*v1alpha1.VMImage), opts)
			},
			get: func(ctx context.Context, n string) (runtime.Object, error) {
				return images.Get(ctx, n, metav1.GetOptions{})
			},
			update: func(ctx context.Context, o runtime.Object) (runtime.Object, error) {
				return images.Update(ctx, o.(*v1alpha1.VMImage), metav1.UpdateOptions{})
			},
			delete: func(ctx context.Context, n string) error { return images.Delete(ctx, n, metav1.DeleteOptions{}) },
			list:   func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return images.List(ctx, o) },
			watch:  images.Watch,
		},
	}
}

// TestCRUDAllKinds: create, get, list with label and field selectors,
// update, watch and delete, for every kind, through the generated clientset.
func TestCRUDAllKinds(t *testing.T) {
	s := startServer(t, t.TempDir())
	ctx := context.Background()
	for _, k := range kindClients(s.Client) {
		t.Run(k.kind, func(t *testing.T) {
			start, err := k.list(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			rv := listRV(t, start)
			w, err := k.watch(ctx, metav1.ListOptions{ResourceVersion: rv, LabelSelector: "suite=crud"})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()

			for i, tier := range []string{"gold", "silver", "gold"} {
				name := fmt.Sprintf("crud-%d", i)
				if _, err := k.create(ctx, k.newObj(name, map[string]string{"suite": "crud", "tier": tier})); err != nil {
					t.Fatalf("create %s: %v", name, err)
				}
			}
			if _, err := k.create(ctx, k.newObj("crud-0", map[string]string{"suite": "crud"})); !apierrors.IsAlreadyExists(err) {
				t.Errorf("second create: err = %v, want AlreadyExists", err)
			}
			got, err := k.get(ctx, "crud-1")
			if err != nil {
				t.Fatal(err)
			}
			if labels := objMeta(t, got).GetLabels(); labels["tier"] != "silver" {
				t.Errorf("get: labels %v", labels)
			}
			for sel, want := range map[[2]string]string{
				{"suite=crud,tier=gold", ""}:                       "crud-0,crud-2",
				{"suite=crud", "metadata.name=crud-1"}:             "crud-1",
				{"tier in (gold,silver)", "metadata.name!=crud-0"}: "crud-1,crud-2",
			} {
				l, err := k.list(ctx, metav1.ListOptions{LabelSelector: sel[0], FieldSelector: sel[1]})
				if err != nil {
					t.Fatalf("list %v: %v", sel, err)
				}
				if names := listNames(t, l); names != want {
					t.Errorf("list %v = %s, want %s", sel, names, want)
				}
			}
			// Paged list.
			page, err := k.list(ctx, metav1.ListOptions{LabelSelector: "suite=crud", Limit: 2})
			if err != nil {
				t.Fatal(err)
			}
			if lm, _ := meta.ListAccessor(page); meta.LenList(page) != 2 || lm.GetContinue() == "" {
				t.Errorf("paged list: %d items, continue %q", meta.LenList(page), lm.GetContinue())
			}

			m := objMeta(t, got)
			m.GetLabels()["tier"] = "bronze"
			if _, err := k.update(ctx, got); err != nil {
				t.Fatalf("update: %v", err)
			}
			// An update from a stale resourceVersion conflicts.
			m.GetLabels()["tier"] = "stale"
			if _, err := k.update(ctx, got); !apierrors.IsConflict(err) {
				t.Errorf("stale update: err = %v, want Conflict", err)
			}
			if err := k.delete(ctx, "crud-2"); err != nil {
				t.Fatal(err)
			}
			if _, err := k.get(ctx, "crud-2"); !apierrors.IsNotFound(err) {
				t.Errorf("get after delete: err = %v", err)
			}

			var events []string
			timeout := time.After(30 * time.Second)
			for len(events) < 5 {
				select {
				case ev := <-w.ResultChan():
					events = append(events, fmt.Sprintf("%s %s", ev.Type, objMeta(t, ev.Object).GetName()))
				case <-timeout:
					t.Fatalf("watch saw only %v", events)
				}
			}
			if want := "ADDED crud-0,ADDED crud-1,ADDED crud-2,MODIFIED crud-1,DELETED crud-2"; strings.Join(events, ",") != want {
				t.Errorf("watch events %v, want %s", events, want)
			}
		})
	}
}

func objMeta(t *testing.T, o runtime.Object) metav1.Object {
	t.Helper()
	m, err := meta.Accessor(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func listRV(t *testing.T, l runtime.Object) string {
	t.Helper()
	m, err := meta.ListAccessor(l)
	if err != nil {
		t.Fatal(err)
	}
	return m.GetResourceVersion()
}

func listNames(t *testing.T, l runtime.Object) string {
	t.Helper()
	var names []string
	if err := meta.EachListItem(l, func(o runtime.Object) error {
		names = append(names, objMeta(t, o).GetName())
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}
