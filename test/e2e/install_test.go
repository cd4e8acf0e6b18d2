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
package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"

	"github.com/firestoned/banlieue/pkg/loopback"
)

// TestStaticProviders: each backend's provider Deployment of
// artifacts/deploy is the guide's (non-root, read-only root filesystem,
// probes, leader election, its ConfigMap as flag defaults), and the binary
// started exactly as its container says, with a token of its
// ServiceAccount, becomes ready and takes its settings from the ConfigMap:
// changing BANLIEUE_MACHINE_WORKERS there changes the worker count it runs.
func TestStaticProviders(t *testing.T) {
	deployments, configMaps := installObjects(t, "artifacts/deploy")
	for backend, kind := range map[string]string{"vsphere": "VSphereMachine", "libvirt": "LibvirtMachine", "proxmox": "ProxmoxMachine"} {
		t.Run(backend, func(t *testing.T) {
			name := "banlieue-provider-" + backend
			d, ok := deployments[name]
			if !ok {
				t.Fatalf("artifacts/deploy has no Deployment %s", name)
			}
			c := checkProductContainer(t, d)
			if !slices.Contains(c.Args, "--leader-elect") {
				t.Errorf("%s runs without --leader-elect: %q", name, c.Args)
			}
			cm := configMaps[name+"-config"]
			if cm == nil || len(c.EnvFrom) != 1 || c.EnvFrom[0].ConfigMapRef == nil || c.EnvFrom[0].ConfigMapRef.Name != cm.Name {
				t.Fatalf("%s does not take its flags from ConfigMap %s-config", name, name)
			}
			cm = cm.DeepCopy()
			cm.Data["BANLIEUE_MACHINE_WORKERS"] = "3"
			token := strings.TrimSpace(mustKC(t, "-n", "banlieue-system", "create", "token", d.Spec.Template.Spec.ServiceAccountName))
			log := startContainer(t, name, c, map[string]*corev1.ConfigMap{cm.Name: cm}, token)
			for _, want := range []string{
				fmt.Sprintf(`"Starting the provider" class=%q namespace="banlieue-system"`, backend),
				fmt.Sprintf(`controllerKind=%q worker count=3`, kind),
			} {
				// The workers start once this replica leads.
				eventually(t, time.Minute, func() error {
					if !strings.Contains(log(), want) {
						return fmt.Errorf("the provider's log lacks %s", want)
					}
					return nil
				})
			}
		})
	}
}

// installObjects builds a kustomization with kubectl and returns its
// Deployments and ConfigMaps by name.
func installObjects(t *testing.T, dir string) (map[string]*appsv1.Deployment, map[string]*corev1.ConfigMap) {
	t.Helper()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(strings.NewReader(mustKC(t, "kustomize", dir))))
	deployments, configMaps := map[string]*appsv1.Deployment{}, map[string]*corev1.ConfigMap{}
	for {
		doc, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return deployments, configMaps
		}
		if err != nil {
			t.Fatal(err)
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			t.Fatal(err)
		}
		switch meta.Kind {
		case "Deployment":
			d := &appsv1.Deployment{}
			if err := yaml.UnmarshalStrict(doc, d); err != nil {
				t.Fatal(err)
			}
			deployments[d.Name] = d
		case "ConfigMap":
			cm := &corev1.ConfigMap{}
			if err := yaml.UnmarshalStrict(doc, cm); err != nil {
				t.Fatal(err)
			}
			configMaps[cm.Name] = cm
		}
	}
}

// checkProductContainer checks what every banlieue Deployment promises: one
// container, non-root, read-only root filesystem, no privilege escalation,
// liveness on /healthz and readiness on /readyz of its health port.
func checkProductContainer(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	spec := d.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		t.Fatalf("%s has %d containers, want 1", d.Name, len(spec.Containers))
	}
	c := spec.Containers[0]
	if spec.SecurityContext == nil || spec.SecurityContext.RunAsNonRoot == nil || !*spec.SecurityContext.RunAsNonRoot {
		t.Errorf("%s: pod not runAsNonRoot", d.Name)
	}
	sc := c.SecurityContext
	if sc == nil || sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Errorf("%s: container not read-only root filesystem without privilege escalation", d.Name)
	}
	for probe, path := range map[*corev1.Probe]string{c.LivenessProbe: "/healthz", c.ReadinessProbe: "/readyz"} {
		if probe == nil || probe.HTTPGet == nil || probe.HTTPGet.Path != path || probe.HTTPGet.Port.String() != "health" {
			t.Errorf("%s: no probe on %s of port health", d.Name, path)
		}
	}
	return c
}

// startContainer runs container c with the test's loopback listen
// addresses, waits until its /readyz answers 200, and returns a function
// reading its log so far.
func startContainer(t *testing.T, name string, c corev1.Container, configMaps map[string]*corev1.ConfigMap, token string) func() string {
	t.Helper()
	metrics, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	health, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	p, err := env.StartContainer(name, c, configMaps, token,
		"--metrics-bind-address=127.0.0.1:"+strconv.Itoa(metrics), "--health-probe-bind-address=127.0.0.1:"+strconv.Itoa(health))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Stop)
	readyz := "http://127.0.0.1:" + strconv.Itoa(health) + "/readyz"
	eventually(t, time.Minute, func() error {
		resp, err := http.Get(readyz)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("%s: HTTP %d", readyz, resp.StatusCode)
		}
		return nil
	})
	return func() string {
		data, _ := os.ReadFile(filepath.Join(env.Logs(), name+".log"))
		return string(data)
	}
}
