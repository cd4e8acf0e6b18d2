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
	"fmt"
	"net/url"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// Govc is a vCenter as govc's environment names it.
type Govc struct {
	// Endpoint is https://HOST[:PORT]/sdk.
	Endpoint           string
	Username, Password string
	Insecure           bool
}

// GovcFromEnv reads GOVC_URL, GOVC_USERNAME, GOVC_PASSWORD and
// GOVC_INSECURE as govc does: the URL may be a bare host, host:port, or
// a URL with credentials and any path; the variables win over the URL's
// credentials. The endpoint is always https://HOST[:PORT]/sdk.
func GovcFromEnv(getenv func(string) string) (Govc, error) {
	raw := strings.TrimSpace(getenv("GOVC_URL"))
	if raw == "" {
		return Govc{}, fmt.Errorf("GOVC_URL is not set")
	}
	if !strings.Contains(raw, "://") {
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return Govc{}, fmt.Errorf("GOVC_URL: %w", err)
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return Govc{}, fmt.Errorf("GOVC_URL: scheme %q: a vCenter is reached over https", u.Scheme)
	}
	if u.Hostname() == "" {
		return Govc{}, fmt.Errorf("GOVC_URL %q names no host", getenv("GOVC_URL"))
	}
	g := Govc{Endpoint: (&url.URL{Scheme: "https", Host: u.Host, Path: "/sdk"}).String()}
	if u.User != nil {
		g.Username = u.User.Username()
		g.Password, _ = u.User.Password()
	}
	if v := getenv("GOVC_USERNAME"); v != "" {
		g.Username = v
	}
	if v := getenv("GOVC_PASSWORD"); v != "" {
		g.Password = v
	}
	if g.Username == "" || g.Password == "" {
		return Govc{}, fmt.Errorf("no credentials: set GOVC_USERNAME and GOVC_PASSWORD (or put them in GOVC_URL)")
	}
	if v := getenv("GOVC_INSECURE"); v != "" {
		if g.Insecure, err = strconv.ParseBool(v); err != nil {
			return Govc{}, fmt.Errorf("GOVC_INSECURE=%q: %w", v, err)
		}
	}
	return g, nil
}

// GovcProvider is the credentials Secret and the vSphere Provider of g, in
// namespace: the Secret is NAME-credentials; without insecure the
// Provider needs a caBundle (caPEM) for the vCenter's certificate.
func GovcProvider(g Govc, namespace, name string, caPEM []byte) ([]*unstructured.Unstructured, error) {
	secretName := name + "-credentials"
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: secretName, Namespace: namespace, Labels: map[string]string{"app.kubernetes.io/name": "banlieue"}},
		StringData: map[string]string{"username": g.Username, "password": g.Password},
	}
	p := &v1alpha1.Provider{
		TypeMeta:   metav1.TypeMeta{APIVersion: v1alpha1.SchemeGroupVersion.String(), Kind: "Provider"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Spec: v1alpha1.ProviderSpec{
			ProviderClassRef: v1alpha1.LocalObjectReference{Name: "vsphere"},
			Connection: v1alpha1.ProviderConnection{
				Endpoint: g.Endpoint, CredentialsRef: v1alpha1.LocalObjectReference{Name: secretName}, InsecureSkipTLSVerify: g.Insecure,
			},
		},
	}
	switch {
	case len(caPEM) > 0 && g.Insecure:
		return nil, fmt.Errorf("GOVC_INSECURE is set and a CA bundle is given: choose one")
	case len(caPEM) > 0:
		p.Spec.Connection.CABundle = &v1alpha1.CABundleSource{Inline: string(caPEM)}
	case !g.Insecure:
		return nil, fmt.Errorf("the vCenter's certificate cannot be verified: give --ca-file, or set GOVC_INSECURE=1 for a test vCenter")
	}
	var out []*unstructured.Unstructured
	for _, obj := range []runtime.Object{secret, p} {
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		out = append(out, u)
	}
	return out, nil
}
