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

package consoletest

import (
	"runtime"
	"strings"
)

// AllStacks is the stack of every goroutine of this process (up to 1 MiB
// of it), as a panic prints them: one goroutine a paragraph. Console tests
// print it when a session's goroutines outlive it.
func AllStacks() string {
	b := make([]byte, 1<<20)
	return string(b[:runtime.Stack(b, true)])
}

// GoroutinesIn counts this process's goroutines with a frame in pkg (an
// import path, or any text of their stacks: a function's name).
func GoroutinesIn(pkg string) int {
	n := 0
	for _, g := range strings.Split(AllStacks(), "\n\n") {
		if strings.Contains(g, pkg) {
			n++
		}
	}
	return n
}
