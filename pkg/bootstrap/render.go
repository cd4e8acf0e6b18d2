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
// Package bootstrap renders what "banlieue bootstrap" installs, from the
// same manifests as artifacts/deploy (embedded): the infrastructure CRDs,
// the API server with its APIService and certificates, the example etcd,
// the controller and the operator, then the ProviderClasses and, from govc's
// environment, a vSphere Provider. Rendering is pure; cmd/bootstrap applies.
package bootstrap

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/firestoned/banlieue/artifacts"
	"github.com/firestoned/banlieue/pkg/apply"
	"github.com/firestoned/banlieue/pkg/controllers"
)

// FieldManager is bootstrap's server-side apply field manager.
const FieldManager = "banlieue.io/bootstrap"

// Defaults of the shipped manifests, which options replace.
const (
	DefaultNamespace = "banlieue-system"
	// APIServerNamespace holds the API server, its etcd and their keys,
	// where no other identity reads anything.
	APIServerNamespace = "banlieue-apiserver"
	shippedImage       = "ghcr.io/firestoned/banlieue:v0.1.0"
	// Repository of release images; --version picks the tag.
	Repository = "ghcr.io/firestoned/banlieue"
)

// Options are what an install varies.
type Options struct {
	// Namespace of the controller, operator and provider workloads.
	Namespace string
	// Image of every banlieue container.
	Image string
	// CertManager has cert-manager issue the certificates and inject the
	// APIService's caBundle, instead of Certificates.
	CertManager bool
	// Certificates for the API server and etcd (self-signed, made by
	// NewCertificates, or those of an earlier install).
	Certificates *Certificates
}

// reservedNamespaces may not be the install namespace, and why: the
// operator is granted Deployments, ServiceAccounts, Roles and Secrets by
// name there, the providers read credentials there, and its Providers
// serve every namespace.
var reservedNamespaces = map[string]string{
	"kube-system":      "it holds the cluster's own components and their credentials, which the operator would be granted to read and replace",
	"kube-public":      "everyone may read it, unauthenticated users included: no place for Provider credentials",
	"kube-node-lease":  "it holds the nodes' heartbeat Leases and nothing else",
	APIServerNamespace: "it holds the API server's keys (its serving, etcd and CA Secrets), which no other banlieue identity may read",
}

// CheckNamespace refuses, saying why, an install namespace that is not a
// namespace name or that must not hold banlieue's controller, operator,
// providers, their credentials and the shared Providers.
func CheckNamespace(ns string) error {
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return fmt.Errorf("%q is not a namespace name: %s", ns, strings.Join(errs, "; "))
	}
	if why, ok := reservedNamespaces[ns]; ok {
		return fmt.Errorf("banlieue may not be installed in %s: %s", ns, why)
	}
	return nil
}

// namespace is the install namespace: the shipped one unless replaced.
func (o Options) namespace() string {
	if o.Namespace == "" {
		return DefaultNamespace
	}
	return o.Namespace
}

// Operator is what "banlieue bootstrap operator" applies, in order.
func Operator(o Options) ([]*unstructured.Unstructured, error) {
	if err := CheckNamespace(o.namespace()); err != nil {
		return nil, err
	}
	var objs []*unstructured.Unstructured
	crds, err := crds()
	if err != nil {
		return nil, err
	}
	objs = append(objs, crds...)
	for _, dir := range []string{"deploy/base", "deploy/etcd", "deploy/operator"} {
		docs, err := kustomization(o, dir)
		if err != nil {
			return nil, err
		}
		objs = append(objs, docs...)
	}
	if o.CertManager {
		docs, err := render(o, "deploy/cert-manager/certificates.yaml")
		if err != nil {
			return nil, err
		}
		objs = append(objs, docs...)
	} else {
		if o.Certificates == nil {
			return nil, fmt.Errorf("no certificates: make them with NewCertificates, or ask for cert-manager")
		}
		objs = append(objs, o.Certificates.Secrets()...)
	}
	for _, obj := range objs {
		var err error
		switch obj.GetKind() {
		case "APIService":
			err = setCABundle(obj, o)
		case "Deployment":
			err = setSharedProviderNamespace(obj, o.namespace())
		}
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", obj.GetKind(), apply.Name(obj), err)
		}
	}
	return ordered(objs), nil
}

// placingCommands are the banlieue commands that choose or explain a VM's
// Provider, and so must know the shared-Provider namespace; the operator
// passes it on to the providers it runs, whose machine check must agree.
var placingCommands = map[string]bool{"apiserver": true, "controller": true, "operator": true}

// setSharedProviderNamespace has the API server and the controller share
// the Providers of the install namespace with every namespace (the
// shipped manifests rely on the default, banlieue-system, and the API
// server's own namespace holds no hint of where the install is).
func setSharedProviderNamespace(obj *unstructured.Unstructured, ns string) error {
	containers, found, err := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if err != nil || !found {
		return err
	}
	for i, c := range containers {
		container, ok := c.(map[string]interface{})
		if !ok {
			return fmt.Errorf("containers[%d] is not an object", i)
		}
		args, _, err := unstructured.NestedStringSlice(container, "args")
		if err != nil {
			return fmt.Errorf("containers[%d].args: %w", i, err)
		}
		if len(args) == 0 || !placingCommands[args[0]] {
			continue
		}
		if err := unstructured.SetNestedStringSlice(container, withFlag(args, controllers.SharedProviderNamespaceFlag, ns), "args"); err != nil {
			return err
		}
	}
	return unstructured.SetNestedSlice(obj.Object, containers, "spec", "template", "spec", "containers")
}

// withFlag sets --flag=value in args, replacing a value already there
// (--flag=old, or --flag old).
func withFlag(args []string, flag, value string) []string {
	name := "--" + flag
	out := make([]string, 0, len(args)+1)
	for i := 0; i < len(args); i++ {
		switch {
		case args[i] == name:
			i++ // and its value
		case !strings.HasPrefix(args[i], name+"="):
			out = append(out, args[i])
		}
	}
	return append(out, name+"="+value)
}

// ProviderClass is the shipped ProviderClass of backend.
func ProviderClass(o Options, backend string) (*unstructured.Unstructured, error) {
	if err := CheckNamespace(o.namespace()); err != nil {
		return nil, err
	}
	docs, err := render(o, "deploy/providerclasses/"+backend+".yaml")
	if err != nil {
		return nil, fmt.Errorf("no ProviderClass is shipped for %q: %w", backend, err)
	}
	return docs[0], nil
}

// Backends are those with a shipped ProviderClass.
func Backends() ([]string, error) {
	entries, err := fs.ReadDir(artifacts.Deploy, "deploy/providerclasses")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		if name, ok := strings.CutSuffix(e.Name(), ".yaml"); ok && name != "kustomization" {
			out = append(out, name)
		}
	}
	return out, nil
}

// kustomization renders the resources a kustomization lists, in its order.
func kustomization(o Options, dir string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(artifacts.Deploy, path.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		docs, err := render(o, path.Join(dir, r))
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

// render reads one manifest with the install's namespace and image.
func render(o Options, name string) ([]*unstructured.Unstructured, error) {
	data, err := fs.ReadFile(artifacts.Deploy, name)
	if err != nil {
		return nil, err
	}
	if o.Namespace != "" && o.Namespace != DefaultNamespace {
		// Every banlieue-system in the manifests is the install namespace
		// (namespaces, subjects, flags).
		data = bytes.ReplaceAll(data, []byte(DefaultNamespace), []byte(o.Namespace))
	}
	if o.Image != "" {
		data = bytes.ReplaceAll(data, []byte(shippedImage), []byte(o.Image))
	}
	docs, err := apply.Decode(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return docs, nil
}

func crds() ([]*unstructured.Unstructured, error) {
	entries, err := fs.ReadDir(artifacts.CRDs, "crds")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, e := range entries {
		docs, err := decodeFile(artifacts.CRDs, path.Join("crds", e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, docs...)
	}
	return out, nil
}

// setCABundle points the APIService at the CA that signed the serving
// certificate, or has cert-manager inject it.
func setCABundle(obj *unstructured.Unstructured, o Options) error {
	if o.CertManager {
		unstructured.RemoveNestedField(obj.Object, "spec", "caBundle")
		obj.SetAnnotations(map[string]string{"cert-manager.io/inject-ca-from": APIServerNamespace + "/banlieue-apiserver-tls"})
		return nil
	}
	return unstructured.SetNestedField(obj.Object, base64.StdEncoding.EncodeToString(o.Certificates.CA), "spec", "caBundle")
}

// kindOrder applies what others refer to first: CRDs and Namespaces, then
// identities and their roles (a binding's role must exist), configuration,
// workloads, and the APIService last (it is Available once the API server
// runs).
var kindOrder = map[string]int{
	"CustomResourceDefinition": 0, "Namespace": 1, "ServiceAccount": 2, "ClusterRole": 3, "Role": 3,
	"ClusterRoleBinding": 4, "RoleBinding": 4, "Secret": 5, "ConfigMap": 5, "Issuer": 5, "Certificate": 6,
	"Service": 7, "StatefulSet": 8, "Deployment": 8, "PodDisruptionBudget": 9, "APIService": 10,
}

func ordered(objs []*unstructured.Unstructured) []*unstructured.Unstructured {
	sort.SliceStable(objs, func(i, j int) bool { return kindOrder[objs[i].GetKind()] < kindOrder[objs[j].GetKind()] })
	return objs
}

// YAML is objs as one multi-document YAML stream, the way "kubectl ...
// --dry-run=client -o yaml" prints them.
func YAML(objs []*unstructured.Unstructured) ([]byte, error) {
	var b bytes.Buffer
	for i, obj := range objs {
		if i > 0 {
			b.WriteString("---\n")
		}
		data, err := yaml.Marshal(obj.Object)
		if err != nil {
			return nil, err
		}
		b.Write(data)
	}
	return b.Bytes(), nil
}
