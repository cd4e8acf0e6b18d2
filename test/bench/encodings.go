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
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
	"k8s.io/apimachinery/pkg/runtime"
)

// encodings measures create, get and delete in each encoding banlieue
// offers beside JSON (protobuf; CBOR, which the benchmark's banlieue serves
// with --feature-gates=CBORServingAndStorage=true), on paths A and B, with
// JSON measured again beside them in the same phase so the ratios compare
// like with like.
func (h *harness) encodings(ctx context.Context, r *report) error {
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf, runtime.ContentTypeCBOR} {
		for _, base := range []*apiPath{h.a, h.b} {
			p := base.withEncoding(mt, base.name+" "+encodingName(mt))
			ns := "bench-enc-" + strings.ToLower(encodingName(mt)) + "-" + strings.ToLower(p.name[:1])
			if err := h.namespace(ctx, ns); err != nil {
				return err
			}
			for _, verb := range []string{"create", "get", "delete"} {
				op := verbOp(p, verb)
				res := run(ctx, h.pids, p.Name(), verb, 1, h.cfg.N, h.cfg.C, func(ctx context.Context, i int) error { return op(ctx, ns, i) })
				logf("  %-22s %-6s %8.0f ops/s  p50 %6.2f ms  p99 %7.2f ms  banlieue %.2f ms/op  errors %d", p.Name(), verb, res.OpsPerS, res.P50ms, res.P99ms, res.CPUms["banlieue"], res.Errors)
				r.encodings = append(r.encodings, res)
				if ctx.Err() != nil {
					return ctx.Err()
				}
			}
		}
	}
	return nil
}

// StorageResult is banlieue storing VMs in one media type.
type StorageResult struct {
	MediaType string `json:"mediaType"`
	// BytesPerVM is one benchmark VM's value in etcd.
	BytesPerVM int      `json:"bytesPerVM"`
	Results    []Result `json:"results"`
}

// storage restarts banlieue with each --storage-media-type in turn (on
// the same etcd) and measures create, get and update through path B: what
// storing protobuf instead of JSON saves or costs, to choose the default.
// banlieue is restarted as configured at the end.
func (h *harness) storage(ctx context.Context, r *report) error {
	defer func() {
		if err := h.env.RestartBanlieue(context.WithoutCancel(ctx)); err != nil {
			logf("restarting banlieue as configured: %v", err)
		}
		h.pids["banlieue"] = h.env.PIDs()["banlieue"]
	}()
	for _, mt := range []string{runtime.ContentTypeJSON, runtime.ContentTypeProtobuf} {
		if err := h.env.RestartBanlieue(ctx, "--storage-media-type="+mt); err != nil {
			return fmt.Errorf("restarting banlieue storing %s: %w", mt, err)
		}
		h.pids["banlieue"] = h.env.PIDs()["banlieue"]
		ns := "bench-storage-" + strings.ToLower(encodingName(mt))
		if err := h.namespace(ctx, ns); err != nil {
			return err
		}
		p := h.b.withEncoding(runtime.ContentTypeJSON, "B direct, stored "+encodingName(mt))
		s := StorageResult{MediaType: mt}
		// A restarted server's first write waits for its admission caches.
		if err := p.create(ctx, ns, h.cfg.N); err != nil {
			return fmt.Errorf("warming banlieue up: %w", err)
		}
		if err := p.delete(ctx, ns, h.cfg.N); err != nil {
			return err
		}
		for _, verb := range []string{"create", "get", "update"} {
			op := verbOp(p, verb)
			res := run(ctx, h.pids, p.Name(), verb, 1, h.cfg.N, h.cfg.C, func(ctx context.Context, i int) error { return op(ctx, ns, i) })
			logf("  %-26s %-6s %8.0f ops/s  banlieue %.2f ms/op  etcd %.2f ms/op  errors %d", p.Name(), verb, res.OpsPerS, res.CPUms["banlieue"], res.CPUms["etcd"], res.Errors)
			s.Results = append(s.Results, res)
		}
		size, err := h.valueSize(ctx, ns, 0)
		if err != nil {
			return err
		}
		s.BytesPerVM = size
		r.storage = append(r.storage, s)
		for i := range h.cfg.N {
			_ = p.delete(ctx, ns, i)
		}
	}
	return nil
}

// valueSize is the size of VM i of ns in etcd, as banlieue stored it.
func (h *harness) valueSize(ctx context.Context, ns string, i int) (int, error) {
	resp, err := h.etcd.Get(ctx, "/banlieue.io/registry/", clientv3.WithPrefix(), clientv3.WithKeysOnly())
	if err != nil {
		return 0, err
	}
	for _, kv := range resp.Kvs {
		if strings.HasSuffix(string(kv.Key), "/"+ns+"/"+vmName(i)) {
			v, err := h.etcd.Get(ctx, string(kv.Key))
			if err != nil || len(v.Kvs) != 1 {
				return 0, fmt.Errorf("reading %s: %v", kv.Key, err)
			}
			return len(v.Kvs[0].Value), nil
		}
	}
	return 0, fmt.Errorf("%s/%s is not in etcd", ns, vmName(i))
}
