//go:build tools

// Package tools builds the Kubernetes control plane that banlieue's tests and
// local environment run against: kube-apiserver, kube-controller-manager,
// kube-scheduler, kubectl and the kubelet of the local node, at the pinned
// Kubernetes version. See hack/build-tools.sh.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
