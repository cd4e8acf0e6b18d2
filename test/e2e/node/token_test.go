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

package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// podToken reads the projected ServiceAccount token the kubelet wrote for
// pod p (its kube-api-access volume, under the node's kubelet root).
func podToken(p *corev1.Pod) (string, error) {
	matches, _ := filepath.Glob(filepath.Join(env.Dir(), "node", "kubelet", "pods", string(p.UID),
		"volumes", "kubernetes.io~projected", "kube-api-access-*", "token"))
	if len(matches) != 1 {
		return "", fmt.Errorf("pod %s: %d projected tokens", p.Name, len(matches))
	}
	data, err := os.ReadFile(matches[0])
	return strings.TrimSpace(string(data)), err
}

// asToken is a clientset of kube-apiserver authenticated by token alone.
func asToken(token string) (*kubernetes.Clientset, error) {
	cfg := rest.AnonymousClientConfig(env.Admin)
	cfg.BearerToken = token
	return kubernetes.NewForConfig(cfg)
}

// whoAmI is the user kube-apiserver authenticates c as.
func whoAmI(ctx context.Context, c *kubernetes.Clientset) (string, error) {
	r, err := c.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	return r.Status.UserInfo.Username, nil
}

// mayDo asks kube-apiserver, as c, whether c may do verb on the resource
// (group/resource, optionally a name, in a namespace).
func mayDo(ctx context.Context, c *kubernetes.Clientset, attrs authorizationv1.ResourceAttributes) (bool, error) {
	r, err := c.AuthorizationV1().SelfSubjectAccessReviews().Create(ctx, &authorizationv1.SelfSubjectAccessReview{
		Spec: authorizationv1.SelfSubjectAccessReviewSpec{ResourceAttributes: &attrs}}, metav1.CreateOptions{})
	if err != nil {
		return false, err
	}
	return r.Status.Allowed, nil
}
