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
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/apiserver"
	"github.com/firestoned/banlieue/pkg/loopback"
)

// encoded is one request's answer: status, content type and body.
type encoded struct {
	status int
	ctype  string
	body   []byte
}

// request sends body (already in contentType, nil for none) and accepts
// accept only.
func request(t *testing.T, cfg *rest.Config, method, path, contentType, accept string, body []byte) encoded {
	t.Helper()
	got, err := tryRequest(cfg, method, path, contentType, accept, body)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func tryRequest(cfg *rest.Config, method, path, contentType, accept string, body []byte) (encoded, error) {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return encoded{}, err
	}
	req, err := http.NewRequestWithContext(context.Background(), method, cfg.Host+path, bytes.NewReader(body))
	if err != nil {
		return encoded{}, err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	req.Header.Set("Accept", accept)
	resp, err := hc.Do(req)
	if err != nil {
		return encoded{}, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	return encoded{resp.StatusCode, resp.Header.Get("Content-Type"), data}, err
}

func encodingClass(name string) *v1alpha1.VMClass {
	return &v1alpha1.VMClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "VMClass"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"encoding": "test"}},
		Spec: v1alpha1.VMClassSpec{Hardware: v1alpha1.VMClassHardware{CPUs: 2, MemoryMiB: 2048,
			Disks: []v1alpha1.DiskSpec{{Name: "root", SizeGiB: 20, StorageClass: "gold", Provisioning: "thin"}}}},
	}
}

// roundTrip creates a VMClass in contentType, then reads it and the list
// back in it, through cfg; each answer must be in that encoding and decode
// to what was sent.
func roundTrip(t *testing.T, cfg *rest.Config, s runtime.Serializer, contentType, name string) {
	t.Helper()
	var buf bytes.Buffer
	if err := s.Encode(encodingClass(name), &buf); err != nil {
		t.Fatal(err)
	}
	const classes = "/apis/banlieue.io/v1alpha1/vmclasses"
	for _, step := range []struct {
		method, path string
		body         []byte
		want         int
	}{{http.MethodPost, classes, buf.Bytes(), http.StatusCreated}, {http.MethodGet, classes + "/" + name, nil, http.StatusOK}} {
		ct := ""
		if step.body != nil {
			ct = contentType
		}
		got := request(t, cfg, step.method, step.path, ct, contentType, step.body)
		if got.status != step.want || got.ctype != contentType {
			t.Fatalf("%s %s in %s: %d %s: %q", step.method, step.path, contentType, got.status, got.ctype, got.body)
		}
		obj, _, err := s.Decode(got.body, nil, &v1alpha1.VMClass{})
		if err != nil {
			t.Fatalf("%s %s: decoding %s: %v", step.method, step.path, contentType, err)
		}
		c := obj.(*v1alpha1.VMClass)
		if c.Name != name || c.UID == "" || c.Spec.Hardware.MemoryMiB != 2048 || c.Labels["encoding"] != "test" || len(c.Spec.Hardware.Disks) != 1 {
			t.Errorf("%s %s in %s decoded to %+v", step.method, step.path, contentType, c)
		}
	}
	got := request(t, cfg, http.MethodGet, classes+"?labelSelector=encoding%3Dtest", "", contentType, nil)
	obj, _, err := s.Decode(got.body, nil, &v1alpha1.VMClassList{})
	if err != nil || got.ctype != contentType {
		t.Fatalf("list in %s: %d %s, %v", contentType, got.status, got.ctype, err)
	}
	found := false
	for _, c := range obj.(*v1alpha1.VMClassList).Items {
		found = found || c.Name == name
	}
	if !found {
		t.Errorf("list in %s does not hold %s", contentType, name)
	}
	if got := request(t, cfg, http.MethodDelete, classes+"/"+name, "", "application/json", nil); got.status != http.StatusOK {
		t.Errorf("delete: %d %s", got.status, got.body)
	}
}

// TestProtobuf: banlieue.io speaks protobuf — create, get and list, both
// through kube-apiserver's aggregation and on banlieue's own port — while
// CBOR stays refused without its feature gate (406 for an Accept of CBOR
// alone, 415 for a CBOR body).
func TestProtobuf(t *testing.T) {
	pb := protobuf.NewSerializer(apiserver.Scheme, apiserver.Scheme)
	roundTrip(t, env.Admin, pb, runtime.ContentTypeProtobuf, "proto-aggregated")
	roundTrip(t, env.Direct(), pb, runtime.ContentTypeProtobuf, "proto-direct")

	if got := request(t, env.Admin, http.MethodGet, "/apis/banlieue.io/v1alpha1/vmclasses", "", runtime.ContentTypeCBOR, nil); got.status != http.StatusNotAcceptable {
		t.Errorf("CBOR without the gate: %d %s, want 406", got.status, got.ctype)
	}
	var buf bytes.Buffer
	if err := cbor.NewSerializer(apiserver.Scheme, apiserver.Scheme).Encode(encodingClass("cbor-refused"), &buf); err != nil {
		t.Fatal(err)
	}
	if got := request(t, env.Admin, http.MethodPost, "/apis/banlieue.io/v1alpha1/vmclasses", runtime.ContentTypeCBOR, "application/json", buf.Bytes()); got.status != http.StatusUnsupportedMediaType {
		t.Errorf("a CBOR body without the gate: %d %s, want 415", got.status, got.body)
	}
}

// TestCBORFeatureGate: "banlieue apiserver --feature-gates=CBORServingAndStorage=true"
// (the binary, standalone with its embedded etcd) creates, gets and lists
// in CBOR.
func TestCBORFeatureGate(t *testing.T) {
	cfg := startStandalone(t, "--feature-gates=CBORServingAndStorage=true")
	roundTrip(t, cfg, cbor.NewSerializer(apiserver.Scheme, apiserver.Scheme), runtime.ContentTypeCBOR, "cbor")
}

// startStandalone runs "banlieue apiserver --standalone" with extra flags
// until the test ends and returns its administrator's config once ready.
func startStandalone(t *testing.T, extra ...string) *rest.Config {
	t.Helper()
	dir := t.TempDir()
	port, err := loopback.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "admin.kubeconfig")
	logf, err := os.Create(filepath.Join(dir, "banlieue.log"))
	if err != nil {
		t.Fatal(err)
	}
	args := append([]string{"apiserver", "--standalone", "--secure-port=" + strconv.Itoa(port),
		"--standalone-kubeconfig=" + kubeconfig, "--embedded-etcd-data-dir=" + filepath.Join(dir, "etcd")}, extra...)
	cmd := exec.Command(filepath.Join(binDir, "banlieue"), args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		logf.Close()
		if t.Failed() {
			log, _ := os.ReadFile(logf.Name())
			t.Logf("banlieue apiserver log:\n%s", log)
		}
	})
	var cfg *rest.Config
	eventually(t, time.Minute, func() error {
		if cfg, err = clientcmd.BuildConfigFromFlags("", kubeconfig); err != nil {
			return err
		}
		got, err := tryRequest(cfg, http.MethodGet, "/readyz", "", "*/*", nil)
		if err != nil {
			return err
		}
		if got.status != http.StatusOK {
			return fmt.Errorf("/readyz %d: %s", got.status, got.body)
		}
		return nil
	})
	return cfg
}
