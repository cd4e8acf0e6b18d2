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

// Command image builds banlieue's release image without Docker: the static
// release binary (-tags release: no dev harness, no simulators) as the one
// file of one layer on an empty base, run as a non-root user, written as a
// tarball "docker load" and "crane push" read.
//
//	go run ./hack/image -binary bin/banlieue-release -out bin/banlieue-image.tar -tag ghcr.io/firestoned/banlieue:dev
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/firestoned/banlieue/hack/image/build"
)

func main() {
	binary := flag.String("binary", "bin/banlieue-release", "The static release binary.")
	out := flag.String("out", "bin/banlieue-image.tar", "Where the image tarball goes.")
	tag := flag.String("tag", "ghcr.io/firestoned/banlieue:dev", "The image's name.")
	entrypoint := flag.String("entrypoint", build.Entrypoint, "Where the binary is in the image, its entrypoint.")
	flag.Parse()
	if err := build.WriteAt(*binary, *entrypoint, *tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
	fmt.Printf("image: %s written to %s\n", *tag, *out)
}
