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
	"fmt"
	"io"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/firestoned/banlieue/pkg/console"
	"github.com/firestoned/banlieue/pkg/providers"
)

// OpenConsole attaches to the console of the machine t names, when this
// process serves it (console.OpenFunc): the VM found where its machine
// recorded it was built, as its deletion finds it.
func (r *MachineReconciler) OpenConsole(ctx context.Context, t console.Target, force bool) (io.ReadWriteCloser, error) {
	spec, backend, err := r.consoleMachine(ctx, t)
	if err != nil {
		return nil, err
	}
	cons, ok := providers.ConsoleOf(backend)
	if !ok {
		// The backend's own sentence, when it has one, says why and
		// what to use instead.
		why := providers.NoSerialConsoleReason(backend)
		if why == "" {
			why = fmt.Sprintf("the %s backend streams no serial console", r.Class)
		}
		return nil, fmt.Errorf("%w: %s", providers.ErrNoConsole, why)
	}
	return cons.OpenConsole(ctx, spec, force)
}

// consoleMachine finds the built machine t names and the backend of its
// Provider, when this process serves it and t's Provider is that
// Provider.
func (r *MachineReconciler) consoleMachine(ctx context.Context, t console.Target) (providers.MachineSpec, providers.Backend, error) {
	if t.Resource != r.Kind.Name+"s" {
		return providers.MachineSpec{}, nil, fmt.Errorf("%w: %s is not %ss", console.ErrNotServed, t.Resource, r.Kind.Name)
	}
	m := r.Kind.New()
	if err := r.Client.Get(ctx, client.ObjectKey{Namespace: t.Namespace, Name: t.Name}, m); err != nil {
		if apierrors.IsNotFound(err) {
			return providers.MachineSpec{}, nil, fmt.Errorf("%w: %v", console.ErrNotServed, err)
		}
		return providers.MachineSpec{}, nil, err
	}
	p, ok, err := r.provider(ctx, m)
	if err != nil {
		return providers.MachineSpec{}, nil, err
	}
	if !ok {
		return providers.MachineSpec{}, nil, fmt.Errorf("%w: its Provider is not served by this process", console.ErrNotServed)
	}
	// The API server's token was checked for t.Provider: only that
	// Provider's machines are opened with it.
	if key := p.Namespace + "/" + p.Name; key != t.Provider {
		return providers.MachineSpec{}, nil, fmt.Errorf("%w: its Provider is %s, not %s", console.ErrNotServed, key, t.Provider)
	}
	if m.CommonSpec().ProviderID == "" {
		return providers.MachineSpec{}, nil, fmt.Errorf("%w: its VM is not built yet", providers.ErrNoConsole)
	}
	spec, _, _ := r.builtSpec(m, p)
	backend, err := r.Providers.backend(ctx, p)
	if err != nil {
		return providers.MachineSpec{}, nil, err
	}
	return spec, backend, nil
}
