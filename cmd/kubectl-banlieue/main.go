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

// Command kubectl-banlieue is the kubectl banlieue plugin: copied onto
// PATH (or installed with krew), kubectl runs it for "kubectl banlieue".
package main

import (
	"context"
	"os"

	"github.com/firestoned/banlieue/pkg/cmd/kubectl"
)

func main() {
	os.Exit(kubectl.Execute(context.Background(), os.Args[1:], kubectl.OSStreams()))
}
