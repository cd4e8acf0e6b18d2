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
package conflict

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func TestRequeue(t *testing.T) {
	gr := schema.GroupResource{Group: "banlieue.io", Resource: "virtualmachines"}
	conflict := apierrors.NewConflict(gr, "vm", errors.New("the object has been modified"))
	other := errors.New("vCenter unreachable")
	for _, tc := range []struct {
		name    string
		res     reconcile.Result
		err     error
		wantRes reconcile.Result
		wantErr error
	}{
		{name: "success passes", res: reconcile.Result{RequeueAfter: 5 * time.Second}, wantRes: reconcile.Result{RequeueAfter: 5 * time.Second}},
		{name: "other errors pass", err: other, wantErr: other},
		{name: "conflict requeues", err: conflict, wantRes: reconcile.Result{RequeueAfter: Retry}},
		{name: "wrapped conflict requeues", err: fmt.Errorf("updating status: %w", conflict), wantRes: reconcile.Result{RequeueAfter: Retry}},
		{name: "joined conflict requeues", err: errors.Join(other, fmt.Errorf("updating status: %w", conflict)), wantRes: reconcile.Result{RequeueAfter: Retry}},
		{name: "not found is no conflict", err: apierrors.NewNotFound(gr, "vm"), wantErr: apierrors.NewNotFound(gr, "vm")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := Requeue(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) { return tc.res, tc.err }))
			res, err := r.Reconcile(context.Background(), reconcile.Request{})
			if res != tc.wantRes {
				t.Errorf("result %+v, want %+v", res, tc.wantRes)
			}
			if fmt.Sprint(err) != fmt.Sprint(tc.wantErr) {
				t.Errorf("error %v, want %v", err, tc.wantErr)
			}
		})
	}
}
