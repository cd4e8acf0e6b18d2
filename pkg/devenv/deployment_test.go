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
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// TestLeaseHolder: a Lease renewed within its duration is held by its
// holder; one not renewed since, or without a holder, by no one.
func TestLeaseHolder(t *testing.T) {
	now := time.Now()
	lease := func(holder *string, renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: holder,
			RenewTime: &metav1.MicroTime{Time: renewed}, LeaseDurationSeconds: ptr.To[int32](15)}}
	}
	for _, tc := range []struct {
		name string
		l    *coordinationv1.Lease
		want string
	}{
		{"renewed", lease(ptr.To("pod-a_1234"), now.Add(-2*time.Second)), "pod-a_1234"},
		{"expired", lease(ptr.To("pod-a_1234"), now.Add(-16*time.Second)), ""},
		{"released", lease(nil, now), ""},
		{"never renewed", &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To("pod-a_1234")}}, ""},
	} {
		if got := leaseHolder(tc.l, now); got != tc.want {
			t.Errorf("%s: holder %q, want %q", tc.name, got, tc.want)
		}
	}
}

// TestHolderPod: the holder identity names its pod, then "_": a pod whose
// name only starts the other's is not it.
func TestHolderPod(t *testing.T) {
	pods := []corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Name: "provider-7d9f-abc"}}, {ObjectMeta: metav1.ObjectMeta{Name: "provider-7d9f-ab"}}}
	for _, tc := range []struct{ holder, want string }{
		{"provider-7d9f-ab_0f1e", "provider-7d9f-ab"},
		{"provider-7d9f-abc_0f1e", "provider-7d9f-abc"},
		{"provider-7d9f-abcd_0f1e", ""},
		{"", ""},
	} {
		got := ""
		if p := holderPod(pods, tc.holder); p != nil {
			got = p.Name
		}
		if got != tc.want {
			t.Errorf("holder %q: pod %q, want %q", tc.holder, got, tc.want)
		}
	}
}
