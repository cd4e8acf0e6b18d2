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

package kubectl

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/klog/v2"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// TestUntilNamedKeepsTheReflectorQuiet: a --wait whose list and watch
// keep failing (as one in flight at the wait's deadline does) ends with
// the wait's own error, and client-go's reflector logs none of its
// failures through the caller's logger, where kubectl-banlieue's land on
// the user's terminal ("Failed to watch ... context deadline exceeded"
// above "error: timed out ...").
func TestUntilNamedKeepsTheReflectorQuiet(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	logger := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, prefix+" "+args)
	}, funcr.Options{})
	ctx, cancel := context.WithTimeout(klog.NewContext(context.Background(), logger), 500*time.Millisecond)
	defer cancel()
	failing := errors.New("the apiserver is gone")
	err := untilNamed(ctx, "virtualmachine", "vm", &v1alpha1.VirtualMachine{}, nil,
		func(context.Context, metav1.ListOptions) (runtime.Object, error) { return nil, failing },
		func(context.Context, metav1.ListOptions) (watch.Interface, error) { return nil, failing },
		func(runtime.Object) (bool, error) { return false, nil })
	if err == nil {
		t.Fatal("the wait succeeded on an object never seen")
	}
	mu.Lock()
	defer mu.Unlock()
	for _, l := range logged {
		if strings.Contains(l, "Failed to") || strings.Contains(l, failing.Error()) {
			t.Errorf("the reflector logged through the caller's logger: %s", l)
		}
	}
}
