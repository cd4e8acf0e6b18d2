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
package validation_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/apis/banlieue/validation"
	"github.com/firestoned/banlieue/pkg/apiserver"
	"github.com/firestoned/banlieue/pkg/resolve"
)

// examples are the repository's example manifests, as JSON: the seed
// corpus every fuzz target starts from (testdata/fuzz holds the rest).
func examples(f *testing.F, names ...string) [][]byte {
	f.Helper()
	var out [][]byte
	for _, n := range names {
		data, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "artifacts", "examples", n))
		if err != nil {
			f.Fatal(err)
		}
		j, err := yaml.YAMLToJSON(data)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, j)
	}
	return out
}

// validate runs what the API server runs on a create and on an update to
// the same object: decoding with defaulting into the internal type, then
// validation. It returns the errors, or nil for a kind it does not serve.
func validate(obj runtime.Object) field.ErrorList {
	switch o := obj.(type) {
	case *banlieue.VirtualMachine:
		return append(validation.ValidateVirtualMachine(o), validation.ValidateVirtualMachineUpdate(o, o.DeepCopy())...)
	case *banlieue.VMClass:
		return append(validation.ValidateVMClass(o), validation.ValidateVMClassUpdate(o, o.DeepCopy())...)
	case *banlieue.VMImage:
		return append(validation.ValidateVMImage(o), validation.ValidateVMImageUpdate(o, o.DeepCopy())...)
	case *banlieue.Provider:
		return append(validation.ValidateProvider(o), validation.ValidateProviderUpdate(o, o.DeepCopy())...)
	case *banlieue.VirtualMachineSnapshot:
		return append(validation.ValidateVirtualMachineSnapshot(o), validation.ValidateVirtualMachineSnapshotUpdate(o, o.DeepCopy())...)
	case *banlieue.VirtualMachineRestore:
		return append(validation.ValidateVirtualMachineRestore(o), validation.ValidateVirtualMachineRestoreUpdate(o, o.DeepCopy())...)
	}
	return nil
}

// FuzzDecodeValidate: any bytes, decoded as any banlieue.io kind, defaulted
// and validated, never panic, and every validation error names its field.
func FuzzDecodeValidate(f *testing.F) {
	for _, e := range examples(f, "virtualmachine.yaml", "virtualmachine-overrides.yaml", "vmclass.yaml",
		"vmclass-tpm-encrypted.yaml", "vmimage.yaml", "vmimage-kairos-deferred-install-tpm.yaml", "provider.yaml") {
		f.Add(e)
	}
	decoder := apiserver.Codecs.UniversalDecoder(banlieue.SchemeGroupVersion)
	f.Fuzz(func(t *testing.T, data []byte) {
		obj, _, err := decoder.Decode(data, nil, nil)
		if err != nil {
			return // undecodable: the server answers 400 before validation
		}
		for _, e := range validate(obj) {
			if e.Field == "" {
				t.Errorf("error without a field path: %v (input %q)", e, data)
			}
		}
	})
}

// FuzzResolve: the class ⊕ override merge, given any VM and class that
// decode, never panics; overrides it rejects carry field paths, and what it
// accepts resolves to a VM with the class's hardware shape.
func FuzzResolve(f *testing.F) {
	vms := examples(f, "virtualmachine.yaml", "virtualmachine-overrides.yaml")
	classes := examples(f, "vmclass.yaml", "vmclass-tpm-encrypted.yaml")
	for _, vm := range vms {
		for _, class := range classes {
			f.Add(vm, class)
		}
	}
	var image v1alpha1.VMImage
	if err := json.Unmarshal(examples(f, "vmimage.yaml")[0], &image); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, vmJSON, classJSON []byte) {
		var vm v1alpha1.VirtualMachine
		var class v1alpha1.VMClass
		if json.Unmarshal(vmJSON, &vm) != nil || json.Unmarshal(classJSON, &class) != nil {
			return
		}
		out, err := resolve.Resolve(&vm, &class, &image)
		var overrides *resolve.OverrideError
		switch {
		case errors.As(err, &overrides):
			for _, e := range overrides.Errors {
				if e.Field == "" {
					t.Errorf("override error without a field path: %v", e)
				}
			}
		case err == nil && out == nil:
			t.Error("no error and nothing resolved")
		}
	})
}
