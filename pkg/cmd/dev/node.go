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

package dev

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/firestoned/banlieue/hack/image/build"
	"github.com/firestoned/banlieue/pkg/devenv"
)

// nodeImages says whether this machine can run a real node (root, and
// what make tools builds and installs) and, if so, the images it loads:
// the release binary (make release-binary) packed as the image the
// shipped manifests name, so that what they deploy runs this checkout.
// Otherwise it says why not, and the controller and providers run as
// processes.
func nodeImages(binDir, dir string) (images []string, why string) {
	if err := devenv.CheckNodePrerequisites(binDir); err != nil {
		return nil, err.Error()
	}
	binary := filepath.Join(binDir, "banlieue-release")
	if _, err := os.Stat(binary); err != nil {
		return nil, binary + " is missing (make release-binary)"
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err.Error()
	}
	tarball := filepath.Join(dir, "banlieue-image.tar")
	if err := build.Write(binary, devenv.ReleaseImage, tarball); err != nil {
		return nil, fmt.Sprintf("packing the release image: %v", err)
	}
	return []string{tarball}, ""
}

const nodeMessage = `
A real node (%s: the kubelet, containerd, runc and a CNI bridge) runs pods;
this checkout's release binary is loaded as %s, the image
the shipped manifests name. banlieue's controller and providers run on it
as their shipped Deployments (their logs are copied beside the others);
etcd, kube-apiserver and banlieue's API server are processes:

  %s get nodes -o wide
  %s -n banlieue-system get deploy,pods -o wide
`

const noNodeMessage = `
No real node (%s): Deployments you apply stay Pending;
banlieue's controller and providers run as processes, with their
Deployments' arguments and identities.
`
