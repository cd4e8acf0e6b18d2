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
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/images/fetch"
	"github.com/firestoned/banlieue/pkg/providers"
)

func TestReasonOf(t *testing.T) {
	for err, want := range map[error]string{
		fmt.Errorf("uploading: %w", &fetch.ChecksumError{Want: "sha256:a", Got: "sha256:b"}): v1alpha1.ImageReasonChecksumMismatch,
		&fetch.FetchError{StatusCode: 404, Err: errors.New("GET")}:                           v1alpha1.ImageReasonFetchFailed,
		fmt.Errorf("dial: %w", fetch.ErrDenied):                                              v1alpha1.ImageReasonFetchFailed,
		fmt.Errorf("sniff: %w", providers.ErrFormatMismatch):                                 v1alpha1.ImageReasonFormatMismatch,
		fmt.Errorf("build: %w", providers.ErrInstallTimedOut):                                v1alpha1.ImageReasonInstallTimedOut,
		fmt.Errorf("fits: %w", providers.ErrInsufficientStorage):                             v1alpha1.ImageReasonInsufficientStorage,
		errors.New("storage pool default: no space"):                                         v1alpha1.ImageReasonImportFailed,
	} {
		if got := reasonOf(err); got != want {
			t.Errorf("reasonOf(%v) = %s, want %s", err, got, want)
		}
	}
}

func TestBackoff(t *testing.T) {
	var last time.Duration
	for n := 1; n <= 12; n++ {
		d := backoff(n)
		if d < last || d > lastRetry || (n == 1 && d != firstRetry) {
			t.Errorf("backoff(%d) = %s after %s", n, d, last)
		}
		last = d
	}
	if last != lastRetry {
		t.Errorf("backoff never reaches %s (%s)", lastRetry, last)
	}
}
