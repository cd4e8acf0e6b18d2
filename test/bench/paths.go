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
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer/cbor"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
	"k8s.io/client-go/dynamic"
	restclient "k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
)

// A path is one way to store VirtualMachines: (A) through kube-apiserver's
// aggregation proxy, (B) banlieue's own port, (C) the same schema as a CRD
// on kube-apiserver, (D) raw etcd with values of the same size.
type path interface {
	Name() string
	create(ctx context.Context, ns string, i int) error
	get(ctx context.Context, ns string, i int) error
	update(ctx context.Context, ns string, i int) error
	delete(ctx context.Context, ns string, i int) error
}

func vmName(i int) string { return fmt.Sprintf("vm-%06d", i) }

// verbOp is p's operation for verb (create, get, update or delete).
func verbOp(p path, verb string) func(ctx context.Context, ns string, i int) error {
	switch verb {
	case "create":
		return p.create
	case "get":
		return p.get
	case "update":
		return p.update
	}
	return p.delete
}

// typedBenchVM is a realistic VirtualMachine: labels, placement,
// overrides and user data, about 600 bytes of JSON.
func benchVM(apiVersion, ns string, i int) *v1alpha1.VirtualMachine {
	return &v1alpha1.VirtualMachine{
		TypeMeta: metav1.TypeMeta{APIVersion: apiVersion, Kind: "VirtualMachine"},
		ObjectMeta: metav1.ObjectMeta{Name: vmName(i), Namespace: ns, Labels: map[string]string{
			"app": "db-prod", "tier": "database", "team": fmt.Sprintf("team-%d", i%16), "bench.banlieue.io/index": fmt.Sprint(i),
		}},
		Spec: v1alpha1.VirtualMachineSpec{
			ClassRef: v1alpha1.LocalObjectReference{Name: "bench-class"}, ImageRef: v1alpha1.LocalObjectReference{Name: "bench-image"},
			Placement:         &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"dc": "dc1", "env": "prod"}}},
			DesiredPowerState: v1alpha1.PowerStatePoweredOn,
			UserData:          &v1alpha1.UserData{SecretRef: &v1alpha1.KeySelector{Name: "db-cloudinit", Key: "user-data"}},
			HardwareOverride: &v1alpha1.HardwareOverride{MemoryMiB: ptr.To[int64](65536),
				DiskOverrides: []v1alpha1.DiskOverride{{Name: "data", SizeGiB: ptr.To[int64](2000)}}},
			NetworkOverrides: []v1alpha1.NetworkOverride{{Name: "eth0", Static: &v1alpha1.StaticIPConfig{
				Address: fmt.Sprintf("10.%d.%d.%d", i/62500%250, i/250%250, i%250+1), Prefix: ptr.To[int32](16), Gateway: "10.0.0.1", Nameservers: []string{"10.0.0.53"}}}},
		},
	}
}

// manifest is what a client sends for a VM: the object without status.
type manifest struct {
	metav1.TypeMeta `json:",inline"`
	Metadata        metav1.ObjectMeta           `json:"metadata"`
	Spec            v1alpha1.VirtualMachineSpec `json:"spec"`
}

// sentVM is benchVM as a client sends it: a label added (an update's
// change) and the resourceVersion set (optimistic concurrency) when given.
func sentVM(apiVersion, ns string, i int, extraLabel, resourceVersion string) *v1alpha1.VirtualMachine {
	vm := benchVM(apiVersion, ns, i)
	if extraLabel != "" {
		vm.Labels["bench.banlieue.io/updated"] = extraLabel
	}
	vm.ResourceVersion = resourceVersion
	return vm
}

// apiPath is a Kubernetes API (A, B or C). CRUD requests are plain HTTP
// with JSON bodies built from typed structs, and responses are read but not
// decoded beyond the resourceVersion: the clients share the machine's
// cores with the servers, so they should spend as little as they can.
// Watches and subresources use the dynamic client.
type apiPath struct {
	name       string
	client     dynamic.Interface
	http       *http.Client
	base       string // https://host/apis/<group>/v1alpha1
	gvr        schema.GroupVersionResource
	apiVersion string
	// mediaType is what bodies are sent and answers accepted in (JSON
	// when empty).
	mediaType string
	// versions keeps the resourceVersion each create/update returned, so an
	// update is one PUT with the current resourceVersion (no extra GET).
	mu       sync.Mutex
	versions map[string]string
}

// withEncoding is p sending and accepting mediaType, named name, with
// resourceVersions of its own.
func (p *apiPath) withEncoding(mediaType, name string) *apiPath {
	if mediaType == runtime.ContentTypeJSON {
		mediaType = "" // p's hand-made JSON bodies
	}
	return &apiPath{name: name, client: p.client, http: p.http, base: p.base, gvr: p.gvr,
		apiVersion: p.apiVersion, mediaType: mediaType, versions: map[string]string{}}
}

// encodingName is a media type's short name in reports.
func encodingName(mediaType string) string {
	switch mediaType {
	case runtime.ContentTypeProtobuf:
		return "protobuf"
	case runtime.ContentTypeCBOR:
		return "CBOR"
	}
	return "JSON"
}

// benchScheme knows v1alpha1, for the protobuf and CBOR serializers.
var benchScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// The serializers of the encodings beside JSON, made once: the clients
// share the machine's cores with the servers.
var (
	protobufSerializer = protobuf.NewSerializer(benchScheme, benchScheme)
	cborSerializer     = cbor.NewSerializer(benchScheme, benchScheme)
)

// serializerFor is mediaType's serializer (protobuf or CBOR).
func serializerFor(mediaType string) runtime.Serializer {
	if mediaType == runtime.ContentTypeCBOR {
		return cborSerializer
	}
	return protobufSerializer
}

// body is benchVM i as p sends it.
func (p *apiPath) body(ns string, i int, extraLabel, resourceVersion string) ([]byte, error) {
	vm := sentVM(p.apiVersion, ns, i, extraLabel, resourceVersion)
	if p.mediaType == "" {
		return json.Marshal(manifest{TypeMeta: vm.TypeMeta, Metadata: vm.ObjectMeta, Spec: vm.Spec})
	}
	var buf bytes.Buffer
	err := serializerFor(p.mediaType).Encode(vm, &buf)
	return buf.Bytes(), err
}

// resourceVersion reads an answer's resourceVersion.
func (p *apiPath) resourceVersion(out []byte) (string, error) {
	if p.mediaType != "" {
		obj, _, err := serializerFor(p.mediaType).Decode(out, nil, &v1alpha1.VirtualMachine{})
		if err != nil {
			return "", err
		}
		return obj.(*v1alpha1.VirtualMachine).ResourceVersion, nil
	}
	var meta struct {
		Metadata struct {
			ResourceVersion string `json:"resourceVersion"`
		} `json:"metadata"`
	}
	err := json.Unmarshal(out, &meta)
	return meta.Metadata.ResourceVersion, err
}

func newAPIPath(name string, cfg *restclient.Config, group string) (*apiPath, error) {
	cfg = restclient.CopyConfig(cfg)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side throttling: measure the server
	cfg.ContentType = "application/json"
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	hc, err := restclient.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return &apiPath{name: name, client: c, http: hc, base: strings.TrimRight(cfg.Host, "/") + "/apis/" + group + "/v1alpha1",
		gvr: schema.GroupVersionResource{Group: group, Version: "v1alpha1", Resource: "virtualmachines"}, apiVersion: group + "/v1alpha1",
		versions: map[string]string{}}, nil
}

func (p *apiPath) Name() string { return p.name }

func (p *apiPath) url(ns string, i int) string {
	u := p.base + "/namespaces/" + ns + "/virtualmachines"
	if i >= 0 {
		u += "/" + vmName(i)
	}
	return u
}

// do sends one request and returns the response's resourceVersion when
// keep is set; any status but want is an error carrying the server's
// message.
func (p *apiPath) do(ctx context.Context, method, url string, body []byte, want int, keep bool) (string, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, rd)
	if err != nil {
		return "", err
	}
	mediaType := p.mediaType
	if mediaType == "" {
		mediaType = runtime.ContentTypeJSON
	}
	req.Header.Set("Accept", mediaType)
	if body != nil {
		req.Header.Set("Content-Type", mediaType)
	}
	resp, err := p.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", err
	}
	if resp.StatusCode != want {
		return "", fmt.Errorf("%s %s: %s: %.300s", method, url, resp.Status, out)
	}
	if !keep {
		return "", nil
	}
	rv, err := p.resourceVersion(out)
	if err != nil {
		return "", fmt.Errorf("%s %s: %w", method, url, err)
	}
	return rv, nil
}

func (p *apiPath) keep(ns string, i int, rv string) {
	p.mu.Lock()
	p.versions[ns+"/"+vmName(i)] = rv
	p.mu.Unlock()
}

func (p *apiPath) create(ctx context.Context, ns string, i int) error {
	body, err := p.body(ns, i, "", "")
	if err != nil {
		return err
	}
	rv, err := p.do(ctx, http.MethodPost, p.url(ns, -1), body, http.StatusCreated, true)
	if err == nil {
		p.keep(ns, i, rv)
	}
	return err
}

func (p *apiPath) get(ctx context.Context, ns string, i int) error {
	_, err := p.do(ctx, http.MethodGet, p.url(ns, i), nil, http.StatusOK, false)
	return err
}

func (p *apiPath) update(ctx context.Context, ns string, i int) error {
	p.mu.Lock()
	rv := p.versions[ns+"/"+vmName(i)]
	p.mu.Unlock()
	if rv == "" {
		return fmt.Errorf("%s/%s was not created", ns, vmName(i))
	}
	body, err := p.body(ns, i, time.Now().UTC().Format("150405.000000"), rv)
	if err != nil {
		return err
	}
	rv, err = p.do(ctx, http.MethodPut, p.url(ns, i), body, http.StatusOK, true)
	if err == nil {
		p.keep(ns, i, rv)
	}
	return err
}

func (p *apiPath) delete(ctx context.Context, ns string, i int) error {
	_, err := p.do(ctx, http.MethodDelete, p.url(ns, i), nil, http.StatusOK, false)
	return err
}

// etcdPath is the ceiling: etcd itself, with values the size of the JSON
// object an API server would store, under its own prefix.
type etcdPath struct {
	client *clientv3.Client
	value  string
}

// newEtcdPath writes through c values of size bytes: what banlieue stores
// for one benchmark VirtualMachine, measured in etcd at start-up.
func newEtcdPath(c *clientv3.Client, size int) *etcdPath {
	return &etcdPath{client: c, value: strings.Repeat("x", size)}
}

func (p *etcdPath) Name() string { return "D etcd" }

func (p *etcdPath) key(ns string, i int) string { return "/bench/" + ns + "/" + vmName(i) }

func (p *etcdPath) create(ctx context.Context, ns string, i int) error {
	// Like an API server: create only if absent (a transaction).
	k := p.key(ns, i)
	_, err := p.client.Txn(ctx).If(clientv3.Compare(clientv3.ModRevision(k), "=", 0)).Then(clientv3.OpPut(k, p.value)).Commit()
	return err
}

func (p *etcdPath) get(ctx context.Context, ns string, i int) error {
	_, err := p.client.Get(ctx, p.key(ns, i))
	return err
}

func (p *etcdPath) update(ctx context.Context, ns string, i int) error {
	_, err := p.client.Put(ctx, p.key(ns, i), p.value)
	return err
}

func (p *etcdPath) delete(ctx context.Context, ns string, i int) error {
	_, err := p.client.Delete(ctx, p.key(ns, i))
	return err
}
