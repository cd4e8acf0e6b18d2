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

package install

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/roundtrip"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/fuzzer"
)

// TestRoundTripTypes fuzzes every kind and checks internal -> v1alpha1 ->
// JSON -> internal gives the same object back.
func TestRoundTripTypes(t *testing.T) {
	roundtrip.RoundTripTestForAPIGroup(t, Install, fuzzer.Funcs)
}

// TestRoundTripProtobuf is the same through protobuf: every field of
// every kind has a field number and survives the encoding, internal ->
// v1alpha1 -> protobuf -> internal and v1alpha1 -> protobuf -> v1alpha1.
func TestRoundTripProtobuf(t *testing.T) {
	roundtrip.RoundTripProtobufTestForAPIGroup(t, Install, fuzzer.Funcs)
}
