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

package providers

import (
	"context"
	"errors"
	"time"
)

// WebConsoles is implemented by a backend that hands out one-time web
// console URLs (virtualmachines/NAME/webconsole, docs/console.md):
// vSphere's WebMKS, for which it has no serial console.
type WebConsoles interface {
	// WebConsoleURL asks the backend for a new web console URL of the VM
	// spec names (found as DeleteMachine finds it), and when it stops
	// being accepted. A VM that is not powered on is ErrNotPoweredOn.
	WebConsoleURL(ctx context.Context, spec MachineSpec) (url string, expires time.Time, err error)
}

// Errors of WebConsoleURL, which the console endpoint turns into reasons.
var (
	// ErrNotPoweredOn: a web console needs the VM running.
	ErrNotPoweredOn = errors.New("the VM is not powered on")
	// ErrNoWebConsole: the backend hands out no web console URL.
	ErrNoWebConsole = errors.New("the backend hands out no web console URL")
)

// NoSerialConsole is implemented by a backend that streams no serial
// console, to tell the user why and what to use instead: its sentence
// ends the refusal of virtualmachines/NAME/console, so the backend's own
// package names itself, not the provider's core.
type NoSerialConsole interface {
	NoSerialConsole() string
}

// NoSerialConsoleReason is b's NoSerialConsole sentence, "" when it
// gives none.
func NoSerialConsoleReason(b Backend) string {
	b, _ = unwrap(b)
	if n, ok := b.(NoSerialConsole); ok {
		return n.NoSerialConsole()
	}
	return ""
}

// WebConsoleOf is b's WebConsoles, each request bounded like a call;
// false when b's backend hands out no web console.
func WebConsoleOf(b Backend) (WebConsoles, bool) {
	b, d := unwrap(b)
	w, ok := b.(WebConsoles)
	if !ok {
		return nil, false
	}
	return boundedWebConsoles{w: w, d: d}, true
}

type boundedWebConsoles struct {
	w WebConsoles
	d Deadlines
}

func (b boundedWebConsoles) WebConsoleURL(ctx context.Context, spec MachineSpec) (string, time.Time, error) {
	ctx, done := b.d.call(ctx, "WebConsoleURL", b.d.Call)
	url, expires, err := b.w.WebConsoleURL(ctx, spec)
	done(err)
	return url, expires, err
}
