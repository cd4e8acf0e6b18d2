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
package devenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/klog/v2"
)

// process is one child process, logging to Dir/logs/<name>.log.
type process struct {
	name string
	cmd  *exec.Cmd
	log  *os.File
	done chan struct{}
	once sync.Once
	err  error
}

func (e *Env) startProcess(name, path string, args ...string) (*process, error) {
	return e.startProcessEnv(name, path, nil, args...)
}

// startProcessEnv starts a process with env (KEY=VALUE) after this
// process's own environment; nil inherits it unchanged.
func (e *Env) startProcessEnv(name, path string, env []string, args ...string) (*process, error) {
	if _, err := os.Stat(path); err != nil {
		return nil, fmt.Errorf("%s: %w (build it with 'make tools' / 'make build')", name, err)
	}
	logPath := filepath.Join(e.Logs(), name+".log")
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(log, "\n=== %s %s %v\n", time.Now().Format(time.RFC3339), path, args)
	cmd := exec.Command(path, args...)
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.Stdout, cmd.Stderr = log, log
	// Own process group, so that stopping also reaches any children, and a
	// Ctrl-C in the terminal goes to the supervisor only, which stops
	// everything in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, log: log, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	klog.V(2).InfoS("Started", "process", name, "pid", cmd.Process.Pid, "log", logPath)
	e.procs = append(e.procs, p)
	return p, nil
}

// stop sends SIGTERM to the process group, then SIGKILL after 10s, and waits.
func (p *process) stop() {
	p.once.Do(func() {
		pgid := -p.cmd.Process.Pid
		_ = syscall.Kill(pgid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
			_ = syscall.Kill(pgid, syscall.SIGKILL)
			<-p.done
		}
		p.log.Close()
	})
}

// Kill sends SIGKILL to the process (a crash, not a shutdown) and waits.
func (p *process) kill() {
	p.once.Do(func() {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.log.Close()
	})
}

func (p *process) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// pollProcess polls cond until it holds, the process exits, or timeout.
func pollProcess(ctx context.Context, p *process, timeout time.Duration, cond func(context.Context) bool) error {
	return wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		if p.exited() {
			return false, fmt.Errorf("%s exited (%v); see its log", p.name, p.err)
		}
		return cond(ctx), nil
	})
}

func (e *Env) waitHTTPSReady(ctx context.Context, p *process, url string, ca []byte, timeout time.Duration) error {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if err := pollProcess(ctx, p, timeout, func(ctx context.Context) bool { return httpGetOK(ctx, client, url+"/readyz") }); err != nil {
		return fmt.Errorf("%s not ready at %s: %w", p.name, url, err)
	}
	return nil
}

func httpGetOK(ctx context.Context, client *http.Client, url string) bool {
	if client == nil {
		client = &http.Client{Timeout: 5 * time.Second}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
