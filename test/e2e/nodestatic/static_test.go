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

// Package nodestatic installs banlieue on a cluster with a real node by
// hand, as docs/guides/static-install.md says: kubectl apply of the CRDs
// and artifacts/deploy, certificates made with openssl, every component a
// pod of the release image.
package nodestatic

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/runbook"
)

var (
	env    *devenv.Env
	cs     *kubernetes.Clientset
	root   string
	dirBin string
)

func TestMain(m *testing.M) {
	ctrllog.SetLogger(klog.NewKlogr())
	root, _ = filepath.Abs(filepath.Join("..", "..", ".."))
	dirBin = filepath.Join(root, "bin")
	os.Exit(devenv.NodeSuite{Name: "nodestatic", Root: root,
		Config: devenv.Config{ControlPlaneOnly: true, NodeImages: []string{filepath.Join(dirBin, "etcd-image.tar")}},
		Ready: func(e *devenv.Env) error {
			env = e
			return install()
		}}.Run(m))
}

// install follows docs/guides/static-install.md as it is, from a
// checkout, after giving the etcd's claims their volumes (the guide's
// prerequisite: this cluster has no provisioner).
func install() error {
	ctx := context.Background()
	var err error
	if cs, err = kubernetes.NewForConfig(env.Admin); err != nil {
		return err
	}
	// The shipped etcd runs as 65532 (its securityContext).
	if err := env.ProvideVolumes(ctx, "etcd-data", 3, "8Gi", 65532); err != nil {
		return err
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "guides", "static-install.md"))
	if err != nil {
		return err
	}
	steps, err := runbook.Parse(string(doc))
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp(env.Dir(), "static-install-")
	if err != nil {
		return err
	}
	if err := os.Symlink(filepath.Join(root, "artifacts"), filepath.Join(work, "artifacts")); err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "static-install.md "+format+"\n", args...) }
	if err := runbook.Follow(steps, work, guideEnv(), logf); err != nil {
		return fmt.Errorf("docs/guides/static-install.md %w\n%s", err, env.PodsSummary(ctx))
	}
	return nil
}

// TestStaticInstall: after docs/guides/static-install.md (TestMain), every
// Deployment and the etcd StatefulSet of artifacts/deploy has its replicas
// ready on the node.
func TestStaticInstall(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{devenv.APIServerNamespace, devenv.Namespace} {
		deployments, err := cs.AppsV1().Deployments(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deployments.Items {
			if d.Status.ReadyReplicas != *d.Spec.Replicas {
				t.Errorf("deployment %s/%s: %d of %d replicas ready\n%s", ns, d.Name, d.Status.ReadyReplicas, *d.Spec.Replicas, env.PodsSummary(ctx))
			}
		}
		if ns == devenv.Namespace && len(deployments.Items) != 4 {
			t.Errorf("%d Deployments in %s, want the controller and three providers", len(deployments.Items), ns)
		}
	}
	etcd, err := cs.AppsV1().StatefulSets(devenv.APIServerNamespace).Get(ctx, "banlieue-etcd", metav1.GetOptions{})
	if err != nil || etcd.Status.ReadyReplicas != 3 {
		t.Errorf("the etcd StatefulSet: %v, %d ready", err, etcd.Status.ReadyReplicas)
	}
}

// kubectl runs bin/kubectl as the administrator.
func kubectl(args ...string) (string, error) {
	out, err := exec.Command(filepath.Join(dirBin, "kubectl"), append([]string{"--kubeconfig", env.AdminKubeconfig}, args...)...).CombinedOutput()
	return string(out), err
}
