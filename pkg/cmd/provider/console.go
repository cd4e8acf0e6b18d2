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

package provider

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"time"

	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	"github.com/firestoned/banlieue/pkg/console"
)

// consoleFlags say where the console endpoint listens and what it
// publishes (docs/design/console.md).
type consoleFlags struct {
	bind, host, client string
}

func (c *consoleFlags) addFlags(f *pflag.FlagSet) {
	f.StringVar(&c.bind, "console-bind-address", "0",
		"Where the VMs' serial consoles (and web console URLs) are served to banlieue's API server (HOST:PORT, e.g. :8444); 0 serves none.")
	f.StringVar(&c.host, "console-advertise-host", os.Getenv("POD_IP"),
		"The host the API server reaches the console endpoint at, published in Provider.status.console (the pod's IP; the host name when empty).")
	f.StringVar(&c.client, "console-client", "system:serviceaccount:banlieue-apiserver:banlieue-apiserver",
		"The only user allowed to attach: banlieue's API server, presenting a token of audience "+console.AudiencePrefix+"NAMESPACE/NAME for the Provider asked.")
}

// serve starts the endpoint, on the leader only (the one-session rule
// lives in one process), and returns what the Providers publish; nil
// when disabled.
func (c *consoleFlags) serve(mgr manager.Manager, cfg *rest.Config, open console.OpenFunc, web console.WebConsoleFunc) (*v1alpha1.ProviderConsole, error) {
	if c.bind == "" || c.bind == "0" {
		return nil, nil
	}
	host := c.host
	if host == "" {
		var err error
		if host, err = os.Hostname(); err != nil {
			return nil, err
		}
	}
	cert, digest, err := console.SelfSigned(host)
	if err != nil {
		return nil, err
	}
	// Listening now gives the port to publish; only the leader accepts.
	ln, err := net.Listen("tcp", c.bind)
	if err != nil {
		return nil, err
	}
	kc, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	authn := console.TokenReviews(kc.AuthenticationV1().TokenReviews())
	srv := &console.Server{Open: open, Authenticate: authn, Client: c.client}
	// Web console URLs (backends without a serial console) are asked of
	// the same endpoint, with the same tokens: one thing to publish and
	// pin.
	mux := http.NewServeMux()
	mux.Handle(console.PathPrefix, srv)
	mux.Handle(console.WebConsolePathPrefix, &console.WebConsoles{URL: web, Authenticate: authn, Client: c.client})
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		TLSConfig: &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}}
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		go func() {
			<-ctx.Done()
			srv.Close()
			_ = hs.Close()
		}()
		klog.InfoS("Serving consoles", "address", ln.Addr().String())
		if err := hs.ServeTLS(ln, "", ""); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}))
	if err != nil {
		return nil, err
	}
	port := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
	name, _ := os.Hostname()
	ctrl.Log.Info("Console endpoint", "endpoint", "https://"+net.JoinHostPort(host, port))
	return &v1alpha1.ProviderConsole{Endpoint: "https://" + net.JoinHostPort(host, port), CertificateSHA256: digest, Holder: name}, nil
}
