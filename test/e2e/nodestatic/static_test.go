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
	"path/filepath"
	"strings"
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
	os.Exit(devenv.NodeSuite{Name: "nodestatic", Root: root, PodsOnly: true,
		Ready: func(e *devenv.Env) error {
			env = e
			return install()
		}}.Run(m))
}

// install follows docs/guides/static-install.md as it is (the suite gave
// the etcd's claims their volumes, the guide's prerequisite: this cluster
// has no provisioner).
func install() error {
	var err error
	if cs, err = kubernetes.NewForConfig(env.Admin); err != nil {
		return err
	}
	work, err := os.MkdirTemp(env.Dir(), "static-install-")
	if err != nil {
		return err
	}
	logf := func(format string, args ...any) { fmt.Fprintf(os.Stderr, "static-install.md "+format+"\n", args...) }
	return followGuide("static-install.md", nil, work, logf)
}

// followGuide runs docs/guides/NAME as a reader does (runbook.Follow), from
// work, a folder of a checkout (artifacts/ linked into it), after putting
// the site's values in place of the guide's (site: the guide's text to
// the value here, each of which the guide must still say); a reader's
// shell has kubectl on the PATH and the administrator's kubeconfig.
func followGuide(name string, site map[string]string, work string, logf func(string, ...any)) error {
	doc, err := os.ReadFile(filepath.Join(root, "docs", "guides", name))
	if err != nil {
		return err
	}
	text := string(doc)
	for from, to := range site {
		if !strings.Contains(text, from) {
			return fmt.Errorf("docs/guides/%s no longer says %q: the test's site values need updating", name, from)
		}
		text = strings.ReplaceAll(text, from, to)
	}
	steps, err := runbook.Parse(text)
	if err != nil {
		return fmt.Errorf("docs/guides/%s: %w", name, err)
	}
	if err := os.Symlink(filepath.Join(root, "artifacts"), filepath.Join(work, "artifacts")); err != nil {
		return err
	}
	environ := []string{"KUBECONFIG=" + env.AdminKubeconfig, "PATH=" + dirBin + ":" + os.Getenv("PATH")}
	if err := runbook.Follow(steps, work, environ, logf); err != nil {
		return fmt.Errorf("docs/guides/%s %w\n%s", name, err, env.PodsSummary(context.Background()))
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
