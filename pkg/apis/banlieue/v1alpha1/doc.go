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
// Package v1alpha1 is the v1alpha1 version of the banlieue.io API: the
// provider-agnostic VirtualMachine, and the VMClass, VMImage and Provider it
// is built from.
//
// +k8s:openapi-gen=true
// +k8s:deepcopy-gen=package
// +k8s:conversion-gen=github.com/firestoned/banlieue/pkg/apis/banlieue
// +k8s:defaulter-gen=TypeMeta
// +k8s:openapi-model-package=com.github.firestoned.banlieue.pkg.apis.banlieue.v1alpha1
// +groupName=banlieue.io
package v1alpha1
