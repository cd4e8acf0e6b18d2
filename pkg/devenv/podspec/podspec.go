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
// Package podspec reads a container of a Deployment the way a kubelet
// would start it: its command line and environment, $(VAR) references
// expanded. The local environment runs banlieue's shipped containers as
// processes from it (devenv.StartContainer).
package podspec

import (
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// PodIP is what a container run as a process gets for its pod's address
// (valueFrom status.podIP): the loopback it serves on.
const PodIP = "127.0.0.1"

// Command is container c's arguments and environment (KEY=VALUE,
// sorted) as a kubelet would start it, given the ConfigMaps of its
// namespace by name. A ConfigMap it names and that is missing is an error,
// as it keeps the kubelet from starting the container.
func Command(c corev1.Container, configMaps map[string]*corev1.ConfigMap) (args, env []string, err error) {
	vars := map[string]string{}
	for _, from := range c.EnvFrom {
		if from.ConfigMapRef == nil {
			return nil, nil, fmt.Errorf("container %s: only ConfigMap envFrom is supported here", c.Name)
		}
		cm, ok := configMaps[from.ConfigMapRef.Name]
		if !ok {
			if from.ConfigMapRef.Optional != nil && *from.ConfigMapRef.Optional {
				continue
			}
			return nil, nil, fmt.Errorf("container %s: ConfigMap %s not found", c.Name, from.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			vars[from.Prefix+k] = v
		}
	}
	for _, e := range c.Env {
		switch {
		case e.ValueFrom == nil:
			vars[e.Name] = Expand(e.Value, vars)
		case e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP":
			// The process listens on loopback, its pod's address.
			vars[e.Name] = PodIP
		default:
			return nil, nil, fmt.Errorf("container %s: env %s: only valueFrom status.podIP is supported here", c.Name, e.Name)
		}
	}
	for _, a := range append(append([]string{}, c.Command...), c.Args...) {
		args = append(args, Expand(a, vars))
	}
	for k, v := range vars {
		env = append(env, k+"="+v)
	}
	sort.Strings(env)
	return args, env, nil
}

// Expand replaces $(VAR) with vars' value, as the kubelet does in command,
// args and env: $$ is a literal $, and a reference to an unknown variable
// stays as written.
func Expand(s string, vars map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
			continue
		case '(':
			if end := strings.IndexByte(s[i+2:], ')'); end >= 0 {
				name := s[i+2 : i+2+end]
				if v, ok := vars[name]; ok {
					b.WriteString(v)
				} else {
					b.WriteString(s[i : i+3+end])
				}
				i += 2 + end
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
