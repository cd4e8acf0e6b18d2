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
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/firestoned/banlieue/pkg/apis/banlieue/v1alpha1"
	infrav1 "github.com/firestoned/banlieue/pkg/apis/infrastructure/v1alpha1"
	"github.com/firestoned/banlieue/pkg/devenv"
	"github.com/firestoned/banlieue/pkg/failuredomain"
	clientset "github.com/firestoned/banlieue/pkg/generated/clientset/versioned"
	"github.com/firestoned/banlieue/pkg/providers"
	"github.com/firestoned/banlieue/pkg/providers/libvirt"
	"github.com/firestoned/banlieue/pkg/providers/libvirt/libvirtd"
)

// ConsoleEcho is the console benchmark's result: a keystroke's echo
// through virtualmachines/NAME/console against the same console opened
// straight at libvirtd.
type ConsoleEcho struct {
	Keystrokes int    `json:"keystrokes"`
	Rounds     int    `json:"rounds"`
	Skipped    string `json:"skipped,omitempty"`
	// Milliseconds, each side's keystrokes of every round together.
	APIP50ms    float64 `json:"apiP50ms"`
	APIP99ms    float64 `json:"apiP99ms"`
	DirectP50ms float64 `json:"directP50ms"`
	DirectP99ms float64 `json:"directP99ms"`
}

// consoleBench boots the test guest on a private libvirtd through
// banlieue and times the echo of single keystrokes into its shell, in
// rounds alternated between the API (client-go's websocket executor
// through kube-apiserver, banlieue's API server and the provider's
// endpoint) and a console the benchmark opens at libvirtd itself (the
// backend's own call): one session at a time, as a console has.
func (h *harness) consoleBench(ctx context.Context) error {
	started := time.Now()
	res := ConsoleEcho{Keystrokes: h.cfg.ConsoleKeys, Rounds: 2}
	if m := libvirtd.Missing(); m != "" {
		res.Skipped = "libvirtd cannot run here: needs " + m
		return writeConsole(h.cfg.Out, res, started)
	}
	d, stop, err := h.guestLibvirtd(ctx)
	if err != nil {
		return err
	}
	defer stop()
	bc, err := clientset.NewForConfig(h.admin)
	if err != nil {
		return err
	}
	if err := h.libvirtObjects(ctx, bc, d); err != nil {
		return err
	}
	if _, err := h.env.StartController(0); err != nil {
		return err
	}
	proc, err := h.env.StartProvider("libvirt", "provider-libvirt", time.Minute, "--domain-type=qemu")
	if err != nil {
		return err
	}
	defer proc.Stop()
	vm, spec, err := bootConsoleGuest(ctx, bc, h, d)
	if err != nil {
		return err
	}
	sessions := libvirt.NewSessions(libvirt.Options{DomainType: "qemu"})
	defer func() { sessions.Forget("bench/console"); sessions.Wait() }()
	backend, err := sessions.Get(ctx, "bench/console", providers.Connection{Endpoint: d.URI})
	if err != nil {
		return err
	}
	consoles, ok := backend.(providers.Consoles)
	if !ok {
		return fmt.Errorf("the libvirt backend %T streams no console", backend)
	}
	var api, direct latencies
	for round := range res.Rounds {
		order := []string{"direct", "api"}
		if round%2 == 1 {
			order = []string{"api", "direct"}
		}
		for _, side := range order {
			var err error
			if side == "api" {
				err = echoes(ctx, func() (*typing, error) { return attachThroughAPI(h.admin, vm) }, res.Keystrokes, &api)
			} else {
				err = echoes(ctx, func() (*typing, error) { return attachDirect(ctx, consoles, spec) }, res.Keystrokes, &direct)
			}
			if err != nil {
				return fmt.Errorf("round %d, %s: %w", round+1, side, err)
			}
		}
	}
	res.APIP50ms, res.APIP99ms = api.quantile(0.50), api.quantile(0.99)
	res.DirectP50ms, res.DirectP99ms = direct.quantile(0.50), direct.quantile(0.99)
	logf("console echo: API p50 %.2f ms p99 %.2f ms; libvirtd p50 %.2f ms p99 %.2f ms", res.APIP50ms, res.APIP99ms, res.DirectP50ms, res.DirectP99ms)
	return writeConsole(h.cfg.Out, res, started)
}

// bootConsoleGuest makes a VM of the test guest and waits for its shell.
func bootConsoleGuest(ctx context.Context, bc *clientset.Clientset, h *harness, d *libvirtd.Daemon) (*v1alpha1.VirtualMachine, providers.MachineSpec, error) {
	vm := &v1alpha1.VirtualMachine{ObjectMeta: metav1.ObjectMeta{Name: "console-bench", Namespace: devenv.Namespace}, Spec: v1alpha1.VirtualMachineSpec{
		ClassRef: v1alpha1.LocalObjectReference{Name: "bench-libvirt-small"}, ImageRef: v1alpha1.LocalObjectReference{Name: "bench-libvirt-guest"},
		Placement: &v1alpha1.Placement{ProviderSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bench": "libvirt"}}}}}
	vms := bc.BanlieueV1alpha1().VirtualMachines(devenv.Namespace)
	if _, err := vms.Create(ctx, vm, metav1.CreateOptions{}); err != nil {
		return nil, providers.MachineSpec{}, err
	}
	domain := providers.BackendName(devenv.Namespace, vm.Name)
	deadline := time.Now().Add(5 * time.Minute)
	for !strings.Contains(d.SerialLog(domain), "BANLIEUE-READY") {
		if time.Now().After(deadline) {
			return nil, providers.MachineSpec{}, fmt.Errorf("the guest did not boot in 5 minutes")
		}
		time.Sleep(500 * time.Millisecond)
	}
	dyn, err := dynamic.NewForConfig(h.admin)
	if err != nil {
		return nil, providers.MachineSpec{}, err
	}
	lm, err := dyn.Resource(infrav1.GroupVersion.WithResource("libvirtmachines")).Namespace(vm.Namespace).Get(ctx, vm.Name, metav1.GetOptions{})
	if err != nil {
		return nil, providers.MachineSpec{}, err
	}
	host, _, _ := unstructured.NestedString(lm.Object, "status", "location", "host")
	return vm, providers.MachineSpec{Name: domain, InstanceUUID: string(lm.GetUID()), Location: failuredomain.Location{Host: host}}, nil
}

// typing is an attached console: keystrokes go to in; what the guest
// prints is appended to out.
type typing struct {
	in    io.Writer
	mu    sync.Mutex
	out   bytes.Buffer
	grew  chan struct{}
	close func()
}

func newTyping(in io.Writer, close func()) *typing {
	return &typing{in: in, grew: make(chan struct{}, 1), close: close}
}

func (t *typing) Write(p []byte) (int, error) {
	t.mu.Lock()
	n, err := t.out.Write(p)
	t.mu.Unlock()
	select {
	case t.grew <- struct{}{}:
	default:
	}
	return n, err
}

func (t *typing) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.out.Len()
}

// after waits until the output past offset from holds want.
func (t *typing) after(ctx context.Context, from int, want []byte) error {
	timeout := time.After(10 * time.Second)
	for {
		t.mu.Lock()
		found := bytes.Contains(t.out.Bytes()[from:], want)
		t.mu.Unlock()
		if found {
			return nil
		}
		select {
		case <-t.grew:
		case <-timeout:
			return fmt.Errorf("no %q from the guest in 10 s", want)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// echoes times n keystrokes on a fresh session: an x, timed until the
// shell echoes it, then a backspace (DEL) and its echo, untimed, so the
// line never grows.
func echoes(ctx context.Context, attach func() (*typing, error), n int, into *latencies) error {
	t, err := attach()
	if err != nil {
		return err
	}
	defer t.close()
	// A fresh prompt, and one untimed keystroke: the session is warm.
	from := t.len()
	if _, err := t.in.Write([]byte("\n")); err != nil {
		return err
	}
	if err := t.after(ctx, from, []byte("#")); err != nil {
		return err
	}
	for i := range n + 1 {
		from := t.len()
		start := time.Now()
		if _, err := t.in.Write([]byte("x")); err != nil {
			return err
		}
		if err := t.after(ctx, from, []byte("x")); err != nil {
			return err
		}
		if i > 0 {
			into.add(time.Since(start))
		}
		from = t.len()
		if _, err := t.in.Write([]byte{0x7f}); err != nil {
			return err
		}
		if err := t.after(ctx, from, []byte("\b")); err != nil {
			return err
		}
	}
	return nil
}

// attachThroughAPI attaches as kubectl banlieue console does.
func attachThroughAPI(admin *rest.Config, vm *v1alpha1.VirtualMachine) (*typing, error) {
	u := admin.Host + "/apis/banlieue.io/v1alpha1/namespaces/" + vm.Namespace + "/virtualmachines/" + vm.Name + "/console"
	exec, err := remotecommand.NewWebSocketExecutor(rest.CopyConfig(admin), "GET", u)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	inR, inW := io.Pipe()
	done := make(chan struct{})
	t := newTyping(inW, func() { cancel(); _ = inW.Close(); <-done })
	go func() {
		defer close(done)
		_ = exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdin: inR, Stdout: t, Tty: true})
	}()
	return t, nil
}

// attachDirect opens the console at libvirtd with the backend's own call.
func attachDirect(ctx context.Context, consoles providers.Consoles, spec providers.MachineSpec) (*typing, error) {
	var s io.ReadWriteCloser
	var err error
	// The API session just closed may still hold libvirt's console lock
	// for a moment.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if s, err = consoles.OpenConsole(ctx, spec, false); err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return nil, err
	}
	done := make(chan struct{})
	t := newTyping(s, func() { _ = s.Close(); <-done })
	go func() {
		defer close(done)
		_, _ = io.Copy(t, s)
	}()
	return t, nil
}

func writeConsole(dir string, r ConsoleEcho, started time.Time) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	raw, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "console.json"), append(raw, '\n'), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# banlieue console benchmark\n\nRun %s on %s: %d cores, %s, %s/%s. Took %s.\n\n", started.UTC().Format(time.RFC3339),
		host, runtime.NumCPU(), runtime.Version(), runtime.GOOS, runtime.GOARCH, time.Since(started).Round(time.Second))
	if r.Skipped != "" {
		fmt.Fprintf(&b, "Not measured: %s.\n", r.Skipped)
	} else {
		fmt.Fprintf(&b, "The test guest (QEMU without KVM) on a private libvirtd, its shell on the serial port. A keystroke is an `x` "+
			"timed until the shell echoes it (then a backspace, untimed). %d keystrokes per session, %d rounds alternated between "+
			"virtualmachines/NAME/console (client-go's websocket executor → kube-apiserver → banlieue's API server → the provider's "+
			"endpoint → libvirtd) and a console opened straight at libvirtd with the backend's own call (virDomainOpenConsole).\n\n", r.Keystrokes, r.Rounds)
		b.WriteString("| | p50 ms | p99 ms |\n|---|---:|---:|\n")
		fmt.Fprintf(&b, "| through the API | %.2f | %.2f |\n| straight at libvirtd | %.2f | %.2f |\n", r.APIP50ms, r.APIP99ms, r.DirectP50ms, r.DirectP99ms)
		p50, p99 := r.APIP50ms/r.DirectP50ms, r.APIP99ms/r.DirectP99ms
		met := func(x float64) string {
			if x <= 1.5 {
				return "met"
			}
			return "**not met**"
		}
		fmt.Fprintf(&b, "| API / libvirtd | %.2fx (target ≤ 1.5x: %s) | %.2fx (%s) |\n", p50, met(p50), p99, met(p99))
	}
	logf("wrote %s", filepath.Join(dir, "console.md"))
	return os.WriteFile(filepath.Join(dir, "console.md"), []byte(b.String()), 0o644)
}
