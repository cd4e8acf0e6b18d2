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
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/firestoned/banlieue/pkg/loopback"
)

// What a cluster gives the workloads banlieue ships besides a kubelet:
// names for Services and pods (the API server finds its etcd by the
// headless Service's name, etcd members find each other by pod name) and
// volumes for claims (etcd's data). CoreDNS, built from Go modules
// (hack/build-tools.sh), serves the cluster.local zone from the API on
// loopback; pods reach it on the bridge's gateway, port 53, as the kubelet
// tells them (clusterDNS). It forwards nothing: there is no outside here.

// clusterDomain is the pods' DNS domain (the kubelet's clusterDomain).
const clusterDomain = "cluster.local"

// corefile serves the cluster's zone from the API through kubeconfig, on
// 127.0.0.1:port, ready on readyPort once its informers have synced.
func corefile(port, readyPort int, kubeconfig string) string {
	return fmt.Sprintf(`.:%d {
    bind 127.0.0.1
    errors
    ready 127.0.0.1:%d
    kubernetes %s in-addr.arpa ip6.arpa {
        kubeconfig %s
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }
}
`, port, readyPort, clusterDomain, kubeconfig)
}

// corednsUser is CoreDNS's identity: it reads Services, their endpoints,
// namespaces and pods, nothing else (corednsRole, bound with the node's
// identities).
const corednsUser = "system:coredns"

var corednsRole = &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "devenv:coredns"}, Rules: []rbacv1.PolicyRule{
	{APIGroups: []string{""}, Resources: []string{"services", "endpoints", "namespaces", "pods"}, Verbs: []string{"list", "watch"}},
	{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
}}

func (e *Env) startClusterDNS(ctx context.Context, n *node) error {
	kubeconfig, err := e.UserKubeconfig(corednsUser)
	if err != nil {
		return err
	}
	ports, err := loopback.FreePorts(2)
	if err != nil {
		return err
	}
	path := filepath.Join(n.dir, "Corefile")
	if err := os.WriteFile(path, []byte(corefile(ports[0], ports[1], kubeconfig)), 0o600); err != nil {
		return err
	}
	if n.dns, err = e.startProcess("coredns", filepath.Join(e.cfg.BinDir, "coredns"), "-conf", path); err != nil {
		return err
	}
	dns := strconv.Itoa(ports[0])
	for _, proto := range []string{"udp", "tcp"} {
		if err := n.natRule(proto, n.slot.gateway(), "53", "127.0.0.1:"+dns); err != nil {
			return err
		}
	}
	ready := "http://127.0.0.1:" + strconv.Itoa(ports[1]) + "/ready"
	return pollProcess(ctx, n.dns, time.Minute, func(ctx context.Context) bool {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, ready, nil)
		if err != nil {
			return false
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false
		}
		_ = resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
}

// ProvideVolumes creates count PersistentVolumes of size (no storage
// class, so claims without one bind to them), each a directory of the
// environment owned by uid, as an administrator of a cluster without a
// provisioner would: the shipped etcd's claims, say. They go with the
// environment.
func (e *Env) ProvideVolumes(ctx context.Context, prefix string, count int, size string, uid int) error {
	if e.node == nil {
		return fmt.Errorf("no real node (Config.Node)")
	}
	cs, err := kubernetes.NewForConfig(e.Admin)
	if err != nil {
		return err
	}
	quantity, err := resource.ParseQuantity(size)
	if err != nil {
		return fmt.Errorf("size %q: %w", size, err)
	}
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		dir := filepath.Join(e.node.dir, "volumes", name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		if err := os.Chown(dir, uid, uid); err != nil {
			return err
		}
		pv := &corev1.PersistentVolume{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PersistentVolumeSpec{
			Capacity:                      corev1.ResourceList{corev1.ResourceStorage: quantity},
			AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
			PersistentVolumeSource:        corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: dir}},
		}}
		if _, err := cs.CoreV1().PersistentVolumes().Create(ctx, pv, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("PersistentVolume %s: %w", name, err)
		}
	}
	return nil
}
