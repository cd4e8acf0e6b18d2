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

package imagetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// DeleteWhileInUse deletes img and waits (a minute at most) for its
// Deleting condition to say it is in use by machine (namespace/name), as
// it must while a clone of it lives; the message is returned.
func DeleteWhileInUse(t *testing.T, c client.Client, img *v1alpha1.VMImage, machine string) string {
	t.Helper()
	ctx := context.Background()
	if err := c.Delete(ctx, img); err != nil {
		t.Fatal(err)
	}
	var last error
	var msg string
	err := wait.PollUntilContextTimeout(ctx, 250*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(img), img); err != nil {
			last = err
			return false, nil
		}
		cond := meta.FindStatusCondition(img.Status.Conditions, v1alpha1.ImageDeleting)
		if cond == nil || cond.Status != metav1.ConditionTrue || cond.Reason != v1alpha1.ImageReasonInUse || !strings.Contains(cond.Message, machine) {
			last = fmt.Errorf("Deleting condition %+v does not name the clone's machine %s", cond, machine)
			return false, nil
		}
		msg = cond.Message
		return true, nil
	})
	if err != nil {
		t.Fatalf("not within a minute: %v", last)
	}
	return msg
}
