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

package main

import (
	"context"
	"fmt"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// tenant measures create and get on paths A and C as an ordinary user: a
// ServiceAccount bound to Kubernetes' edit role in its namespace, which
// the shipped banlieue-view/-edit roles aggregate into (and a role of the
// same shape for the CRD twin). banlieue then pays a SubjectAccessReview
// through its authorization cache, kube-apiserver its RBAC evaluation,
// as for every real user; system:masters skips both.
func (h *harness) tenant(ctx context.Context, r *report) error {
	if err := h.crdEditRole(ctx); err != nil {
		return err
	}
	for _, p := range []struct {
		name, group, ns string
	}{{"A tenant", v1alpha1.GroupName, "bench-tenant-a"}, {"C tenant", BenchGroup, "bench-tenant-c"}} {
		cfg, err := h.tenantConfig(ctx, p.ns)
		if err != nil {
			return err
		}
		path, err := newAPIPath(p.name, cfg, p.group)
		if err != nil {
			return err
		}
		for _, verb := range []string{"create", "get", "delete"} {
			op := verbOp(path, verb)
			res := run(ctx, h.pids, path.Name(), verb, 1, h.cfg.N, h.cfg.C, func(ctx context.Context, i int) error { return op(ctx, p.ns, i) })
			logf("  %-10s %-6s %8.0f ops/s  p50 %6.2f ms  p99 %7.2f ms  kube-apiserver %.2f banlieue %.2f ms/op  errors %d", path.Name(), verb, res.OpsPerS, res.P50ms, res.P99ms,
				res.CPUms["kube-apiserver"], res.CPUms["banlieue"], res.Errors)
			r.tenant = append(r.tenant, res)
			if ctx.Err() != nil {
				return ctx.Err()
			}
		}
	}
	return nil
}

// crdEditRole lets edit use the CRD twin's VMs as banlieue-edit and
// banlieue-view let it use banlieue's.
func (h *harness) crdEditRole(ctx context.Context) error {
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "bench-crd-edit", Labels: map[string]string{"rbac.authorization.k8s.io/aggregate-to-edit": "true"}},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{BenchGroup}, Resources: []string{"virtualmachines"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete", "deletecollection"}}},
	}
	_, err := h.kube.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// tenantConfig is the REST config of ServiceAccount bench-tenant of ns,
// bound to edit there, authenticated by a bound token.
func (h *harness) tenantConfig(ctx context.Context, ns string) (*restclient.Config, error) {
	if err := h.namespace(ctx, ns); err != nil {
		return nil, err
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "bench-tenant", Namespace: ns}}
	if _, err := h.kube.CoreV1().ServiceAccounts(ns).Create(ctx, sa, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "bench-tenant-edit", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: ns}}}
	if _, err := h.kube.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, err
	}
	tok, err := h.kube.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa.Name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)}}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("token of %s/%s: %w", ns, sa.Name, err)
	}
	cfg := restclient.AnonymousClientConfig(h.admin)
	cfg.BearerToken = tok.Status.Token
	return cfg, nil
}
