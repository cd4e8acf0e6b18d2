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

package virtualmachine

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/proxy"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/registry/rest"

	"github.com/firestoned/banlieue/pkg/apis/banlieue"
	"github.com/firestoned/banlieue/pkg/console"
	"github.com/firestoned/banlieue/pkg/placement"
)

// ConsoleREST is virtualmachines/NAME/console: the VM's serial console,
// streamed from the process serving its Provider (which publishes where,
// Provider.status.console), through this server, whose own token that
// process accepts. Nothing of the client's credentials goes further.
type ConsoleREST struct {
	vms       rest.Getter
	providers rest.Getter
	// tokens are this server's tokens for console endpoints; nil when it
	// has none (standalone, without kube-apiserver).
	tokens TokenSource
}

// TokenSource gives this server's tokens for an audience
// (console.Tokens).
type TokenSource interface {
	Token(ctx context.Context, audience string) (string, error)
}

var _ rest.Connecter = &ConsoleREST{}

// New is the options object (a connecter serves no object).
func (*ConsoleREST) New() runtime.Object { return &banlieue.VirtualMachineConsoleOptions{} }

// Destroy releases nothing.
func (*ConsoleREST) Destroy() {}

// ConnectMethods: GET is a websocket's; POST as for pods' attach.
func (*ConsoleREST) ConnectMethods() []string { return []string{http.MethodGet, http.MethodPost} }

// NewConnectOptions reads ?takeover=.
func (*ConsoleREST) NewConnectOptions() (runtime.Object, bool, string) {
	return &banlieue.VirtualMachineConsoleOptions{}, false, ""
}

// Connect finds the VM's machine and its Provider's console endpoint,
// refusing with a reason when there is none to attach to.
func (r *ConsoleREST) Connect(ctx context.Context, name string, opts runtime.Object, responder rest.Responder) (http.Handler, error) {
	o, ok := opts.(*banlieue.VirtualMachineConsoleOptions)
	if !ok {
		return nil, fmt.Errorf("unexpected options %T", opts)
	}
	at, err := consoleEndpoint(ctx, r.vms, r.providers, r.tokens, name)
	if err != nil {
		return nil, err
	}
	requester := ""
	if u, ok := genericapirequest.UserFrom(ctx); ok {
		requester = u.GetName()
	}
	return console.Proxy{
		Endpoint:  at.endpoint,
		Target:    at.target,
		Takeover:  o.Takeover,
		Requester: requester,
		Token:     at.token,
		Responder: proxy.NewErrorResponder(responder),
	}.Handler()
}

// reached is where a VM's consoles are asked for: its Provider's console
// endpoint, its machine there, and this server's token for that Provider.
type reached struct {
	endpoint console.Endpoint
	target   console.Target
	token    string
}

// consoleEndpoint finds the VM's machine and its Provider's console
// endpoint (console and webconsole alike), refusing with a reason when
// there is none to ask.
func consoleEndpoint(ctx context.Context, vms, providers rest.Getter, tokens TokenSource, name string) (reached, error) {
	obj, err := vms.Get(ctx, name, &metav1.GetOptions{})
	if err != nil {
		return reached{}, err
	}
	vm := obj.(*banlieue.VirtualMachine)
	ref := vm.Status.InfrastructureRef
	if vm.Status.Scheduled == nil || ref == nil || ref.Name == "" {
		return reached{}, apierrors.NewConflict(banlieue.Resource("virtualmachines"), name,
			fmt.Errorf("it has no machine yet, so no console to attach to; kubectl wait --for=condition=Ready vm/%s first", name))
	}
	key := placement.QualifiedProvider(vm.Namespace, vm.Status.Scheduled.Provider)
	ns, pname, _ := strings.Cut(key, "/")
	pobj, err := providers.Get(genericapirequest.WithNamespace(ctx, ns), pname, &metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return reached{}, apierrors.NewServiceUnavailable(fmt.Sprintf("Provider %s is gone", key))
	}
	if err != nil {
		return reached{}, err
	}
	p := pobj.(*banlieue.Provider)
	if p.Status.Console == nil || p.Status.Console.Endpoint == "" {
		return reached{}, apierrors.NewServiceUnavailable(fmt.Sprintf(
			"Provider %s publishes no console endpoint: the process serving it is not running (or not leading yet), or its backend streams no console", key))
	}
	if tokens == nil {
		return reached{}, apierrors.NewServiceUnavailable("this API server has no identity to present to console endpoints (it runs without kube-apiserver)")
	}
	token, err := tokens.Token(ctx, console.ProviderAudience(key))
	if err != nil {
		return reached{}, apierrors.NewServiceUnavailable(err.Error())
	}
	return reached{
		endpoint: console.Endpoint{URL: p.Status.Console.Endpoint, CertificateSHA256: p.Status.Console.CertificateSHA256},
		target:   console.Target{Namespace: vm.Namespace, Resource: strings.ToLower(ref.Kind) + "s", Name: ref.Name, Provider: key},
		token:    token,
	}, nil
}
