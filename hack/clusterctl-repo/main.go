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

// Command clusterctl-repo writes banlieue's clusterctl provider repository
// (bootstrap.ClusterctlRepository) below -out: make generate writes it to
// artifacts/clusterctl, make verify to a temporary directory it compares.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/firestoned/banlieue/pkg/bootstrap"
)

func main() {
	out := flag.String("out", "artifacts/clusterctl", "the repository's root directory")
	flag.Parse()
	if err := write(*out); err != nil {
		fmt.Fprintln(os.Stderr, "clusterctl-repo:", err)
		os.Exit(1)
	}
}

func write(root string) error {
	files, err := bootstrap.ClusterctlRepository()
	if err != nil {
		return err
	}
	if err := os.RemoveAll(root); err != nil {
		return err
	}
	for name, data := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return err
		}
	}
	return nil
}
