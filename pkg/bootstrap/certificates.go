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

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/firestoned/banlieue/pkg/pki"
)

// Secrets of the self-signed install, in APIServerNamespace.
const (
	CASecret         = "banlieue-ca"
	ServingSecret    = "banlieue-apiserver-tls"
	EtcdServerSecret = "banlieue-etcd-server-tls"
	EtcdClientSecret = "banlieue-etcd-client-tls"
)

// Certificates are the self-signed install's: a CA, the API server's serving
// certificate (what the APIService's caBundle verifies), etcd's member
// certificate and the API server's etcd client certificate. Each Secret
// holds tls.crt, tls.key and ca.crt.
type Certificates struct {
	CA []byte
	// Secrets' data by name.
	Data map[string]map[string][]byte
}

// NewCertificates issues a fresh set.
func NewCertificates() (*Certificates, error) {
	ca, err := pki.NewCA("banlieue-ca")
	if err != nil {
		return nil, err
	}
	caKey, err := ca.KeyPEM()
	if err != nil {
		return nil, err
	}
	svc := "banlieue-apiserver." + APIServerNamespace
	serving, err := ca.IssueServing(svc+".svc", []string{"banlieue-apiserver", svc, svc + ".svc", svc + ".svc.cluster.local"}, nil)
	if err != nil {
		return nil, err
	}
	etcd := "banlieue-etcd." + APIServerNamespace + ".svc"
	member, err := ca.IssuePeer(etcd, []string{etcd, "*." + etcd})
	if err != nil {
		return nil, err
	}
	client, err := ca.IssueClient("banlieue-apiserver")
	if err != nil {
		return nil, err
	}
	c := &Certificates{CA: ca.CertPEM, Data: map[string]map[string][]byte{}}
	c.Data[CASecret] = map[string][]byte{"tls.crt": ca.CertPEM, "tls.key": caKey, "ca.crt": ca.CertPEM}
	for name, kp := range map[string]*pki.KeyPair{ServingSecret: serving, EtcdServerSecret: member, EtcdClientSecret: client} {
		c.Data[name] = map[string][]byte{"tls.crt": kp.CertPEM, "tls.key": kp.KeyPEM, "ca.crt": ca.CertPEM}
	}
	return c, nil
}

// SecretNames are the Secrets a set is stored in.
var SecretNames = []string{CASecret, ServingSecret, EtcdServerSecret, EtcdClientSecret}

// LoadCertificates reads the set an earlier install stored (data by Secret
// name): a second bootstrap keeps it, so that the APIService's caBundle
// and the running servers stay valid.
func LoadCertificates(data map[string]map[string][]byte) (*Certificates, error) {
	for _, name := range SecretNames {
		d := data[name]
		for _, key := range []string{"tls.crt", "tls.key", "ca.crt"} {
			if len(d[key]) == 0 {
				return nil, fmt.Errorf("secret %s/%s has no %s", APIServerNamespace, name, key)
			}
		}
	}
	return &Certificates{CA: data[CASecret]["tls.crt"], Data: data}, nil
}

// Secrets are the set's Secrets.
func (c *Certificates) Secrets() []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, name := range SecretNames {
		s := &corev1.Secret{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: APIServerNamespace, Labels: map[string]string{"app.kubernetes.io/name": "banlieue"}},
			Type:       corev1.SecretTypeTLS,
			Data:       c.Data[name],
		}
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			panic(err) // a Secret always converts
		}
		u := &unstructured.Unstructured{Object: obj}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		out = append(out, u)
	}
	return out
}
