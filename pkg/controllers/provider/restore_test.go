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

package provider

import (
	"testing"

	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
)

func TestNextRestore(t *testing.T) {
	req := &infrav1.RestoreRequest{ID: "r2", Snapshot: "s"}
	for _, tc := range []struct {
		name string
		req  *infrav1.RestoreRequest
		rec  *infrav1.RestoreStatus
		want restoreStep
	}{
		{"none asked", nil, nil, restoreNothing},
		{"new", req, nil, restoreSend},
		{"new after an older one", req, &infrav1.RestoreStatus{ID: "r1", Phase: infrav1.RestoreDone}, restoreSend},
		{"recorded with its task: follow it", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreRestoring, TaskRef: "UPID:1"}, restoreResume},
		{"recorded without a task: never asked twice", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreRestoring}, restoreInterrupted},
		{"done", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreDone}, restoreNothing},
		{"failed", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreFailed}, restoreNothing},
		{"unknown", req, &infrav1.RestoreStatus{ID: "r2", Phase: infrav1.RestoreUnknown}, restoreNothing},
	} {
		if got := nextRestore(tc.req, tc.rec); got != tc.want {
			t.Errorf("%s: nextRestore = %d, want %d", tc.name, got, tc.want)
		}
	}
}
