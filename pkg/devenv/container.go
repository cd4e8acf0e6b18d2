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
package devenv

import (
	"path/filepath"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/firestoned/banlieue/pkg/devenv/podspec"
)

// The test cluster has no nodes, so no kubelet runs the Deployments banlieue
// ships or generates. StartContainer runs the banlieue binary the way a
// kubelet would run such a container: the container's args, its env and
// envFrom ConfigMaps as the process environment, $(VAR) references in args
// expanded. Only the identity differs: a kubeconfig with a ServiceAccount
// token stands in for the projected one.

// StartContainer starts container c of a banlieue Deployment (its image's
// entrypoint is the banlieue binary) as podspec.Command says, authenticated
// with token, a ServiceAccount token; extra flags follow the container's
// (the test's listen addresses on loopback).
func (e *Env) StartContainer(name string, c corev1.Container, configMaps map[string]*corev1.ConfigMap, token string, extra ...string) (Process, error) {
	args, env, err := podspec.Command(c, configMaps)
	if err != nil {
		return Process{}, err
	}
	kubeconfig, err := e.tokenKubeconfig(name, token)
	if err != nil {
		return Process{}, err
	}
	args = append(append(args, "--kubeconfig="+kubeconfig), extra...)
	p, err := e.startProcessEnv(name, filepath.Join(e.cfg.BinDir, "banlieue"), env, args...)
	return Process{p}, err
}

// tokenKubeconfig writes a kubeconfig authenticating with a bearer token.
func (e *Env) tokenKubeconfig(name, token string) (string, error) {
	path := filepath.Join(e.cfg.Dir, "kubeconfigs", safeName(name)+"-token.kubeconfig")
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["devenv"] = &clientcmdapi.Cluster{Server: e.KubeAPIServerURL, CertificateAuthorityData: e.ca.CertPEM}
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: token}
	cfg.Contexts["devenv"] = &clientcmdapi.Context{Cluster: "devenv", AuthInfo: name, Namespace: "default"}
	cfg.CurrentContext = "devenv"
	return path, clientcmd.WriteToFile(*cfg, path)
}
