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
package controllers

import (
	"github.com/spf13/pflag"
	restclient "k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// ClientOptions are how a controller process talks to kube-apiserver.
type ClientOptions struct {
	Kubeconfig string
	// QPS and Burst bound the process's requests. client-go's defaults
	// (5/10, 20/30 in controller-runtime) cap scheduling at a few VMs per
	// second, as each VM costs several writes (make bench measured 2.5/s).
	QPS   float32
	Burst int
}

// DefaultClientOptions are the defaults of every controller process.
func DefaultClientOptions() ClientOptions { return ClientOptions{QPS: 200, Burst: 400} }

// AddFlags registers --kubeconfig, --kube-api-qps and --kube-api-burst.
func (o *ClientOptions) AddFlags(fs *pflag.FlagSet) {
	fs.StringVar(&o.Kubeconfig, "kubeconfig", o.Kubeconfig, "kubeconfig of the cluster (in-cluster configuration when empty).")
	fs.Float32Var(&o.QPS, "kube-api-qps", o.QPS, "Requests per second to kube-apiserver, sustained.")
	fs.IntVar(&o.Burst, "kube-api-burst", o.Burst, "Requests to kube-apiserver in a burst.")
}

// Config is the REST configuration these options describe.
func (o ClientOptions) Config() (*restclient.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", o.Kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = o.QPS, o.Burst
	return cfg, nil
}
