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

package kubectl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/streaming/pkg/httpstream"
)

// escapeByte is Ctrl+], the byte that detaches from a console, as with
// virtctl console and telnet.
const escapeByte = 0x1d

func newConsoleCommand(cfg *config, streams Streams) *cobra.Command {
	var takeover bool
	cmd := &cobra.Command{
		Use:   "console NAME",
		Short: "Attach to a VM's serial console (Ctrl+] detaches)",
		Long: `Attach to the serial console of a VirtualMachine
(virtualmachines/NAME/console). When standard input is a terminal it is put
in raw mode, so every key goes to the guest, and its size follows the
terminal's; Ctrl+] detaches. One session per console: another user's is
refused, naming them, unless --takeover ends it. When the server ends the
session (taken over, the VM powered off) its reason is printed and the
command fails.`,
		Example: `  kubectl banlieue console db-01
  kubectl banlieue console db-01 -n prod --takeover`,
		Args:              cobra.ExactArgs(1),
		ValidArgsFunction: completeVMs(cfg),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConsole(cmd.Context(), cfg, streams, args[0], takeover)
		},
	}
	cmd.Flags().BoolVar(&takeover, "takeover", false, "End another session on this console and attach.")
	return cmd
}

func runConsole(ctx context.Context, cfg *config, streams Streams, name string, takeover bool) error {
	restCfg, err := cfg.REST()
	if err != nil {
		return err
	}
	vms, ns, err := cfg.vms()
	if err != nil {
		return err
	}
	// The VM is looked up first so that a wrong name fails as kubectl get
	// does (NotFound) rather than as a failed websocket upgrade.
	if _, err := vms.Get(ctx, name, metav1.GetOptions{}); err != nil {
		return err
	}
	u, err := consoleURL(restCfg, ns, name, takeover)
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewWebSocketExecutor(rest.CopyConfig(restCfg), "GET", u)
	if err != nil {
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	opts := remotecommand.StreamOptions{Stdin: streams.In, Stdout: streams.Out, Tty: true}
	detached := &detacher{}
	if f, ok := streams.In.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		state, err := term.MakeRaw(int(f.Fd()))
		if err != nil {
			return fmt.Errorf("putting the terminal in raw mode: %w", err)
		}
		// Restored before anything is printed, whatever ends the session.
		defer func() { _ = term.Restore(int(f.Fd()), state) }()
		detached.in, detached.cancel = f, cancel
		opts.Stdin = detached
		sizes := newTerminalSizes(ctx, f)
		opts.TerminalSizeQueue = sizes
		fmt.Fprintf(streams.ErrOut, "Attaching to the console of %s/%s; Ctrl+] detaches.\r\n", ns, name)
	}
	err = exec.StreamWithContext(ctx, opts)
	if detached.done() {
		// The user left: not a failure, whatever the stream's end said.
		fmt.Fprintf(streams.ErrOut, "\r\nDetached from the console of %s/%s.\r\n", ns, name)
		return nil
	}
	if err != nil {
		return consoleError(err)
	}
	return nil
}

// consoleURL is virtualmachines/NAME/console on the API server restCfg
// names (whose Host may carry a path prefix).
func consoleURL(restCfg *rest.Config, ns, name string, takeover bool) (string, error) {
	// As client-go reads Host: a scheme defaulted as the TLS settings
	// imply, a path prefix kept.
	base, _, err := rest.DefaultServerUrlFor(restCfg)
	if err != nil {
		return "", err
	}
	u := base.JoinPath("/apis/banlieue.io/v1alpha1/namespaces", ns, "virtualmachines", name, "console")
	if takeover {
		u.RawQuery = url.Values{"takeover": {"true"}}.Encode()
	}
	return u.String(), nil
}

// consoleError says how a session ended: the server's reason (taken over,
// the console stream ended), or, when it never started, the server's
// refusal (in use by another user, no machine yet) as kubectl prints an
// API error.
func consoleError(err error) error {
	if errors.Is(err, context.Canceled) {
		return errors.New("the session was interrupted")
	}
	var refused *httpstream.UpgradeFailureError
	if errors.As(err, &refused) {
		var status *apierrors.StatusError
		if errors.As(refused.Cause, &status) {
			return status
		}
		return fmt.Errorf("could not attach to the console: %w", refused.Cause)
	}
	return fmt.Errorf("console session ended: %w", err)
}

// detacher is a terminal's input with Ctrl+] as the end: what precedes it
// goes to the guest, then the input ends (which closes the session as a
// client leaving) and, should the server not end it promptly, the stream
// is cancelled.
type detacher struct {
	in     io.Reader
	cancel context.CancelFunc
	mu     sync.Mutex
	seen   bool
}

func (d *detacher) Read(p []byte) (int, error) {
	if d.done() {
		return 0, io.EOF
	}
	n, err := d.in.Read(p)
	for i := 0; i < n; i++ {
		if p[i] == escapeByte {
			d.mu.Lock()
			d.seen = true
			d.mu.Unlock()
			if d.cancel != nil {
				time.AfterFunc(2*time.Second, d.cancel)
			}
			if i == 0 {
				return 0, io.EOF
			}
			return i, nil
		}
	}
	return n, err
}

func (d *detacher) done() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.seen
}

// terminalSizes is the terminal's size now, then after each SIGWINCH,
// until ctx ends.
type terminalSizes struct {
	sizes chan remotecommand.TerminalSize
}

func newTerminalSizes(ctx context.Context, f *os.File) *terminalSizes {
	q := &terminalSizes{sizes: make(chan remotecommand.TerminalSize, 1)}
	winch := make(chan os.Signal, 1)
	signal.Notify(winch, syscall.SIGWINCH)
	send := func() {
		w, h, err := term.GetSize(int(f.Fd()))
		if err != nil {
			return
		}
		select {
		case <-q.sizes: // only the latest size matters
		default:
		}
		q.sizes <- remotecommand.TerminalSize{Width: uint16(w), Height: uint16(h)}
	}
	send()
	go func() {
		defer signal.Stop(winch)
		defer close(q.sizes)
		for {
			select {
			case <-ctx.Done():
				return
			case <-winch:
				send()
			}
		}
	}()
	return q
}

// Next is the next size; nil once the session is over.
func (q *terminalSizes) Next() *remotecommand.TerminalSize {
	s, ok := <-q.sizes
	if !ok {
		return nil
	}
	return &s
}
