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
package bootstrap

import (
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

func TestGovcFromEnv(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		want    Govc
		wantErr string
	}{
		{"bare host", map[string]string{"GOVC_URL": "vc.example.com", "GOVC_USERNAME": "u", "GOVC_PASSWORD": "p"},
			Govc{Endpoint: "https://vc.example.com/sdk", Username: "u", Password: "p"}, ""},
		{"host and port, insecure", map[string]string{"GOVC_URL": "127.0.0.1:8989", "GOVC_USERNAME": "u", "GOVC_PASSWORD": "p", "GOVC_INSECURE": "1"},
			Govc{Endpoint: "https://127.0.0.1:8989/sdk", Username: "u", Password: "p", Insecure: true}, ""},
		{"credentials in the URL, another path", map[string]string{"GOVC_URL": "https://admin:s3cr%2Ft@vc.example.com/sdk/x"},
			Govc{Endpoint: "https://vc.example.com/sdk", Username: "admin", Password: "s3cr/t"}, ""},
		{"the variables win over the URL", map[string]string{"GOVC_URL": "https://a:b@vc:443", "GOVC_USERNAME": "u", "GOVC_PASSWORD": "p", "GOVC_INSECURE": "false"},
			Govc{Endpoint: "https://vc:443/sdk", Username: "u", Password: "p"}, ""},
		{"http is upgraded", map[string]string{"GOVC_URL": "http://vc/sdk", "GOVC_USERNAME": "u", "GOVC_PASSWORD": "p"},
			Govc{Endpoint: "https://vc/sdk", Username: "u", Password: "p"}, ""},
		{"no URL", map[string]string{}, Govc{}, "GOVC_URL is not set"},
		{"no password", map[string]string{"GOVC_URL": "vc", "GOVC_USERNAME": "u"}, Govc{}, "no credentials"},
		{"bad insecure", map[string]string{"GOVC_URL": "vc", "GOVC_USERNAME": "u", "GOVC_PASSWORD": "p", "GOVC_INSECURE": "yes please"}, Govc{}, "GOVC_INSECURE"},
		{"another scheme", map[string]string{"GOVC_URL": "ftp://vc", "GOVC_USERNAME": "u", "GOVC_PASSWORD": "p"}, Govc{}, "scheme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GovcFromEnv(func(k string) string { return tc.env[k] })
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %+v, %v; want %+v", got, err, tc.want)
			}
		})
	}
}

func TestGovcProvider(t *testing.T) {
	objs, err := GovcProvider(Govc{Endpoint: "https://vc/sdk", Username: "u", Password: "p", Insecure: true}, "banlieue-system", "vc", nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) != 2 || objs[0].GetKind() != "Secret" || objs[1].GetKind() != "Provider" {
		t.Fatalf("objects %v", objs)
	}
	if ref, _, _ := unstructured.NestedString(objs[1].Object, "spec", "connection", "credentialsRef", "name"); ref != "vc-credentials" {
		t.Errorf("credentialsRef %q", ref)
	}
	if _, err := GovcProvider(Govc{Endpoint: "https://vc/sdk", Username: "u", Password: "p"}, "ns", "vc", nil); err == nil {
		t.Error("a Provider that cannot verify its vCenter was rendered")
	}
}

func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetKind()+"/"+o.GetName())
	}
	return out
}

func TestOperator(t *testing.T) {
	certs, err := NewCertificates()
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Operator(Options{Namespace: "banlieue-ops", Image: "registry.example/banlieue:v9", Certificates: certs})
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(objs)
	for _, want := range []string{"Deployment/banlieue-apiserver", "Deployment/banlieue-controller", "Deployment/banlieue-operator",
		"StatefulSet/banlieue-etcd", "APIService/v1alpha1.banlieue.io", "Secret/" + ServingSecret, "CustomResourceDefinition/vspheremachines.infrastructure.banlieue.io",
		"ClusterRole/banlieue-operator", "Namespace/banlieue-ops"} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %s in %v", want, got)
		}
	}
	if objs[0].GetKind() != "CustomResourceDefinition" || objs[len(objs)-1].GetKind() != "APIService" {
		t.Errorf("order: first %s, last %s", got[0], got[len(got)-1])
	}
	out, err := YAML(objs)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(out), "banlieue-system") || strings.Contains(string(out), shippedImage) {
		t.Error("the shipped namespace or image is left in the install")
	}
	if strings.Count(string(out), "image: registry.example/banlieue:v9") != 3 {
		t.Errorf("the image is not on the 3 banlieue Deployments")
	}
	// The API server and the controller share the install namespace's
	// Providers, and the operator tells the providers it runs.
	for name, want := range map[string]bool{"banlieue-apiserver": true, "banlieue-controller": true, "banlieue-operator": true} {
		args := deploymentArgs(t, objs, name)
		if got := slices.Contains(args, "--shared-provider-namespace=banlieue-ops"); got != want || slices.Contains(args, "--shared-provider-namespace=banlieue-system") {
			t.Errorf("%s args %v: --shared-provider-namespace=banlieue-ops %v, want %v", name, args, got, want)
		}
	}
	// The APIService verifies the serving certificate, for the Service's name.
	var svc *unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == "APIService" {
			svc = o
		}
	}
	b64, _, _ := unstructured.NestedString(svc.Object, "spec", "caBundle")
	caPEM, _ := base64.StdEncoding.DecodeString(b64)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		t.Fatal("caBundle holds no certificate")
	}
	block, _ := pem.Decode(certs.Data[ServingSecret]["tls.crt"])
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, DNSName: "banlieue-apiserver.banlieue-apiserver.svc"}); err != nil {
		t.Errorf("the serving certificate does not verify against the caBundle: %v", err)
	}
	again, err := LoadCertificates(certs.Data)
	if err != nil || string(again.CA) != string(certs.CA) {
		t.Errorf("LoadCertificates: %v", err)
	}
	delete(certs.Data[EtcdClientSecret], "tls.key")
	if _, err := LoadCertificates(certs.Data); err == nil || !strings.Contains(err.Error(), EtcdClientSecret) {
		t.Errorf("an incomplete set loaded: %v", err)
	}
}

// deploymentArgs are the first container's arguments of the Deployment name.
func deploymentArgs(t *testing.T, objs []*unstructured.Unstructured, name string) []string {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == name {
			containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
			args, _, err := unstructured.NestedStringSlice(containers[0].(map[string]interface{}), "args")
			if err != nil {
				t.Fatal(err)
			}
			return args
		}
	}
	t.Fatalf("no Deployment %s", name)
	return nil
}

// The default install names the default shared namespace too, so what
// runs says where the shared Providers are.
func TestOperatorDefaultNamespace(t *testing.T) {
	objs, err := Operator(Options{CertManager: true})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"banlieue-apiserver", "banlieue-controller"} {
		if args := deploymentArgs(t, objs, name); !slices.Contains(args, "--shared-provider-namespace="+DefaultNamespace) {
			t.Errorf("%s args %v", name, args)
		}
	}
}

func TestCheckNamespace(t *testing.T) {
	for _, tc := range []struct {
		ns, wantErr string
	}{
		{"banlieue-system", ""},
		{"banlieue-ops", ""},
		{"default", ""},
		{"kube-system", "may not be installed in kube-system: it holds the cluster's own components"},
		{"kube-public", "may not be installed in kube-public: everyone may read it"},
		{"kube-node-lease", "may not be installed in kube-node-lease"},
		{APIServerNamespace, "may not be installed in banlieue-apiserver: it holds the API server's keys"},
		{"", "is not a namespace name"},
		{"Banlieue", `"Banlieue" is not a namespace name`},
		{"ops.example", "is not a namespace name"},
	} {
		err := CheckNamespace(tc.ns)
		if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
			t.Errorf("CheckNamespace(%q) = %v, want %q", tc.ns, err, tc.wantErr)
		}
	}
	// Rendering refuses them as well, for callers other than the command.
	if _, err := Operator(Options{Namespace: "kube-system", CertManager: true}); err == nil {
		t.Error("Operator rendered an install into kube-system")
	}
	if _, err := ProviderClass(Options{Namespace: APIServerNamespace}, "vsphere"); err == nil {
		t.Error("a ProviderClass running providers beside the API server's keys")
	}
}

func TestWithFlag(t *testing.T) {
	for _, tc := range []struct {
		args, want []string
	}{
		{[]string{"controller", "--leader-elect"}, []string{"controller", "--leader-elect", "--f=x"}},
		{[]string{"controller", "--f=old", "--leader-elect"}, []string{"controller", "--leader-elect", "--f=x"}},
		{[]string{"controller", "--f", "old", "--leader-elect"}, []string{"controller", "--leader-elect", "--f=x"}},
		{[]string{"controller", "--fx=keep"}, []string{"controller", "--fx=keep", "--f=x"}},
	} {
		if got := withFlag(tc.args, "f", "x"); !slices.Equal(got, tc.want) {
			t.Errorf("withFlag(%v) = %v, want %v", tc.args, got, tc.want)
		}
	}
}

func TestOperatorWithCertManager(t *testing.T) {
	objs, err := Operator(Options{CertManager: true})
	if err != nil {
		t.Fatal(err)
	}
	got := kinds(objs)
	if slices.Contains(got, "Secret/"+ServingSecret) || !slices.Contains(got, "Certificate/"+ServingSecret) {
		t.Errorf("cert-manager install: %v", got)
	}
	for _, o := range objs {
		if o.GetKind() == "APIService" {
			if _, has, _ := unstructured.NestedString(o.Object, "spec", "caBundle"); has || o.GetAnnotations()["cert-manager.io/inject-ca-from"] == "" {
				t.Errorf("APIService not injected by cert-manager: %v", o.Object)
			}
		}
	}
}

func TestProviderClass(t *testing.T) {
	backends, err := Backends()
	if err != nil || !slices.Equal(backends, []string{"libvirt", "proxmox", "vsphere"}) {
		t.Fatalf("backends %v, %v", backends, err)
	}
	pc, err := ProviderClass(Options{Namespace: "ops", Image: "img:1"}, "vsphere")
	if err != nil {
		t.Fatal(err)
	}
	if ns, _, _ := unstructured.NestedString(pc.Object, "spec", "namespace"); ns != "ops" {
		t.Errorf("namespace %q", ns)
	}
	if img, _, _ := unstructured.NestedString(pc.Object, "spec", "image"); img != "img:1" {
		t.Errorf("image %q", img)
	}
	if _, err := ProviderClass(Options{}, "hyperv"); err == nil {
		t.Error("a class for an unknown backend")
	}
}
